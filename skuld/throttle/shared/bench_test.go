package shared

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// fakeDriver answers every call at once from a fixed state: what the
// shared throttle costs on this side of the wire.
type fakeDriver struct {
	raw throttledriver.Raw
	ids atomic.Int64
}

func (d *fakeDriver) Name() string { return "fake" }

func (d *fakeDriver) Reserve(_ context.Context, _ throttle.Limits, asks []throttledriver.Ask) (*throttledriver.Batch, error) {
	b := &throttledriver.Batch{Raw: d.raw, Verdicts: make([]throttledriver.Verdict, len(asks))}
	b.Now = time.Now().UnixNano()
	for i := range asks {
		b.Verdicts[i] = throttledriver.Verdict{Admitted: true, ID: d.ids.Add(1)}
	}
	return b, nil
}

func (d *fakeDriver) Settle(context.Context, []throttledriver.Settlement) error { return nil }

func (d *fakeDriver) Read(context.Context, string) (*throttledriver.Raw, error) {
	r := d.raw
	return &r, nil
}

func (d *fakeDriver) Restore(context.Context, throttledriver.Record, bool) (bool, error) {
	return true, nil
}

// BenchmarkSharedReserveCommitGoSide is Reserve+Commit through a shared Throttle over
// a driver that answers at once with a full minute of buckets and 50
// sends in flight: the Go side of a shared admission, without the
// backend.
func BenchmarkSharedReserveCommitGoSide(b *testing.B) {
	now := time.Now().UnixNano()
	sc := throttledriver.RawScope{}
	for i := range int64(61) {
		sc.Minute = append(sc.Minute, throttledriver.Bucket{Index: now/1e9 - i, Sends: 3})
		sc.Hour = append(sc.Hour, throttledriver.Bucket{Index: now/6e10 - i, Sends: 150})
	}
	for i := range int64(50) {
		sc.Flights = append(sc.Flights, throttledriver.Flight{ID: -i - 1, Deadline: now + int64(time.Minute)})
	}
	lim := throttle.Limits{PerMinute: 1 << 30, PerHour: 1 << 30}
	s := New(&fakeDriver{raw: throttledriver.Raw{Global: sc, Inbox: map[string]*throttledriver.RawScope{"bench-inbox": &sc}}},
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
