package providers

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// TLS, authentication and the server's rejections, against smtptest.

func TestSMTPTLS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []smtptest.Option
		edit func(*SMTPConfig, *smtptest.Server)
	}{
		{"starttls", []smtptest.Option{smtptest.WithSTARTTLS()}, func(c *SMTPConfig, s *smtptest.Server) {
			c.UseTLS, c.TLSConfig = true, s.ClientTLSConfig()
		}},
		{"implicit", []smtptest.Option{smtptest.WithImplicitTLS()}, func(c *SMTPConfig, s *smtptest.Server) {
			c.UseTLS, c.ImplicitTLS, c.TLSConfig = true, true, s.ClientTLSConfig()
		}},
		{"starttls with auth", []smtptest.Option{smtptest.WithSTARTTLS(), smtptest.WithAuth("u", "p")},
			func(c *SMTPConfig, s *smtptest.Server) {
				c.UseTLS, c.TLSConfig, c.Username, c.Password = true, s.ClientTLSConfig(), "u", "p"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := smtptest.Start(t, tt.opts...)
			p := newTestSMTP(t, s, func(c *SMTPConfig) { tt.edit(c, s) })
			mustSend(t, p, simpleMessage(1))
			mustSend(t, p, simpleMessage(2))
			msgs := s.Messages()
			if len(msgs) != 2 || !msgs[0].TLS || !msgs[1].TLS {
				t.Fatalf("got %d messages, want 2, both over TLS", len(msgs))
			}
			if got := s.Connections(); got != 1 {
				t.Errorf("got %d connections, want 1", got)
			}
		})
	}
}

func TestSMTPTLSFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    []smtptest.Option
		edit    func(*SMTPConfig, *smtptest.Server)
		wantErr string
	}{
		{"server without STARTTLS", nil, func(c *SMTPConfig, _ *smtptest.Server) { c.UseTLS = true }, "does not offer STARTTLS"},
		{"untrusted certificate", []smtptest.Option{smtptest.WithSTARTTLS()},
			func(c *SMTPConfig, _ *smtptest.Server) { c.UseTLS = true }, "certificate"},
		{"wrong server name", []smtptest.Option{smtptest.WithImplicitTLS()}, func(c *SMTPConfig, s *smtptest.Server) {
			c.UseTLS, c.ImplicitTLS, c.TLSConfig = true, true, s.ClientTLSConfig()
			c.TLSConfig.ServerName = "mail.example.com"
		}, "certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := smtptest.Start(t, tt.opts...)
			p := newTestSMTP(t, s, func(c *SMTPConfig) { tt.edit(c, s) })
			_, err := p.Send(context.Background(), simpleMessage(1))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
			if got := s.Count(); got != 0 {
				t.Errorf("got %d messages at the server, want 0", got)
			}
		})
	}
}

func TestSMTPAuth(t *testing.T) {
	t.Parallel()
	const password = "s3cret-Pa55word"
	tests := []struct {
		name       string
		user, pass string
		wantErr    string // "" for success
	}{
		{"right credentials", "user", password, ""},
		{"wrong password", "user", "wr0ng-Pa55word", "authentication failed: 535"},
		{"wrong user", "someone", password, "authentication failed: 535"},
		{"no credentials", "", "", "sender rejected: 502"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := smtptest.Start(t, smtptest.WithAuth("user", password))
			p := newTestSMTP(t, s, func(c *SMTPConfig) { c.Username, c.Password = tt.user, tt.pass })
			_, err := p.Send(context.Background(), simpleMessage(1))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Send: %v", err)
				}
				s.WaitForCount(t, 1)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
			for _, secret := range []string{password, tt.pass} {
				if secret != "" && strings.Contains(err.Error(), secret) {
					t.Errorf("error %q contains the password", err)
				}
			}
			var se *SendError
			if !errors.As(err, &se) || se.Temporary {
				t.Errorf("got %#v, want a permanent *SendError", err)
			}
		})
	}
}

func TestSMTPDataRejected(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	p := newTestSMTP(t, s, nil)

	s.RejectData(554, [3]int{5, 7, 1}, "rejected by policy")
	_, err := p.Send(context.Background(), simpleMessage(1))
	if err == nil || !strings.Contains(err.Error(), "smtp: message rejected: 554 5.7.1 rejected by policy") {
		t.Fatalf("got error %v, want smtp: message rejected: 554 5.7.1 rejected by policy", err)
	}
	var se *SendError
	if !errors.As(err, &se) || se.Code != 554 || se.Temporary {
		t.Errorf("got %#v, want *SendError with Code 554, not temporary", err)
	}

	s.AcceptData()
	mustSend(t, p, simpleMessage(2))
	msgs := s.Messages()
	if len(msgs) != 1 || msgs[0].Header.Get("Message-Id") != simpleMessage(2).MessageID {
		t.Errorf("got %d messages, want only message 2", len(msgs))
	}
	// No redial after DATA: the rejection is the answer, and the clean
	// rejection leaves the connection usable.
	if got := s.Connections(); got != 1 {
		t.Errorf("got %d connections, want 1", got)
	}
}

func TestSMTPRecipientRejected(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	p := newTestSMTP(t, s, nil)
	s.RejectRecipient("gone@example.org")

	m := simpleMessage(1)
	m.Cc = address.MustParseList("gone@example.org")
	_, err := p.Send(context.Background(), m)
	for _, want := range []string{"smtp: recipient rejected: 550", "gone@example.org"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got error %v, want one containing %q", err, want)
		}
	}
	mustSend(t, p, simpleMessage(2))
	if got, want := [2]int{s.Count(), s.Connections()}, [2]int{1, 1}; got != want {
		t.Errorf("got (messages, connections) %v, want %v", got, want)
	}
}
