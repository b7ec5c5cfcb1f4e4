package providers

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// HTTP provider defaults.
const (
	// DefaultProviderTimeout bounds one API call (PROVIDER_TIMEOUT).
	DefaultProviderTimeout = 30 * time.Second
	// DefaultProviderMaxConcurrency is the number of API calls in flight at
	// once (PROVIDER_MAX_CONCURRENCY). Hosted APIs answer in 100-500 ms, so
	// 16 calls carry 30-160 sends/s, more than most accounts may send,
	// while keeping 16 sockets open at most.
	DefaultProviderMaxConcurrency = 16
)

// HTTPConfig is what every HTTP provider shares. Zero values take the
// defaults.
type HTTPConfig struct {
	// Timeout bounds the wait for a free slot and, separately, the API
	// call itself.
	Timeout time.Duration
	// MaxConcurrency is the number of API calls in flight at once; the
	// connection pool keeps that many idle connections for reuse.
	MaxConcurrency int
	Logger         *slog.Logger
}

// ErrProviderClosed is returned by an HTTP provider's Send after Close.
var ErrProviderClosed = errors.New("providers: provider is closed")

// errSecondRequest stops an SDK that tries a second HTTP request within one
// Send: it would be a hidden retry, which could deliver a message twice.
var errSecondRequest = errors.New("providers: second HTTP request in one send refused")

// maxErrorBody bounds how much of an error response is kept for its detail.
const maxErrorBody = 64 << 10

// httpBase is the part shared by the HTTP providers: one http.Client with a
// keep-alive pool, a bound on calls in flight, the per-call timeout, and
// the sorting of failures. It is safe for concurrent use.
type httpBase struct {
	name    string // "sendgrid", the start of every error message
	keyVar  string // the variable holding the credential, named on 401/403
	client  *http.Client
	timeout time.Duration
	logger  *slog.Logger
	now     func() time.Time

	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	transport *http.Transport
}

func newHTTPBase(name, keyVar string, cfg HTTPConfig) (*httpBase, error) {
	if cfg.Timeout < 0 || cfg.MaxConcurrency < 0 {
		return nil, fmt.Errorf("%s: Timeout and MaxConcurrency must not be negative", name)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultProviderTimeout
	}
	if cfg.MaxConcurrency == 0 {
		cfg.MaxConcurrency = DefaultProviderMaxConcurrency
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          cfg.MaxConcurrency,
		MaxIdleConnsPerHost:   cfg.MaxConcurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
	return &httpBase{
		name:   name,
		keyVar: keyVar,
		client: &http.Client{
			Transport: &attemptTransport{base: t},
			// A redirected POST is sent again: a second delivery attempt.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		timeout:   cfg.Timeout,
		logger:    cfg.Logger,
		now:       time.Now,
		slots:     make(chan struct{}, cfg.MaxConcurrency),
		done:      make(chan struct{}),
		transport: t,
	}, nil
}

// close makes later calls fail and closes the idle connections. Safe to
// call more than once.
func (b *httpBase) close() error {
	b.closeOnce.Do(func() {
		close(b.done)
		b.transport.CloseIdleConnections()
	})
	return nil
}

// call runs one API call: it waits for a slot (at most the timeout: the
// caller holds a throttle reservation meanwhile), runs do with a context
// bounded by the timeout, and turns a failure into a *SendError. Success
// is a 2xx answer from which the SDK read an id; a 2xx without one is
// unknown, since the provider may send it.
func (b *httpBase) call(ctx context.Context, messageID string, do func(context.Context) (string, error),
	detail func(*attempt, error) string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", &SendError{Temporary: true, Err: err, cause: CauseTimeout, msg: b.name + ": not sent: " + err.Error()}
	}
	start := b.now()
	if err := b.acquire(ctx); err != nil {
		return "", err
	}
	defer func() { <-b.slots }()

	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	a := &attempt{}
	id, err := do(withAttempt(ctx, a))
	attrs := []any{
		slog.String("provider", b.name),
		slog.String("message_id_header", messageID),
		slog.Int("http_status", a.status),
		slog.Int64("duration_ms", b.now().Sub(start).Milliseconds()),
	}
	if err == nil && a.status/100 == 2 && id != "" {
		b.logger.DebugContext(ctx, "provider accepted message", append(attrs, slog.String("provider_message_id", id))...)
		return id, nil
	}
	if err == nil {
		err = errors.New("no message id in the answer")
	}
	se := b.classify(a, err, detail(a, err))
	// The send pipeline logs the failure once, worded by its cause; this
	// line adds what only the provider knows. The SDK error and the detail
	// may quote the API's answer, never the request: no key and no body
	// reach the log.
	b.logger.DebugContext(ctx, "provider send failed", append(attrs, slog.Bool("temporary", se.Temporary),
		slog.Bool("unknown", se.Unknown), slog.Any("error", se), slog.String("detail", err.Error()))...)
	return "", se
}

// acquire waits for a free slot, at most the timeout; a send that must
// wait tells ctx's HandoverTrace (claim).
func (b *httpBase) acquire(ctx context.Context) error {
	err := claim(ctx, b.name, b.slots, func() error {
		t := time.NewTimer(b.timeout)
		defer t.Stop()
		select {
		case b.slots <- struct{}{}:
			return nil
		case <-b.done:
			return b.closedError()
		case <-ctx.Done():
			return &SendError{Temporary: true, Err: ctx.Err(), cause: CauseNoFreeConnection,
				msg: b.name + ": not sent: gave up waiting for a free connection"}
		case <-t.C:
			return &SendError{Temporary: true, Err: context.DeadlineExceeded, cause: CauseNoFreeConnection,
				msg: fmt.Sprintf("%s: not sent: no free connection within %s (PROVIDER_MAX_CONCURRENCY)", b.name, b.timeout)}
		}
	})
	if err != nil {
		return err
	}
	select {
	case <-b.done:
		<-b.slots
		return b.closedError()
	default:
		return nil
	}
}

// closedError refuses a send after Close: nothing went out, and the server
// is shutting down.
func (b *httpBase) closedError() *SendError {
	return &SendError{Temporary: true, Err: ErrProviderClosed, cause: CauseShuttingDown,
		msg: b.name + ": not sent: the server is shutting down"}
}

// attempt records what happened to the one HTTP request of a Send.
type attempt struct {
	requests atomic.Int32
	wrote    atomic.Bool // the request was fully written
	status   int         // 0 when no response arrived
	header   http.Header
	body     []byte // the start of a non-2xx answer
}

type attemptKey struct{}

func withAttempt(ctx context.Context, a *attempt) context.Context {
	return context.WithValue(ctx, attemptKey{}, a)
}

// attemptTransport records each request's attempt, refuses a second
// request in one Send, and keeps a copy of an error answer, whose body the
// SDKs consume before we can read it.
type attemptTransport struct {
	base http.RoundTripper
}

func (t *attemptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	a, _ := req.Context().Value(attemptKey{}).(*attempt)
	if a == nil {
		return t.base.RoundTrip(req)
	}
	if a.requests.Add(1) > 1 {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errSecondRequest
	}
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			a.wrote.Store(true)
		}
	}}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	res, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	a.status, a.header = res.StatusCode, res.Header
	if res.StatusCode/100 != 2 {
		b, err := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		res.Body.Close()
		if err != nil {
			return nil, err
		}
		a.body = b
		res.Body = io.NopCloser(bytes.NewReader(b))
	}
	return res, nil
}

// base gives tests and benchmarks the shared part of any HTTP provider.
func (b *httpBase) base() *httpBase { return b }
