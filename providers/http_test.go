package providers

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/internal/testkit/providertest"
)

// These tests run every HTTP provider against the same response classes:
// one promise, one suite (STYLE 17).

type httpProvider interface {
	Name() string
	Send(context.Context, Message) (string, error)
	Close() error
}

const (
	testAPIKey    = "key-SECRET-test-0123456789"
	testAWSKeyID  = "AKIDTESTEXAMPLE"
	testAWSSecret = "aws-SECRET-test-0123456789"
)

// newProvider returns the provider kind pointed at baseURL.
func newProvider(t testing.TB, kind, baseURL string, hc HTTPConfig) httpProvider {
	t.Helper()
	var p httpProvider
	var err error
	switch kind {
	case "mailgun":
		p, err = NewMailgun(MailgunConfig{APIKey: testAPIKey, Domain: "mg.acme.test", APIBase: baseURL, HTTPConfig: hc})
	case "sendgrid":
		p, err = NewSendGrid(SendGridConfig{APIKey: testAPIKey, APIBase: baseURL, HTTPConfig: hc})
	case "resend":
		p, err = NewResend(ResendConfig{APIKey: testAPIKey, APIBase: baseURL, HTTPConfig: hc})
	case "ses":
		p, err = NewSES(context.Background(), SESConfig{AccessKeyID: testAWSKeyID, SecretAccessKey: testAWSSecret,
			Region: "eu-west-1", Endpoint: baseURL, HTTPConfig: hc})
	}
	if err != nil {
		t.Fatalf("new %s: %v", kind, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// fullMessage uses every field a provider must carry.
func fullMessage() Message {
	return Message{
		MessageID:  "<m-1@acme.test>",
		Date:       time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		From:       "support@acme.test",
		FromName:   "Acme Support",
		To:         address.MustParseList("Ann <ann@customer.test>"),
		Cc:         address.MustParseList("cc@customer.test"),
		Bcc:        address.MustParseList("audit@acme.test"),
		ReplyTo:    address.MustParseList("help@acme.test"),
		Subject:    "Your order — Grüße",
		Text:       "Hello **Ann**",
		HTML:       `<p>Hello <strong>Ann</strong> <img src="cid:logo@acme.test"></p>`,
		InReplyTo:  "<parent@acme.test>",
		References: []string{"<root@acme.test>", "<parent@acme.test>"},
		Attachments: []Attachment{
			{Filename: "report.pdf", ContentType: "application/pdf", Content: []byte("%PDF-1.4 report")},
			{Filename: "logo.png", ContentType: "image/png", Content: []byte("\x89PNG logo"), Inline: true, ContentID: "logo@acme.test"},
		},
	}
}

func TestHTTPProvidersSortResponses(t *testing.T) {
	t.Parallel()
	type want struct {
		temporary, unknown bool
		code               int
		retryAfter         time.Duration
		msg                []string      // substrings of the error
		timeout            time.Duration // the client's, only where the case is about one (see TestCauseOfHTTPFailures)
	}
	tests := []struct {
		name    string
		respond func(f *providertest.Fake) providertest.Responder
		want    want
	}{
		{"400 is permanent", func(f *providertest.Fake) providertest.Responder {
			return f.Reject(400, "The from address does not match a verified Sender Identity")
		}, want{code: 400, msg: []string{"rejected (400)", "verified Sender Identity"}}},
		{"401 is permanent and names the key", func(f *providertest.Fake) providertest.Responder {
			return f.Reject(401, "invalid API key")
		}, want{code: 401, msg: []string{"rejected (401)", "invalid API key", "check"}}},
		{"403 is permanent", func(f *providertest.Fake) providertest.Responder {
			return f.Reject(403, "domain not verified")
		}, want{code: 403, msg: []string{"rejected (403)", "domain not verified"}}},
		{"429 is temporary with Retry-After", func(f *providertest.Fake) providertest.Responder {
			return f.Reject(429, "slow down", "Retry-After", "7")
		}, want{temporary: true, code: 429, retryAfter: 7 * time.Second, msg: []string{"rate limited", "retry after 7s"}}},
		// A 5xx other than 503 to a request the provider read may come
		// after it took the message (a gateway timing out in front of a
		// backend that queued it): it counts, and is never retried.
		{"500 after the request was read is unknown", func(f *providertest.Fake) providertest.Responder {
			return f.Reject(500, "internal error")
		}, want{unknown: true, code: 500, msg: []string{"provider error (500)", "may have been delivered"}}},
		{"502 after the request was read is unknown", func(f *providertest.Fake) providertest.Responder {
			return f.Reject(502, "bad gateway")
		}, want{unknown: true, code: 502, msg: []string{"provider error (502)", "may have been delivered"}}},
		{"504 after the request was read is unknown", func(f *providertest.Fake) providertest.Responder {
			return f.Reject(504, "gateway timeout", "Retry-After", "5")
		}, want{unknown: true, code: 504, msg: []string{"provider error (504)", "may have been delivered"}}},
		{"503 is temporary with Retry-After", func(f *providertest.Fake) providertest.Responder {
			return f.Reject(503, "maintenance", "Retry-After", "12")
		}, want{temporary: true, code: 503, retryAfter: 12 * time.Second, msg: []string{"unavailable (503)", "retry after 12s"}}},
		{"503 with an HTTP-date Retry-After", func(f *providertest.Fake) providertest.Responder {
			return f.Reject(503, "maintenance", "Retry-After", time.Now().Add(90*time.Second).UTC().Format(http.TimeFormat))
		}, want{temporary: true, code: 503, retryAfter: 90 * time.Second, msg: []string{"unavailable (503)"}}},
		{"2xx without a readable id is unknown", func(*providertest.Fake) providertest.Responder {
			return func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(200); w.Write([]byte("<html>ok")) }
		}, want{unknown: true, code: 200, msg: []string{"accepted (200)", "may have been delivered"}}},
		{"dropped connection after the request is unknown", func(*providertest.Fake) providertest.Responder {
			return providertest.Drop
		}, want{unknown: true, msg: []string{"no answer after the message was sent", "may have been delivered"}}},
		{"timeout after the request is unknown", func(*providertest.Fake) providertest.Responder {
			return func(w http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() }
		}, want{unknown: true, msg: []string{"timed out after 300ms", "may have been delivered"}, timeout: 300 * time.Millisecond}},
	}
	for _, kind := range providertest.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Run("2xx returns the provider id", func(t *testing.T) {
				f := providertest.Start(t, kind)
				p := newProvider(t, kind, f.URL, HTTPConfig{})
				id, err := p.Send(context.Background(), fullMessage())
				if err != nil || id != f.ID(1) {
					t.Fatalf("Send = %q, %v; want %q, nil", id, err, f.ID(1))
				}
			})
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					f := providertest.Start(t, kind)
					f.Respond(tt.respond(f))
					var log bytes.Buffer
					p := newProvider(t, kind, f.URL, HTTPConfig{Timeout: tt.want.timeout,
						Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
					_, err := p.Send(context.Background(), fullMessage())
					se := mustSendError(t, err)
					t.Logf("error: %s", se)
					w := tt.want
					if se.Temporary != w.temporary || se.Unknown != w.unknown || se.Code != w.code {
						t.Errorf("got temporary=%v unknown=%v code=%d, want %v %v %d (%q)",
							se.Temporary, se.Unknown, se.Code, w.temporary, w.unknown, w.code, se)
					}
					if d := se.RetryAfter - w.retryAfter; d < -time.Second || d > time.Second {
						t.Errorf("RetryAfter = %s, want %s", se.RetryAfter, w.retryAfter)
					}
					for _, s := range append(w.msg, kind+": ") {
						if !strings.Contains(se.Error(), s) {
							t.Errorf("error %q does not contain %q", se, s)
						}
					}
					checkNoSecret(t, se.Error(), f.URL)
					if !strings.Contains(log.String(), "provider send failed") {
						t.Errorf("failure not logged: %s", log.String())
					}
					for _, s := range []string{testAPIKey, testAWSSecret, "Hello **Ann**", "<strong>Ann</strong>", "PDF-1.4"} {
						if strings.Contains(log.String(), s) {
							t.Errorf("log leaks %q: %s", s, log.String())
						}
					}
					// One delivery attempt, whatever the SDK would do.
					if n := f.Count(); n != 1 {
						t.Errorf("fake received %d requests, want exactly 1", n)
					}
				})
			}
			t.Run("connection refused is temporary", func(t *testing.T) {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				url := "http://" + l.Addr().String()
				l.Close()
				p := newProvider(t, kind, url, HTTPConfig{Timeout: time.Second})
				_, err = p.Send(context.Background(), fullMessage())
				se := mustSendError(t, err)
				if !se.Temporary || se.Unknown || se.Code != 0 || !strings.Contains(se.Error(), "could not reach the API") {
					t.Errorf("got %+v (%q), want temporary 'could not reach the API'", se, se)
				}
				checkNoSecret(t, se.Error(), url)
			})
			t.Run("closed provider refuses", func(t *testing.T) {
				f := providertest.Start(t, kind)
				p := newProvider(t, kind, f.URL, HTTPConfig{})
				p.Close()
				p.Close()
				if _, err := p.Send(context.Background(), fullMessage()); !errors.Is(err, ErrProviderClosed) {
					t.Errorf("Send after Close = %v, want ErrProviderClosed", err)
				}
			})
		})
	}
}

