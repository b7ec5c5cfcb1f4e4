package providers

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/providertest"
)

// benchClients is the number of goroutines sending at once, well above
// the provider's concurrency so that it, not the clients, is the limit.
const benchClients = 64

// BenchmarkHTTPProviderLatency50ms sends through each provider to a fake
// that answers after 50 ms. With MaxConcurrency calls in flight the
// ceiling is MaxConcurrency / 0.05 s; "of_ceiling" is the measured rate
// divided by it (goal ≥ 0.9).
func BenchmarkHTTPProviderLatency50ms(b *testing.B) {
	for _, kind := range providertest.Kinds {
		b.Run(kind, func(b *testing.B) {
			f := providertest.Start(b, kind)
			f.Delay(50 * time.Millisecond)
			p := newProvider(b, kind, f.URL, HTTPConfig{MaxConcurrency: DefaultProviderMaxConcurrency})
			rate := runParallelSends(b, p)
			ceiling := float64(DefaultProviderMaxConcurrency) / 0.05
			b.ReportMetric(rate, "sends/s")
			b.ReportMetric(rate/ceiling, "of_ceiling")
		})
	}
}

// BenchmarkHTTPProviderReuse and BenchmarkHTTPProviderNewConn send to a
// fake that answers at once, with the keep-alive pool and with a new
// connection per send (DisableKeepAlives). conns/op is what the fake saw.
func BenchmarkHTTPProviderReuse(b *testing.B)   { benchmarkConns(b, false) }
func BenchmarkHTTPProviderNewConn(b *testing.B) { benchmarkConns(b, true) }

func benchmarkConns(b *testing.B, newConn bool) {
	for _, kind := range providertest.Kinds {
		b.Run(kind, func(b *testing.B) {
			f := providertest.Start(b, kind)
			p := newProvider(b, kind, f.URL, HTTPConfig{MaxConcurrency: DefaultProviderMaxConcurrency})
			p.(interface{ base() *httpBase }).base().transport.DisableKeepAlives = newConn
			rate := runParallelSends(b, p)
			b.ReportMetric(rate, "sends/s")
			b.ReportMetric(float64(f.Connections())/float64(f.Count()), "conns/op")
		})
	}
}

// runParallelSends sends b.N messages from benchClients goroutines and
// returns the rate.
func runParallelSends(b *testing.B, p httpProvider) float64 {
	m := simpleMessage(1)
	ctx := context.Background()
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((benchClients + procs - 1) / procs)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Send(ctx, m); err != nil {
				b.Error(err)
				return
			}
		}
	})
	return float64(b.N) / time.Since(start).Seconds()
}
