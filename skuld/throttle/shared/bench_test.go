package shared

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
)

// fakeDriver answers every call at once from a fixed state: what the
// shared throttle costs on this side of the wire.
type fakeDriver struct {
	raw throttle.Raw
	ids atomic.Int64
}

func (d *fakeDriver) Name() string { return "fake" }

func (d *fakeDriver) Reserve(_ context.Context, _ throttle.Limits, asks []throttle.Ask) (*throttle.Batch, error) {
	b := &throttle.Batch{Raw: d.raw, Verdicts: make([]throttle.Verdict, len(asks))}
	b.Now = time.Now().UnixNano()
	for i := range asks {
		b.Verdicts[i] = throttle.Verdict{Admitted: true, ID: d.ids.Add(1)}
	}
	return b, nil
}

func (d *fakeDriver) Settle(context.Context, []throttle.Settlement) error { return nil }

func (d *fakeDriver) Read(context.Context, string) (*throttle.Raw, error) { r := d.raw; return &r, nil }

func (d *fakeDriver) Restore(context.Context, throttle.Record, bool) (bool, error) { return true, nil }

// BenchmarkSharedReserveCommitGoSide is Reserve+Commit through a shared Throttle over
// a driver that answers at once with a full minute of buckets and 50
// sends in flight: the Go side of a shared admission, without the
// backend.
func BenchmarkSharedReserveCommitGoSide(b *testing.B) {
	now := time.Now().UnixNano()
	sc := throttle.RawScope{}
	for i := range int64(61) {
		sc.Minute = append(sc.Minute, throttle.Bucket{Index: now/1e9 - i, Sends: 3})
		sc.Hour = append(sc.Hour, throttle.Bucket{Index: now/6e10 - i, Sends: 150})
	}
	for i := range int64(50) {
		sc.Flights = append(sc.Flights, throttle.Flight{ID: -i - 1, Deadline: now + int64(time.Minute)})
	}
	lim := throttle.Limits{PerMinute: 1 << 30, PerHour: 1 << 30}
	s := New(&fakeDriver{raw: throttle.Raw{Global: sc, Inbox: map[string]*throttle.RawScope{"bench-inbox": &sc}}},
		Options{Global: lim, Inbox: lim})
	defer s.Close(context.Background())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tk, err := s.Reserve(ctx, throttle.Request{Inbox: "bench-inbox", Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tk.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
