package providers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/providertest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// Each cause is produced here by a real failure where one can be had: the
// SMTP relay, the HTTP fakes, SES with no credentials to find.

func TestCauseOfSMTPFailures(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := l.Addr().(*net.TCPAddr).Port
	l.Close()

	tests := []struct {
		name  string
		opts  []smtptest.Option
		setup func(*smtptest.Server, *SMTPConfig)
		// send runs the failing send; nil sends simpleMessage(1) with a
		// deadline of 30 s. The client's Timeout is 30 s too: bounds on a
		// hang, far from the cases' causes (at 2 s, an implicit TLS
		// handshake under a loaded make test timed out before it could
		// fail as untrusted); the timeout cases set their own.
		send func(*testing.T, *SMTP) error
		want string
	}{
		{"nothing listening", nil, func(_ *smtptest.Server, c *SMTPConfig) { c.Port = closedPort }, nil, CauseConnectionRefused},
		{"unknown host", nil, func(_ *smtptest.Server, c *SMTPConfig) { c.Host = "no-such-host.invalid" }, nil, CauseDNS},
		{"no STARTTLS offered", nil, func(_ *smtptest.Server, c *SMTPConfig) { c.UseTLS = true }, nil, CauseTLS},
		{"untrusted certificate", []smtptest.Option{smtptest.WithImplicitTLS()},
			func(_ *smtptest.Server, c *SMTPConfig) { c.UseTLS, c.ImplicitTLS = true, true }, nil, CauseTLS},
		{"wrong password", []smtptest.Option{smtptest.WithAuth("user", "right")},
			func(_ *smtptest.Server, c *SMTPConfig) { c.Username, c.Password = "user", "wrong" }, nil, CauseCredentials},
		{"no answer to MAIL in time", nil, func(s *smtptest.Server, _ *SMTPConfig) { s.Stall(smtptest.AtMail, 5*time.Second) },
			func(t *testing.T, p *SMTP) error {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				_, err := p.Send(ctx, simpleMessage(1))
				return err
			}, CauseTimeout},
		{"greeting stalls past Timeout", nil, func(s *smtptest.Server, c *SMTPConfig) {
			s.Stall(smtptest.BeforeGreeting, 5*time.Second)
			c.Timeout = 300 * time.Millisecond
		}, nil, CauseTimeout},
		{"reset at RCPT", nil, func(s *smtptest.Server, _ *SMTPConfig) { s.ResetAt(smtptest.AtRcpt) }, nil, CauseConnection},
		{"recipient rejected", nil, func(s *smtptest.Server, _ *SMTPConfig) { s.RejectRecipient("to@example.org") }, nil, CauseRejected},
		{"message deferred (451)", nil, func(s *smtptest.Server, _ *SMTPConfig) {
			s.RejectData(451, [3]int{4, 3, 0}, "try again later")
		}, nil, CauseProviderUnavailable},
		// Amazon SES's SMTP interface, from an unverified identity.
		{"sender not verified (554)", nil, func(s *smtptest.Server, _ *SMTPConfig) {
			s.RejectData(554, [3]int{5, 0, 0}, "Message rejected: Email address is not verified. The following identities failed the check in region US-EAST-1: inbox@example.com")
		}, nil, CauseSenderNotVerified},
		{"a line break in the subject", nil, nil, func(t *testing.T, p *SMTP) error {
			m := simpleMessage(1)
			m.Subject = "a\r\nBcc: x@example.org"
			_, err := p.Send(context.Background(), m)
			return err
		}, CauseInvalidMessage},
		{"provider closed", nil, nil, func(t *testing.T, p *SMTP) error {
			p.Close()
			_, err := p.Send(context.Background(), simpleMessage(1))
			return err
		}, CauseShuttingDown},
		{"no free connection in time", nil, func(_ *smtptest.Server, c *SMTPConfig) { c.MaxConns = 1 },
			func(t *testing.T, p *SMTP) error {
				if err := p.acquire(context.Background()); err != nil { // hold the only connection
					t.Fatal(err)
				}
				defer p.release()
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				_, err := p.Send(ctx, simpleMessage(1))
				return err
			}, CauseNoFreeConnection},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := smtptest.Start(t, tt.opts...)
			p := newTestSMTP(t, s, func(c *SMTPConfig) {
				c.Timeout = 30 * time.Second
				if tt.setup != nil {
					tt.setup(s, c)
				}
			})
			send := tt.send
			if send == nil {
				send = func(t *testing.T, p *SMTP) error {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					_, err := p.Send(ctx, simpleMessage(1))
					return err
				}
			}
			err := send(t, p)
			if err == nil {
				t.Fatal("Send succeeded, want a failure")
			}
			if got := Cause(err); got != tt.want {
				t.Errorf("Cause(%q) = %q, want %q", err, got, tt.want)
			}
		})
	}
}

