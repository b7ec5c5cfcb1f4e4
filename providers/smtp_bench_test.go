package providers

import (
	"context"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// The two benchmarks send the same small message to a loopback smtptest
// server through the same Send code path; NewConn ages every pooled
// connection past IdleTimeout before each send, so each message pays for a
// dial, greeting, EHLO (and TLS handshake) and the QUIT of the previous
// connection. conns/op reports what the server saw.

func BenchmarkSMTPSendReuse(b *testing.B) {
	benchmarkSend(b, false)
}

func BenchmarkSMTPSendNewConn(b *testing.B) {
	benchmarkSend(b, true)
}

func benchmarkSend(b *testing.B, newConnEachTime bool) {
	modes := []struct {
		name string
		opts []smtptest.Option
		tls  bool
	}{
		{"plain", nil, false},
		{"starttls", []smtptest.Option{smtptest.WithSTARTTLS()}, true},
	}
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			s := smtptest.Start(b, mode.opts...)
			p, err := NewSMTP(SMTPConfig{
				Host: s.Host(), Port: s.Port(), HELO: "bench.test",
				UseTLS: mode.tls, TLSConfig: s.ClientTLSConfig(),
			})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			if newConnEachTime {
				clock := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
				p.now = func() time.Time {
					clock.Advance(time.Hour) // older than IdleTimeout at every take
					return clock.Now()
				}
			}
			m := simpleMessage(1)
			ctx := context.Background()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if _, err := p.Send(ctx, m); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(s.Connections())/float64(n), "conns/op")
		})
	}
}

// BenchmarkSMTPSendGuarded and BenchmarkSMTPSendUnguarded send the same
// small message through the same Send, on one reused plain connection to
// a loopback smtptest server, with and without the guard of the attempt's
// end (guardConn). The guard must cost nothing a send can feel: run them
// with scripts/bench-ratio.sh, which alternates them in one run.
func BenchmarkSMTPSendGuarded(b *testing.B) { benchmarkGuard(b, false) }

func BenchmarkSMTPSendUnguarded(b *testing.B) { benchmarkGuard(b, true) }

func benchmarkGuard(b *testing.B, unguarded bool) {
	s := smtptest.Start(b)
	p, err := NewSMTP(SMTPConfig{Host: s.Host(), Port: s.Port(), HELO: "bench.test"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	p.unguarded = unguarded
	m := simpleMessage(1)
	// As the send pipeline calls it: with a deadline, so the guard's
	// timer is armed and stopped on every send.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Send(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}
