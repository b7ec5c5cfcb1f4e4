package main

import (
	"context"
	"testing"
	"time"
)

// BenchmarkSend measures whole sends through HTTP, the pipeline and the
// database (demo provider, 32 clients) in one process, with the throttle on
// (a limit never reached) and off: the in-process twin of the -spawn runs,
// and the one to take a CPU profile of, since the server has no pprof
// endpoint. ns/op is per send, all clients together.
func BenchmarkSend(b *testing.B) {
	for _, driver := range []string{"sqlite", "postgres"} {
		for _, tc := range []struct {
			name      string
			perMinute int
		}{{"throttle-on", 10_000_000}, {"throttle-off", 0}} {
			b.Run(driver+"/"+tc.name, func(b *testing.B) {
				url := startServerOn(b, driver, tc.perMinute, nil)
				hc := newHTTPClient(32)
				cfg := loadConfig{baseURL: url, clients: 32, duration: maxDuration, now: time.Now}
				id, err := createInbox(context.Background(), hc, cfg)
				if err != nil {
					b.Fatal(err)
				}
				cfg.inboxID, cfg.requests = id, b.N
				b.ResetTimer()
				res := runLoad(context.Background(), hc, cfg)
				b.StopTimer()
				if got := res.sendStatus["sent"]; got != b.N {
					b.Fatalf("sent %d, want %d (statuses %v, first error %v)", got, b.N, res.httpStatus, res.firstErr)
				}
				hc.CloseIdleConnections()
			})
		}
	}
}
