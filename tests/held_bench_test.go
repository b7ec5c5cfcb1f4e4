package tests

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkScheduledSendLateness schedules 60 messages a quarter of a
// second apart, each due on its own (no burst), and reports how long
// after its scheduled_at each reached the SMTP server: the lateness of an
// unthrottled scheduled send (issue 19: p99 ≤ 1 s on this machine). Run it
// once: go test -run '^$' -bench ScheduledSendLateness -benchtime 1x ./tests/
func BenchmarkScheduledSendLateness(b *testing.B) {
	for _, driver := range drivers {
		b.Run(driver, func(b *testing.B) {
			const n, gap = 60, 250 * time.Millisecond
			s := startDefault(b, driver, nil)
			inbox := s.createInbox(b, "lateness")
			var late []time.Duration
			for k := 0; b.Loop(); k++ {
				base := s.SMTP.Count()
				first := time.Now().Add(3 * time.Second)
				due := map[string]time.Time{}
				for i := range n {
					at := first.Add(time.Duration(i) * gap)
					to := fmt.Sprintf("l%d-%d@example.com", k, i)
					mustStatus(b, s.sendAt(b, inbox, to, at), http.StatusAccepted)
					due[to] = at.Truncate(time.Microsecond)
				}
				time.Sleep(time.Until(first.Add(n * gap)))
				s.SMTP.WaitForCount(b, base+n)
				for _, m := range s.SMTP.Messages() {
					at, ok := due[m.To[0]]
					if !ok {
						continue // an earlier round's
					}
					l := m.Received.Sub(at)
					if l < 0 {
						b.Fatalf("%s delivered %v before its time", m.To[0], -l)
					}
					late = append(late, l)
				}
			}
			slices.Sort(late)
			q := func(p float64) float64 { return late[int(p*float64(len(late)-1))].Seconds() * 1000 }
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(q(1), "max-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
