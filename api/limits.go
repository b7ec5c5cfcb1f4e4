package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Defaults of the limits Options leaves zero (the documented defaults of
// BODY_MAX_SIZE_MB, HTML_MAX_SIZE_MB, REQUESTS_IN_FLIGHT_MB and
// SEARCH_TIMEOUT_SECONDS).
const (
	defaultBodyMaxSize      = 1 << 20
	defaultHTMLMaxSize      = 2 << 20
	defaultRequestsInFlight = 64 << 20
	defaultSearchTimeout    = 10 * time.Second
)

// smallRequest is the size under which a request does not wait for the
// in-flight budget: small requests are the common case, and one of them
// must never queue behind a 50 MB send.
const smallRequest = 64 << 10

// clientShare is how many clients' shares the in-flight budget holds: one
// client holds at most 1/clientShare of it (or one request of any size).
const clientShare = 4

// inFlightWait is how long a large request may wait for the budget before
// it is refused with 503; the client retries, as after a 429. A waiting
// request holds a connection but not its body (not yet read), so the wait
// can be long: eight maximum-size sends queued behind each other take
// ~50 s under the race detector. It stays well inside the server's 3-minute
// WriteTimeout.
const inFlightWait = 90 * time.Second

func withLimitDefaults(o Options) Options {
	if o.BodyMaxSize <= 0 {
		o.BodyMaxSize = defaultBodyMaxSize
	}
	if o.HTMLMaxSize <= 0 {
		o.HTMLMaxSize = defaultHTMLMaxSize
	}
	if o.RequestsInFlight <= 0 {
		o.RequestsInFlight = defaultRequestsInFlight
	}
	if o.SearchTimeout <= 0 {
		o.SearchTimeout = defaultSearchTimeout
	}
	return o
}

// requestLimit is the largest request body a send can legitimately need:
// every attachment at its limit in base64 (4/3, plus a JSON-escaped line
// break every 76 characters if the client wraps it), body and html at
// their caps with room for JSON escaping (quotes and newlines double), and
// 1 MiB for addresses, subject and field names.
func requestLimit(o Options) int64 {
	att := o.AttachmentMaxTotalSize * 4 / 3
	att += att / 19 // "\r\n" escaped is 4 bytes per 76
	return att + 2*(o.BodyMaxSize+o.HTMLMaxSize) + 1<<20
}

// checkBodySizes enforces BODY_MAX_SIZE_MB and HTML_MAX_SIZE_MB: an email's
// text is far smaller than its attachments, and every byte of it is read,
// rendered, stored, indexed and sent.
func (a *API) checkBodySizes(body, html string) error {
	if int64(len(body)) > a.BodyMaxSize {
		return newError(http.StatusRequestEntityTooLarge, "body_too_large",
			fmt.Sprintf("body is larger than BODY_MAX_SIZE_MB (%d MB)", a.BodyMaxSize>>20))
	}
	if int64(len(html)) > a.HTMLMaxSize {
		return newError(http.StatusRequestEntityTooLarge, "html_too_large",
			fmt.Sprintf("html is larger than HTML_MAX_SIZE_MB (%d MB)", a.HTMLMaxSize>>20))
	}
	return nil
}

// limitInFlight bounds the memory of concurrent large requests. Decoding a
// send holds several copies of its body (the bytes read, the decoded JSON
// strings, the decoded attachments, the MIME message), so N concurrent
// maximum-size sends would need N times that. Each request larger than
// smallRequest takes its Content-Length (or the request limit, when the
// length is unknown) from a budget of RequestsInFlight bytes for as long as
// its handler runs, and waits while the budget is spent: memory is bounded
// by the budget, not by the number of clients. One client (clientKey)
// holds at most a quarter of the budget, or one request of any size (see
// clientBudgets): its large requests wait for each other, not everyone
// else. A request that waits longer than inFlightWait, or whose client
// goes away, is answered 503.
func (a *API) limitInFlight(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		n := req.ContentLength
		if req.Body == nil || req.Body == http.NoBody || (n >= 0 && n <= smallRequest) {
			return next(c)
		}
		if n < 0 || n > a.bodyLimit {
			n = a.bodyLimit
		}
		wait, cancel := context.WithTimeout(req.Context(), inFlightWait)
		defer cancel()
		releaseShare, err := a.clientBudgets.acquire(wait, a.clientKey(req), n)
		release := func() {}
		if err == nil {
			defer releaseShare()
			release, err = a.TakeInFlight(wait, n)
		}
		if err != nil {
			if req.Context().Err() != nil {
				return req.Context().Err() // the client left: a 499, not a busy server
			}
			c.Response().Header().Set("Retry-After", busyRetryAfter)
			return errServerBusy
		}
		defer release()
		return next(c)
	}
}

// errServerBusy answers a request that waited inFlightWait for the budget.
var errServerBusy = newError(http.StatusServiceUnavailable, "server_busy",
	"Too many large requests in progress (REQUESTS_IN_FLIGHT_MB); retry shortly")

// busyRetryAfter is the Retry-After of errServerBusy.
const busyRetryAfter = "5"

// TakeInFlight takes n bytes (at most the whole budget) from the in-flight
// budget for as long as the caller holds them, waiting up to inFlightWait;
// n up to smallRequest takes nothing. It fails with errServerBusy, or the
// error of ctx if it ends first (the client went away: a 499, not a busy
// server).
func (a *API) TakeInFlight(ctx context.Context, n int64) (release func(), err error) {
	if n <= smallRequest {
		return func() {}, nil
	}
	n = min(n, a.RequestsInFlight)
	wait, cancel := context.WithTimeout(ctx, inFlightWait)
	defer cancel()
	if err := a.inflight.Acquire(wait, n); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errServerBusy
	}
	return func() { a.inflight.Release(n) }, nil
}
