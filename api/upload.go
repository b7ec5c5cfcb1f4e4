package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/semaphore"
)

// A request body must arrive at minUploadRate on average, counted from
// when the handler starts reading it, after uploadGrace for the client to
// get going: 256 kbit/s, slower than any mobile data link but GPRS. A
// client that trickles a byte every few seconds holds its connection, its
// goroutine and (for a large body) its share of REQUESTS_IN_FLIGHT_MB for
// nothing; it is cut off with 408. The server's ReadTimeout still bounds
// the whole body.
const (
	minUploadRate = 32 << 10 // bytes per second
	uploadGrace   = 10 * time.Second
)

// errUploadTooSlow is what reading a body that fell behind the rate gets.
var errUploadTooSlow = errors.New("request body arrived slower than 32 KiB/s")

// enforceUploadRate is the middleware that holds every request body to the
// rate: the reads go on until the client falls behind, and then the
// connection's read deadline is set to now, which ends the read in
// progress. The deadline is only ever brought forward, never pushed back.
func (a *API) enforceUploadRate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0 {
			return next(c)
		}
		rr := &rateReader{body: req.Body, rc: http.NewResponseController(c.Response()),
			start: time.Now(), grace: a.uploadGrace, rate: a.uploadRate}
		defer rr.stop()
		req.Body = rr
		return next(c)
	}
}

// rateReader is a request body that must keep up with rate bytes a second
// after grace. It is used by one handler goroutine; its timer's callback
// runs on another, hence mu.
type rateReader struct {
	body  io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int64

	mu      sync.Mutex
	n       int64 // bytes read so far
	timer   *time.Timer
	reading bool // a Read is waiting for the client
	late    bool // it fell behind, and its read was ended
}

func (r *rateReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	if r.late {
		r.mu.Unlock()
		return 0, errUploadTooSlow
	}
	// Byte n+1 is due when the body has had grace plus (n+1)/rate.
	due := r.start.Add(r.grace + time.Duration((r.n+1)*int64(time.Second)/r.rate))
	if r.timer == nil {
		r.timer = time.AfterFunc(time.Until(due), r.expire)
	} else {
		r.timer.Reset(time.Until(due))
	}
	r.reading = true
	r.mu.Unlock()

	n, err := r.body.Read(p)

	r.mu.Lock()
	defer r.mu.Unlock()
	r.reading = false
	r.timer.Stop()
	r.n += int64(n)
	if r.late && err != nil {
		return n, errUploadTooSlow
	}
	return n, err
}

// expire ends the read the client is late for.
func (r *rateReader) expire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.reading {
		return // the read returned just before: the next one re-arms
	}
	r.late = true
	// Not every ResponseWriter can (httptest's cannot); then the server's
	// own ReadTimeout is the only bound, as before.
	_ = r.rc.SetReadDeadline(time.Now())
}

func (r *rateReader) Close() error { return r.body.Close() }

// stop ends the timer when the handler is done with the body.
func (r *rateReader) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
	}
}

// clientBudgets limits what one client holds of the in-flight budget to
// share bytes: each large request of a client takes min(its size, share)
// from the client's own budget before it takes its size from the global
// one. So a client's first request may be as large as any request, but a
// second large one waits for the first, outside the global budget, where
// it keeps no other client waiting. Safe for concurrent use.
type clientBudgets struct {
	share int64

	mu      sync.Mutex
	clients map[string]*clientBudget // those with a request holding or waiting
}

type clientBudget struct {
	sem   *semaphore.Weighted
	users int
}

func newClientBudgets(share int64) *clientBudgets {
	return &clientBudgets{share: share, clients: map[string]*clientBudget{}}
}

// acquire takes n bytes (at most share) of key's budget, waiting until ctx
// ends; release gives them back.
func (b *clientBudgets) acquire(ctx context.Context, key string, n int64) (release func(), err error) {
	n = min(n, b.share)
	b.mu.Lock()
	cb := b.clients[key]
	if cb == nil {
		cb = &clientBudget{sem: semaphore.NewWeighted(b.share)}
		b.clients[key] = cb
	}
	cb.users++
	b.mu.Unlock()
	if err := cb.sem.Acquire(ctx, n); err != nil {
		b.leave(key, cb)
		return nil, err
	}
	return func() { cb.sem.Release(n); b.leave(key, cb) }, nil
}

// leave forgets a client with no request left, so the map holds only the
// clients with a large request in progress.
func (b *clientBudgets) leave(key string, cb *clientBudget) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cb.users--; cb.users == 0 {
		delete(b.clients, key)
	}
}
