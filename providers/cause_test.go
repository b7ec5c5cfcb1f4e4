package providers

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/smtptest"
)

func TestCauseOfRealSMTPFailures(t *testing.T) {
	// A port that was just free: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	mx := smtptest.Start(t)

	tests := []struct {
		name string
		cfg  SMTPConfig
		want string
	}{
		{"nothing listening", SMTPConfig{Host: "127.0.0.1", Port: closedPort}, CauseConnectionRefused},
		{"unknown host", SMTPConfig{Host: "no-such-host.invalid", Port: 25}, CauseDNS},
		{"no STARTTLS offered", SMTPConfig{Host: mx.Host(), Port: mx.Port(), UseTLS: true}, CauseTLS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Timeout = 5 * time.Second
			p, err := NewSMTP(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			err = p.Check(context.Background())
			if err == nil {
				t.Fatal("Check() = nil, want an error")
			}
			if got := Cause(err); got != tt.want {
				t.Errorf("Cause(%q) = %q, want %q", err, got, tt.want)
			}
		})
	}
}

func TestCauseOfProviderAnswers(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&SendError{Code: 550, msg: "smtp: recipient rejected"}, CauseRejected},
		{&SendError{Code: 401, msg: "mailgun: unauthorized"}, CauseAuth},
		{&SendError{Code: 535, msg: "smtp: x"}, CauseAuth},
		{&SendError{Err: errors.New("EOF"), msg: "smtp: connection lost"}, CauseConnection},
		{context.DeadlineExceeded, CauseTimeout},
		{errors.New("what"), CauseUnknown},
	}
	for _, tt := range tests {
		if got := Cause(tt.err); got != tt.want {
			t.Errorf("Cause(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if d := DescribeCause(CauseRejected); !strings.Contains(d, "refused by the server") {
		t.Errorf("DescribeCause(rejected) = %q", d)
	}
}

func TestCheckAgainstAReachableServer(t *testing.T) {
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
