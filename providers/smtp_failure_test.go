package providers

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// docs/security.md promises that a client's error never names the relay: its
// address is for the operator's log. Go's network errors name both ends
// ("read tcp 127.0.0.1:59234->127.0.0.1:18326: i/o timeout"), so every
// way a send can fail is tried here; the timeouts at each stage are in
// TestSMTPAttemptNeverOutlivesItsDeadline.

func TestSMTPResetAtEachStage(t *testing.T) {
	t.Parallel()
	for _, stage := range allStages {
		t.Run(stage.String(), func(t *testing.T) {
			s := smtptest.Start(t)
			s.ResetAt(stage)
			p := newTestSMTP(t, s, nil)
			m := simpleMessage(1)
			if stage == smtptest.InContent {
				// Larger than the buffers, so the reset meets the writer.
				m = bigMessage(t, 1, 512<<10)
				smallBuffers(p)
			}
			_, err := p.Send(context.Background(), m)
			t.Logf("error: %v", err)
			want := cutOff(stage) // nothing taken before the final ".", unknown after
			if got := outcomeOf(err); got != want {
				t.Errorf("got outcome %s (%v), want %s", got, err, want)
			}
			checkNoRelayAddress(t, err, s)
		})
	}
}

func TestSMTPErrorsNeverNameTheRelay(t *testing.T) {
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
		edit  func(*SMTPConfig, *smtptest.Server)
		names []string // what must not appear, beyond the relay's IP and port
	}{
		{"connection refused", nil, func(c *SMTPConfig, _ *smtptest.Server) { c.Port = closedPort },
			[]string{strconv.Itoa(closedPort)}},
		{"host not found", nil, func(c *SMTPConfig, _ *smtptest.Server) { c.Host = "relay.no-such-host.invalid" },
			[]string{"relay.no-such-host.invalid"}},
		{"untrusted certificate (STARTTLS)", []smtptest.Option{smtptest.WithSTARTTLS()},
			func(c *SMTPConfig, _ *smtptest.Server) { c.UseTLS = true }, nil},
		{"untrusted certificate (implicit TLS)", []smtptest.Option{smtptest.WithImplicitTLS()},
			func(c *SMTPConfig, _ *smtptest.Server) { c.UseTLS, c.ImplicitTLS = true, true }, nil},
		{"certificate for another name", []smtptest.Option{smtptest.WithImplicitTLS()}, func(c *SMTPConfig, s *smtptest.Server) {
			c.UseTLS, c.ImplicitTLS, c.TLSConfig = true, true, s.ClientTLSConfig()
			c.TLSConfig.ServerName = "mail.example.com"
		}, []string{"mail.example.com"}},
		{"plain server on an implicit-TLS port", nil, func(c *SMTPConfig, _ *smtptest.Server) {
			c.UseTLS, c.ImplicitTLS = true, true
		}, nil},
		{"wrong password", []smtptest.Option{smtptest.WithAuth("user", "right")}, func(c *SMTPConfig, _ *smtptest.Server) {
			c.Username, c.Password = "user", "wrong"
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := smtptest.Start(t, tt.opts...)
			p := newTestSMTP(t, s, func(c *SMTPConfig) {
				c.Timeout = 2 * time.Second
				tt.edit(c, s)
			})
			_, err := p.Send(context.Background(), simpleMessage(1))
			t.Logf("error: %v", err)
			if err == nil {
				t.Fatal("Send succeeded, want a failure")
			}
			checkNoRelayAddress(t, err, s)
			for _, name := range tt.names {
				if strings.Contains(err.Error(), name) {
					t.Errorf("error %q names the relay (%q)", err, name)
				}
			}
		})
	}
}
