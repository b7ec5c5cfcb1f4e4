// Package api is the HTTP face of NornWeave: echo handlers, the wire types,
// the middleware and the one mapping from errors to HTTP responses. It never
// touches the database driver or a provider directly.
package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/semaphore"

	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// Store is what the handlers read and write directly; sends go through Sender.
type Store interface {
	CreateInbox(ctx context.Context, in *store.Inbox) error
	Inbox(ctx context.Context, id string) (*store.Inbox, error)
	Inboxes(ctx context.Context, limit, offset int) ([]store.Inbox, error)
	DeleteInbox(ctx context.Context, id string) error
	Thread(ctx context.Context, id string) (*store.Thread, error)
	Threads(ctx context.Context, inboxID string, limit, offset int) ([]store.Thread, error)
	Message(ctx context.Context, id string) (*store.Message, error)
	Messages(ctx context.Context, f store.MessageFilter) ([]store.Message, int64, error)
	MessageBodies(ctx context.Context, ids []string, withHTML bool) (map[string]store.Bodies, error)
	Ready(ctx context.Context) error
}

// Sender runs the send pipeline.
type Sender interface {
	Send(ctx context.Context, req skuld.SendRequest) (*store.Message, error)
}

// Limiter reports the state of the send throttle.
type Limiter interface {
	State(now time.Time) skuld.State
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
	Now           func() time.Time
}

// API holds the handlers' dependencies.
type API struct {
	Options
	logger    *slog.Logger
	bodyLimit int64
	inflight  *semaphore.Weighted
}

// New returns the HTTP handler of the whole API.
func New(o Options) *echo.Echo {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o = withLimitDefaults(o)
	a := &API{Options: o, logger: o.Logger, bodyLimit: requestLimit(o)}
	a.RequestsInFlight = max(a.RequestsInFlight, a.bodyLimit)
	a.inflight = semaphore.NewWeighted(a.RequestsInFlight)
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = a.errorHandler
	e.JSONSerializer = jsonSerializer{}
	a.middleware(e)
	a.routes(e)
	return e
}
