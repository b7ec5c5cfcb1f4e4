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

	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// Store is what the handlers read and write directly; sends go through Sender.
type Store interface {
	CreateInbox(ctx context.Context, in *store.Inbox) error
	Inbox(ctx context.Context, id string) (*store.Inbox, error)
	Inboxes(ctx context.Context, limit, offset int) ([]store.Inbox, error)
	UpdateInbox(ctx context.Context, id string, ch store.InboxChanges, now time.Time) (*store.Inbox, error)
	DeleteInbox(ctx context.Context, id string) error
	Thread(ctx context.Context, id string) (*store.Thread, error)
	Threads(ctx context.Context, inboxID string, limit, offset int) ([]store.Thread, error)
	ThreadMessages(ctx context.Context, threadID string) ([]store.Message, error)
	Message(ctx context.Context, id string) (*store.Message, error)
	Messages(ctx context.Context, f store.MessageFilter) ([]store.Message, int64, error)
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
// an inbox's. A shared backend may fail (*skuld.UnavailableError).
type Limiter interface {
	State(ctx context.Context) (skuld.State, error)
	InboxState(ctx context.Context, inboxID string, o skuld.Override) (skuld.State, error)
	States(ctx context.Context, inboxID string, o skuld.Override) (global, inbox skuld.State, err error)
}

// Options configures the API. Store, Sender and Limiter are required.
type Options struct {
	Store   Store
	Sender  Sender
	Limiter Limiter
	Logger  *slog.Logger

	// APIKey, when set, is required on every /v1 route.
	APIKey string
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
	// KeyLease, when several servers share the database, is how long a
	// key claimed by another server may still be in flight there: until
	// then it is that server's (409), not abandoned. 0 (one server): a key
	// of another process belongs to a server that stopped.
	KeyLease time.Duration
}

// API holds the handlers' dependencies.
type API struct {
	Options
	logger    *slog.Logger
	bodyLimit int64
	instance  string
	draining  atomic.Bool
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
	a := &API{
		Options:  o,
		logger:   o.Logger,
		instance: o.InstanceID,
		// Base64 makes attachments a third larger; leave room for the rest
		// of the JSON (body, html, addresses).
		bodyLimit: o.AttachmentMaxTotalSize*4/3 + 4<<20,
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = a.errorHandler
	e.JSONSerializer = jsonSerializer{}
	a.middleware(e)
	a.routes(e)
	return &Server{Echo: e, api: a}
}
