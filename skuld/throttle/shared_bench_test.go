package throttle

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// fakeDriver answers every call at once from a fixed state: what the
// shared throttle costs on this side of the wire.
type fakeDriver struct {
	raw Raw
	ids atomic.Int64
}

func (d *fakeDriver) Name() string { return "fake" }

func (d *fakeDriver) Reserve(_ context.Context, _ Limits, asks []Ask) (*Batch, error) {
	b := &Batch{Raw: d.raw, Verdicts: make([]Verdict, len(asks))}
	b.Now = time.Now().UnixNano()
	for i := range asks {
		b.Verdicts[i] = Verdict{Admitted: true, ID: d.ids.Add(1)}
	}
	return b, nil
}

func (d *fakeDriver) Settle(context.Context, []Settlement) error { return nil }

func (d *fakeDriver) Read(context.Context, string) (*Raw, error) { r := d.raw; return &r, nil }

func (d *fakeDriver) Restore(context.Context, Record, bool) (bool, error) { return true, nil }

// BenchmarkSharedReserveCommitGoSide is Reserve+Commit through Shared over
// a driver that answers at once with a full minute of buckets and 50
// sends in flight: the Go side of a shared admission, without the
// backend.
func BenchmarkSharedReserveCommitGoSide(b *testing.B) {
	now := time.Now().UnixNano()
	sc := RawScope{}
	for i := range int64(61) {
		sc.Minute = append(sc.Minute, Bucket{Index: now/1e9 - i, Sends: 3})
		sc.Hour = append(sc.Hour, Bucket{Index: now/6e10 - i, Sends: 150})
	}
	for i := range int64(50) {
		sc.Flights = append(sc.Flights, Flight{ID: -i - 1, Deadline: now + int64(time.Minute)})
	}
	lim := Limits{PerMinute: 1 << 30, PerHour: 1 << 30}
	s := NewShared(&fakeDriver{raw: Raw{Global: sc, Inbox: map[string]*RawScope{"bench-inbox": &sc}}},
		SharedOptions{Global: lim, Inbox: lim})
	defer s.Close(context.Background())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tk, err := s.Reserve(ctx, Request{Inbox: "bench-inbox", Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tk.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