// unverifiedSender is each provider's documented answer to a send from a
// sender (address or domain) it has not verified.
var unverifiedSender = map[string]struct {
	status int
	msg    string
}{
	"sendgrid": {403, "The from address does not match a verified Sender Identity. Mail cannot be sent until this error is resolved."},
	"resend":   {403, "The acme.test domain is not verified. Please, add and verify your domain on https://resend.com/domains"},
	"mailgun":  {403, "Domain mg.acme.test is not allowed to send: Free accounts are for test purposes only. Please upgrade or add the address to authorized recipients in Account Settings."},
	"ses":      {400, "Email address is not verified. The following identities failed the check in region US-EAST-1: support@acme.test"},
}

func TestCauseOfHTTPFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		respond func(f *providertest.Fake) providertest.Responder
		want    string
		msg     string // a substring of the user's message, if any
		not     string // what the message must not say
	}{
		{"401", func(f *providertest.Fake) providertest.Responder { return f.Reject(401, "invalid API key") },
			CauseCredentials, "check", ""},
		{"403 without permission", func(f *providertest.Fake) providertest.Responder {
			return f.Reject(403, "The API key does not have permission to send")
		}, CauseCredentials, "permissions", ""},
		{"403 or 400 from an unverified sender", func(f *providertest.Fake) providertest.Responder {
			u := unverifiedSender[f.Kind]
			return f.Reject(u.status, u.msg)
		}, CauseSenderNotVerified, "verify the sender", "permissions"},
		{"400 about the message", func(f *providertest.Fake) providertest.Responder {
			return f.Reject(400, "The to field is required")
		}, CauseRejected, "rejected (400)", ""},
		{"429", func(f *providertest.Fake) providertest.Responder { return f.Reject(429, "slow down") },
			CauseProviderUnavailable, "", ""},
		{"500", func(f *providertest.Fake) providertest.Responder { return f.Reject(500, "internal error") },
			CauseProviderUnavailable, "", ""},
		{"503", func(f *providertest.Fake) providertest.Responder { return f.Reject(503, "maintenance") },
			CauseProviderUnavailable, "", ""},
		{"dropped connection", func(*providertest.Fake) providertest.Responder { return providertest.Drop },
			CauseConnection, "", ""},
		{"no answer in time", func(*providertest.Fake) providertest.Responder {
			return func(_ http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() }
		}, CauseTimeout, "", ""},
	}
	for _, kind := range providertest.Kinds {
		t.Run(kind, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					f := providertest.Start(t, kind)
					f.Respond(tt.respond(f))
					// Only the case about a timeout has a short one: on a loaded
					// machine an answer can take longer than 300 ms (CI of a1792ed
					// saw SES's do), and it would be read as a timeout.
					var hc HTTPConfig
					if tt.want == CauseTimeout {
						hc.Timeout = 300 * time.Millisecond
					}
					p := newProvider(t, kind, f.URL, hc)
					_, err := p.Send(context.Background(), fullMessage())
					if got := Cause(err); got != tt.want {
						t.Errorf("Cause(%q) = %q, want %q", err, got, tt.want)
					}
					if tt.msg != "" && !strings.Contains(err.Error(), tt.msg) {
						t.Errorf("error %q does not say %q", err, tt.msg)
					}
					if tt.not != "" && strings.Contains(err.Error(), tt.not) {
						t.Errorf("error %q says %q", err, tt.not)
					}
				})
			}
			t.Run("a line break in the subject", func(t *testing.T) {
				f := providertest.Start(t, kind)
				m := fullMessage()
				m.Subject = "a\r\nBcc: x@example.org"
				_, err := newProvider(t, kind, f.URL, HTTPConfig{}).Send(context.Background(), m)
				if got := Cause(err); got != CauseInvalidMessage || f.Count() != 0 {
					t.Errorf("Cause(%q) = %q after %d requests, want %q after none", err, got, f.Count(), CauseInvalidMessage)
				}
			})
			t.Run("connection refused", func(t *testing.T) {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				url := "http://" + l.Addr().String()
				l.Close()
				_, err = newProvider(t, kind, url, HTTPConfig{}).Send(context.Background(), fullMessage())
				if got := Cause(err); got != CauseConnectionRefused {
					t.Errorf("Cause(%q) = %q, want %q", err, got, CauseConnectionRefused)
				}
			})
		})
	}
}

