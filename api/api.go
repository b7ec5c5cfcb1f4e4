// Package api is the HTTP face of NornWeave: echo handlers, the wire types,
// the middleware and the one mapping from errors to HTTP responses. It never
// touches the database driver or a provider directly.
package api

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"golang.org/x/sync/semaphore"

	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// Store is what the handlers read and write directly; sends go through Sender.
type Store interface {
	CreateInbox(ctx context.Context, in *store.Inbox) error
	Inbox(ctx context.Context, id string) (*store.Inbox, error)
	CachedInbox(ctx context.Context, id string) (*store.Inbox, error)
	Inboxes(ctx context.Context, limit, offset int) ([]store.Inbox, error)
	UpdateInbox(ctx context.Context, id string, ch store.InboxChanges, now time.Time) (*store.Inbox, error)
	DeleteInbox(ctx context.Context, id string) error
	Thread(ctx context.Context, id string) (*store.Thread, error)
	Threads(ctx context.Context, inboxID string, limit, offset int) ([]store.Thread, error)
	Message(ctx context.Context, id string) (*store.Message, error)
	Messages(ctx context.Context, f store.MessageFilter) ([]store.Message, int64, error)
	MessageBodies(ctx context.Context, ids []string, withHTML bool) (map[string]store.Bodies, error)
	Ready(ctx context.Context) error
	ClaimIdempotencyKey(ctx context.Context, k *store.IdempotencyKey, notBefore time.Time) (*store.IdempotencyKey, error)
	CompleteIdempotencyKey(ctx context.Context, key string, status int, body string) error
	ReleaseIdempotencyKey(ctx context.Context, key, owner string) error
}

// Sender runs the send pipeline.
type Sender interface {
	Send(ctx context.Context, req skuld.SendRequest) (*store.Message, error)
}

// Limiter reports the state of the send throttle: the global windows, and
// an inbox's; and hears of changed inboxes, which other servers sharing it
// may hold copies of. A shared backend may fail (*skuld.UnavailableError).
type Limiter interface {
	State(ctx context.Context) (skuld.State, error)
	InboxState(ctx context.Context, inboxID string, o skuld.Override) (skuld.State, error)
	States(ctx context.Context, inboxID string, o skuld.Override) (global, inbox skuld.State, err error)
	InboxesChanged(ctx context.Context) error
}

// Options configures the API. Store, Sender and Limiter are required.
type Options struct {
	Store   Store
	Sender  Sender
	Limiter Limiter
	Logger  *slog.Logger

	// APIKey, when set, is required on every /v1 route.
	APIKey string
	// AuthFailureLimit is how many failed API key attempts one client
	// address may make in 15 minutes before it gets 429; 0 = no limit.
	AuthFailureLimit int
	// CORSOrigins lists the origins allowed to call the API from a browser
	// ("*" for any); empty sends no CORS headers at all.
	CORSOrigins []string
	// EmailDomain is the domain of new inboxes' addresses.
	EmailDomain string
	// Attachment limits, in bytes and items.
	AttachmentMaxSize      int64
	AttachmentMaxTotalSize int64
	AttachmentMaxCount     int
	// Clock is the time: wall for timestamps, monotonic for the throttle.
	// Nil: a skuld.SystemClock.
	Clock skuld.Clock
	// InstanceID names this server process in the idempotency keys it
	// claims; nil: a new UUID.
	InstanceID string
	// Metrics is told every request and serves /metrics; nil: none.
	Metrics Metrics
	// MetricsAPIKey, when set, is required on /metrics (which is
	// otherwise open, like /health).
	MetricsAPIKey string
	// BodyMaxSize and HTMLMaxSize cap a send's body and html, in bytes;
	// 0 means 1 MiB and 2 MiB.
	BodyMaxSize int64
	HTMLMaxSize int64
	// RequestsInFlight caps the bytes of large request bodies being
	// processed at once; 0 means 64 MiB. It is raised to the request size
	// limit if smaller, so that the largest request can always run.
	RequestsInFlight int64
	// SearchTimeout bounds one search (POST /v1/search, GET /v1/messages?q=);
	// 0 means 10 s.
	SearchTimeout time.Duration
	// KeyLease, when several servers share the database, is how long a
	// key claimed by another server may still be in flight there: until
	// then it is that server's (409), not abandoned. 0 (one server): a key
	// of another process belongs to a server that stopped.
	KeyLease time.Duration
}

// API holds the handlers' dependencies.
type API struct {
	Options
	logger       *slog.Logger
	bodyLimit    int64
	authFailures *authFailures
	instance     string
	draining     atomic.Bool
	inflight     *semaphore.Weighted
}

// Server is the HTTP handler of the whole API.
type Server struct {
	*echo.Echo
	api *API
}

// Drain makes every later request (but /health) a 503 with Retry-After: the
// first step of a graceful shutdown, while the sends in flight finish.
func (s *Server) Drain() { s.api.draining.Store(true) }

// New returns the HTTP handler of the whole API.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = skuld.NewSystemClock()
	}
	if o.InstanceID == "" {
		o.InstanceID = uuid.NewString()
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
	o = withLimitDefaults(o)
	a := &API{
		Options:      o,
		logger:       o.Logger,
		instance:     o.InstanceID,
		bodyLimit:    requestLimit(o),
		authFailures: newAuthFailures(o.AuthFailureLimit),
	}
	a.RequestsInFlight = max(a.RequestsInFlight, a.bodyLimit)
	a.inflight = semaphore.NewWeighted(a.RequestsInFlight)
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = a.errorHandler
	e.JSONSerializer = jsonSerializer{}
	// The routes are known once registered; the metrics middleware, which
	// runs before any of them is matched, reads the set at request time.
	routes := map[string]bool{}
	e.Use(a.observe(routes))
	a.middleware(e)
	a.routes(e)
	for _, r := range e.Routes() {
		routes[r.Method+" "+r.Path] = true
	}
	return &Server{Echo: e, api: a}
}