func mustSendError(t *testing.T, err error) *SendError {
	t.Helper()
	var se *SendError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *SendError", err, err)
	}
	return se
}

// checkNoSecret fails when a user-facing message leaks a key or the
// provider's URL.
func checkNoSecret(t *testing.T, msg, url string) {
	t.Helper()
	for _, s := range []string{testAPIKey, testAWSSecret, url, strings.TrimPrefix(url, "http://")} {
		if strings.Contains(msg, s) {
			t.Errorf("error %q leaks %q", msg, s)
		}
	}
}

func TestWaitingForASlotTimesOutAsTemporary(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "resend")
	release := make(chan struct{})
	f.Respond(func(w http.ResponseWriter, r *http.Request, n int) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		f.Accept(w, n)
	})
	p := newProvider(t, "resend", f.URL, HTTPConfig{MaxConcurrency: 1, Timeout: 2 * time.Second})
	first := make(chan error, 1)
	go func() { _, err := p.Send(context.Background(), fullMessage()); first <- err }()
	for f.Count() == 0 {
		time.Sleep(time.Millisecond)
	}
	// The second Send waits for the one slot; its caller gives up first.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := p.Send(ctx, fullMessage())
	se := mustSendError(t, err)
	if !se.Temporary || se.Unknown {
		t.Errorf("waiting send failed with %+v (%q), want temporary: it never reached the wire", se, se)
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first send: %v", err)
	}
	if n := f.Count(); n != 1 {
		t.Errorf("fake received %d requests, want 1", n)
	}
}

