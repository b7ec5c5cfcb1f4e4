// Package api is the HTTP face of NornWeave: echo handlers, the wire types,
// the middleware and the one mapping from errors to HTTP responses. It never
// touches the database driver or a provider directly.
package api

import (
	"context"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"golang.org/x/sync/semaphore"

	"github.com/nornweave/nornweave/api/admin"
	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/outbox"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// Store is what the handlers read and write directly; sends go through Sender.
type Store interface {
	CreateInbox(ctx context.Context, in *store.Inbox) error
	Inbox(ctx context.Context, id string) (*store.Inbox, error)
	InboxCopy(ctx context.Context, id string) (*store.Inbox, error) // for a send: see skuld.Store
	Inboxes(ctx context.Context, limit, offset int) ([]store.Inbox, error)
	BusiestInboxes(ctx context.Context, since time.Time, limit int) ([]store.Inbox, error)
	// SendCounts and Complaints read what the dashboard charts.
	SendCounts(ctx context.Context, width string, from, to time.Time) ([]store.SendCount, error)
	Complaints(ctx context.Context, since time.Time) (hardBounces, complaints int64, err error)
	// CreateAdminLogout and AdminLoggedOut record and check the
	// dashboard's logouts.
	CreateAdminLogout(ctx context.Context, id string, exp time.Time) error
	AdminLoggedOut(ctx context.Context, id string) (bool, error)
	UpdateInbox(ctx context.Context, id string, ch store.InboxChanges, now time.Time) (*store.Inbox, error)
	DeleteInbox(ctx context.Context, id string, clk clock.Clock) error
	Thread(ctx context.Context, id string) (*store.Thread, error)
	Threads(ctx context.Context, inboxID string, limit, offset int) ([]store.Thread, error)
	Message(ctx context.Context, id string) (*store.Message, error)
	Messages(ctx context.Context, f store.MessageFilter) ([]store.Message, int64, error)
	MessageBodies(ctx context.Context, ids []string, withHTML bool) (map[string]store.Bodies, error)
	Attachment(ctx context.Context, id string) (*store.Attachment, error)
	Attachments(ctx context.Context, f store.AttachmentFilter) ([]store.Attachment, error)
	AttachmentContent(ctx context.Context, id string) ([]byte, error)
	Ready(ctx context.Context) error
	ClaimIdempotencyKey(ctx context.Context, k *store.IdempotencyKey, notBefore time.Time) (*store.IdempotencyKey, error)
	CompleteIdempotencyKey(ctx context.Context, key string, status int, body string) error
	ReleaseIdempotencyKey(ctx context.Context, key, owner string) error
	MessageEvents(ctx context.Context, messageID string) ([]store.DeliveryEvent, error)
	Suppressions(ctx context.Context, f store.SuppressionFilter) ([]store.Suppression, int64, error)
	AddSuppression(ctx context.Context, sp *store.Suppression) (*store.Suppression, bool, error)
	DeleteSuppression(ctx context.Context, email string) error
	WebhookEndpoints(ctx context.Context) ([]store.WebhookEndpoint, error)
	WebhookEndpoint(ctx context.Context, id string) (*store.WebhookEndpoint, error)
	DeleteWebhookEndpoint(ctx context.Context, id string) error
	WebhookDeliveries(ctx context.Context, f store.WebhookDeliveryFilter) ([]store.WebhookDelivery, int64, error)
	LatestWebhookDeliveries(ctx context.Context, endpointID string, n int) ([]store.WebhookDelivery, error)
}

// Sender runs the send pipeline.
type Sender interface {
	Send(ctx context.Context, req skuld.SendRequest) (skuld.Result, error)
	// Cancel and Reschedule change a held message; store.ErrNotHeld
	// once it is no longer held.
	Cancel(ctx context.Context, id string) (*store.Message, error)
	Reschedule(ctx context.Context, id string, at time.Time) (*store.Message, error)
	// CloseInbox waits for the inbox's sends in flight on this server and
	// keeps new ones out until reopen (see skuld.Sender.CloseInbox); the
	// database orders the deletion with other servers' sends
	// (store.Store.DeleteInbox).
	CloseInbox(ctx context.Context, id string) (reopen func(), err error)
}

// Throttle reports the state of the send throttle: the global windows, and
// an inbox's (by its key, skuld.InboxKey). A shared backend may fail
// (*throttle.UnavailableError).
type Throttle interface {
	State(ctx context.Context, inbox string, o throttle.Override) (throttle.Snapshot, error)
}

// Options configures the API. Store, Sender and Throttle are required.
type Options struct {
	Store    Store
	Sender   Sender
	Throttle Throttle
	// Unit is what the throttle counts (THROTTLE_UNIT), which the
	// rate-limit endpoints name.
	Unit throttle.Unit
	// Jobs, when set, is the job queue of held mail, which /ready checks.
	Jobs interface{ Ready() error }
	// ThrottleFailOpen is THROTTLE_FAIL=open: a throttle backend that
	// cannot be asked does not make the server unready.
	ThrottleFailOpen bool
	Logger           *slog.Logger

	// Webhooks are the providers' event webhooks; nil: none configured.
	Webhooks *Webhooks
	// HooksOut delivers the server's events to applications' endpoints
	// (/v1/webhooks); nil: 404.
	HooksOut *outbox.Webhooks
	// RespondAsync is SEND_RESPOND_ASYNC: a send answers 202 queued at
	// once unless its request says Prefer: respond-sync.
	RespondAsync bool

	// APIKey, when set, is required on every /v1 route.
	APIKey string
	// AuthFailureLimit is how many failed API key attempts one client
	// address may make in 15 minutes before it gets 429; 0 = no limit.
	// Failed dashboard logins count too.
	AuthFailureLimit int
	// AdminSessionKey signs the dashboard's session cookies (the server
	// key "admin-session", shared by every server on the database); nil:
	// a random key, so sessions last as long as this process.
	AdminSessionKey []byte
	// AdminSessionTTL is how long a dashboard login lasts; 0 means 12 h.
	AdminSessionTTL time.Duration
	// Held, when set, reports the held mail the dashboard shows.
	Held interface {
		HeldStats(ctx context.Context) (store.HeldStats, error)
		HeldPage(ctx context.Context, limit, offset int) ([]store.Message, error)
	}
	// Activity, when set, counts the sends refused, by reason
	// (CountRefusal), for the dashboard's chart; nil: none are counted.
	Activity interface{ Add(kind string) }
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
	// Nil: the system clock.
	Clock clock.Clock
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
	// AllowedHosts are the names, besides loopback, that requests may be
	// addressed to (see HostPolicy): config.Config.AllowedHostList.
	AllowedHosts []string
	// TrustedProxies are the reverse proxies whose X-Forwarded-For or
	// Forwarded header names the client (see clientAddr); none: the TCP
	// peer is the client.
	TrustedProxies []netip.Prefix
	// Version names the build to MCP clients.
	Version string
	// MCP, when set, builds the handler of POST /mcp from the finished
	// API (api/mcp.Handler); nil: no /mcp route.
	MCP func(*API) echo.HandlerFunc
	// KeyLease, when several servers share the database, is how long a
	// key claimed by another server may still be in flight there: until
	// then it is that server's (409), not abandoned. 0 (one server): a key
	// of another process belongs to a server that stopped.
	KeyLease time.Duration
	// ScheduleMaxAhead is SCHEDULE_MAX_AHEAD: how far ahead scheduled_at
	// may be (0: 30 days).
	ScheduleMaxAhead time.Duration
	// QueueOnThrottle is SEND_ON_THROTTLE=queue: the on_throttle of a
	// send that does not say.
	QueueOnThrottle bool
	// DownloadMinRate and DownloadGrace are the rate, in bytes a second,
	// at which a client must read an attachment's content after the
	// grace, or be cut off (see rateWriter); 0: 32 KiB/s after 10 s.
	DownloadMinRate int64
	DownloadGrace   time.Duration
	// PageBytes caps the bodies one list answer carries, REST and MCP
	// alike (0: MaxPageBytes). Tests lower it, to cut pages with small
	// messages.
	PageBytes int64
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
	tooMany      *tooMany
	docsFiles    map[string]docsFile
	hosts        *HostPolicy
	admin        *admin.Handler
	// clientBudgets caps one client's part of inflight; uploadRate and
	// uploadGrace are minUploadRate and uploadGrace, changed by tests.
	clientBudgets *clientBudgets
	uploadRate    int64
	uploadGrace   time.Duration
}

// Server is the HTTP handler of the whole API.
type Server struct {
	*echo.Echo
	api *API
}

// Drain makes every later request (but /health) a 503 with Retry-After: the
// first step of a graceful shutdown, while the sends in flight finish. The
// access log's pending summary of 429s is written now, and its timer
// stopped.
func (s *Server) Drain() {
	s.api.draining.Store(true)
	s.api.tooMany.stop()
}

// New returns the HTTP handler of the whole API.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.NewSystem()
	}
	if o.InstanceID == "" {
		o.InstanceID = uuid.NewString()
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
	if o.DownloadMinRate <= 0 {
		o.DownloadMinRate = minDownloadRate
	}
	if o.DownloadGrace <= 0 {
		o.DownloadGrace = downloadGrace
	}
	if o.ScheduleMaxAhead <= 0 {
		o.ScheduleMaxAhead = 30 * 24 * time.Hour
	}
	if o.PageBytes <= 0 {
		o.PageBytes = MaxPageBytes
	}
	o = withLimitDefaults(o)
	a := &API{
		Options:      o,
		logger:       o.Logger,
		instance:     o.InstanceID,
		bodyLimit:    requestLimit(o),
		authFailures: newAuthFailures(o.AuthFailureLimit),
		hosts:        NewHostPolicy(o.AllowedHosts),
		tooMany:      newTooMany(o.Logger, o.Clock, tooManyLogInterval),
	}
	var err error
	if a.docsFiles, err = loadDocsFiles(); err != nil {
		panic("api: embedded docs: " + err.Error()) // the binary was built without them
	}
	a.admin = a.newAdmin()
	a.RequestsInFlight = max(a.RequestsInFlight, a.bodyLimit)
	a.inflight = semaphore.NewWeighted(a.RequestsInFlight)
	a.clientBudgets = newClientBudgets(a.RequestsInFlight / clientShare)
	a.uploadRate, a.uploadGrace = minUploadRate, uploadGrace
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