// TestCauseOfSESWithoutCredentials: with no keys and nothing in the
// default chain (no environment, no profile, no instance role), the SDK
// fails before any request; that is a credentials problem, not a failed
// connection.
// Not parallel: sets the process's environment (AWS credentials).
func TestCauseOfSESWithoutCredentials(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "none")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_CONFIG_FILE": empty, "AWS_SHARED_CREDENTIALS_FILE": empty,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": ""} {
		t.Setenv(k, v)
	}
	f := providertest.Start(t, "ses")
	p, err := NewSES(context.Background(), SESConfig{Region: "eu-west-1", Endpoint: f.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Send(context.Background(), fullMessage())
	se := mustSendError(t, err)
	if got := Cause(err); got != CauseCredentials {
		t.Errorf("Cause(%q) = %q, want %q", err, got, CauseCredentials)
	}
	if se.Temporary || se.Unknown || !strings.Contains(se.Error(), "credentials") {
		t.Errorf("got %+v (%q), want a permanent failure about the credentials", se, se)
	}
	if n := f.Count(); n != 0 {
		t.Errorf("fake received %d requests, want none", n)
	}
}

func TestCausesAreClosedAndWorded(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, c := range Causes {
		d := DescribeCause(c)
		if d == "" {
			t.Errorf("DescribeCause(%q) is empty", c)
		}
		if other, ok := seen[d]; ok {
			t.Errorf("causes %q and %q are both worded %q", c, other, d)
		}
		seen[d] = c
	}
	if got := DescribeCause("no-such-cause"); got != DescribeCause(CauseUnknown) {
		t.Errorf("DescribeCause of an unlisted cause = %q, want the unknown wording", got)
	}
	for _, err := range []error{errors.New("what"), context.DeadlineExceeded, ErrClosed, ErrProviderClosed,
		NewSendError("x", nil), &SendError{Code: 550}, &SendError{Code: 429}, &SendError{Code: 401}} {
		if c := Cause(err); !slices.Contains(Causes, c) {
			t.Errorf("Cause(%v) = %q, not one of Causes", err, c)
		}
	}
	if c := Cause(nil); c != "" {
		t.Errorf("Cause(nil) = %q, want \"\"", c)
	}
}

func TestCheckAgainstAReachableServer(t *testing.T) {
	t.Parallel()
	mx := smtptest.Start(t)
	p, err := NewSMTP(SMTPConfig{Host: mx.Host(), Port: mx.Port(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Check(context.Background()); err != nil {
		t.Fatalf("Check() = %v, want nil", err)
	}
}