func TestSecondRequestInOneSendIsRefused(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "resend")
	b, err := newHTTPBase("test", "TEST_KEY", HTTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	var second error
	_, err = b.call(context.Background(), "<m@x>", func(ctx context.Context) (string, error) {
		for i := range 2 {
			req, _ := http.NewRequestWithContext(ctx, "POST", f.URL+"/emails", strings.NewReader("{}"))
			res, err := b.client.Do(req)
			if err != nil {
				second = err
				return "", err
			}
			res.Body.Close()
			_ = i
		}
		return "id", nil
	}, func(*attempt, error) string { return "" })
	if !errors.Is(second, errSecondRequest) {
		t.Errorf("second request error = %v, want errSecondRequest", second)
	}
	if err == nil {
		t.Errorf("call = nil error, want a failure")
	}
	if n := f.Count(); n != 1 {
		t.Errorf("fake received %d requests, want 1", n)
	}
}

func TestMaxConcurrencyBoundsCallsInFlight(t *testing.T) {
	t.Parallel()
	for _, kind := range providertest.Kinds {
		t.Run(kind, func(t *testing.T) {
			f := providertest.Start(t, kind)
			f.Delay(20 * time.Millisecond)
			p := newProvider(t, kind, f.URL, HTTPConfig{MaxConcurrency: 3})
			errs := make(chan error, 12)
			for range 12 {
				go func() { _, err := p.Send(context.Background(), fullMessage()); errs <- err }()
			}
			for range 12 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if got := f.MaxInFlight(); got > 3 {
				t.Errorf("fake handled %d requests at once, want at most 3", got)
			}
			// Connections are kept alive and reused, but how many net/http
			// opens is its own: it does not reuse a connection whose request
			// it has not seen written within 50 ms (maxWriteWaitBeforeConnReuse),
			// which a loaded machine misses now and then (4 of 12 seen under
			// make test). One per call would mean no reuse at all.
			if got := f.Connections(); got >= 12 {
				t.Errorf("fake saw %d connections for 12 calls, want them reused", got)
			}
		})
	}
}
