package notify

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// AttemptTimeout bounds one delivery attempt: connect, send, answer.
const AttemptTimeout = 15 * time.Second

// maxKeptBody is how much of an endpoint's answer is kept for the
// delivery log.
const maxKeptBody = 1 << 10

// maxSnooze caps what a Retry-After may ask: an endpoint may not park its
// events for days.
const maxSnooze = time.Hour

// Outcome is what an attempt's answer means for the event.
type Outcome int

const (
	// Delivered: a 2xx.
	Delivered Outcome = iota
	// Retry: any other answer, or none (a connection refused, a timeout):
	// try again on the retry schedule.
	Retry
	// Snooze: 429 or 503 with a Retry-After: try again after it (at most
	// an hour), without using up an attempt of the schedule.
	Snooze
	// Gone: 410, the endpoint says it is gone for good: disable it.
	Gone
	// Refused: the Guard refused the target; nothing was sent. As a
	// retry would be refused again, the endpoint is disabled.
	Refused
)

// Result is one attempt.
type Result struct {
	Outcome Outcome
	Status  int // 0 when there was no answer
	Latency time.Duration
	// Body is the start of the answer, at most 1 KiB, for the log.
	Body string
	// RetryAfter is a Snooze's wait.
	RetryAfter time.Duration
	Err        error
}

// Options configure a Client.
type Options struct {
	Guard Guard
	// Timeout bounds an attempt (0: AttemptTimeout).
	Timeout time.Duration
	// Dialed, when set, is told every address a connection was actually
	// attempted to, after the Guard let it through: a test counts them.
	Dialed func(address string)
}

// Client posts events. It follows no redirect: a 3xx is an answer like
// any other non-2xx, and the target it names is never reached. It is
// safe for concurrent use.
type Client struct {
	hc *http.Client
}

// NewClient returns a Client whose every connection passes o.Guard.
func NewClient(o Options) *Client {
	d := o.Guard.dialer()
	if o.Dialed != nil {
		control := d.Control
		d.Control = func(network, address string, c syscall.RawConn) error {
			if err := control(network, address, c); err != nil {
				return err
			}
			o.Dialed(address)
			return nil
		}
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = AttemptTimeout
	}
	tr := &http.Transport{DialContext: d.DialContext, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 4,
		IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second, Proxy: nil}
	return &Client{hc: &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Deliver posts body with headers h to url, once, and says what the answer
// means.
func (c *Client) Deliver(ctx context.Context, url string, h http.Header, body []byte) Result {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Result{Outcome: Refused, Err: err}
	}
	req.Header = h.Clone()
	req.Header.Set("User-Agent", "NornWeave-Webhooks/1")
	res, err := c.hc.Do(req)
	r := Result{Latency: time.Since(start)}
	if err != nil {
		r.Outcome, r.Err = Retry, err
		if errors.Is(err, ErrForbiddenTarget) {
			r.Outcome = Refused
		}
		return r
	}
	defer res.Body.Close()
	kept, _ := io.ReadAll(io.LimitReader(res.Body, maxKeptBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) // let the connection be reused
	r.Status, r.Body = res.StatusCode, validPrefix(kept)
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		r.Outcome = Delivered
	case res.StatusCode == http.StatusGone:
		r.Outcome = Gone
	case res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable:
		if d, ok := retryAfter(res.Header.Get("Retry-After"), time.Now()); ok {
			r.Outcome, r.RetryAfter = Snooze, min(d, maxSnooze)
		} else {
			r.Outcome = Retry
		}
	default:
		r.Outcome = Retry
	}
	return r
}

// retryAfter reads a Retry-After: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// validPrefix is b as text a database stores: an invalid or cut UTF-8
// sequence, and NUL (which PostgreSQL's text refuses), become U+FFFD. A
// receiver's answer that could not be stored would fail the attempt's
// record, and a delivered event would be delivered again.
func validPrefix(b []byte) string {
	return strings.ReplaceAll(strings.ToValidUTF8(string(b), "\uFFFD"), "\x00", "\uFFFD")
}

// Close drops the idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }
