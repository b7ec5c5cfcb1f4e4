package providers

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// deadlineConn records the deadlines set on it.
type deadlineConn struct {
	net.Conn
	set time.Time
}

func (c *deadlineConn) SetDeadline(t time.Time) error      { c.set = t; return nil }
func (c *deadlineConn) SetReadDeadline(t time.Time) error  { c.set = t; return nil }
func (c *deadlineConn) SetWriteDeadline(t time.Time) error { c.set = t; return nil }

func TestGuardBoundsDeadlines(t *testing.T) {
	t.Parallel()
	now := time.Now()
	end := now.Add(time.Minute)
	tests := []struct {
		name  string
		span  string // "", "setup" or "transaction"
		asked time.Time
		want  time.Time
	}{
		{"idle: as asked", "", now.Add(time.Hour), now.Add(time.Hour)},
		{"idle: none", "", time.Time{}, time.Time{}},
		{"setup: earlier kept", "setup", now.Add(time.Second), now.Add(time.Second)},
		{"setup: later cut to the end", "setup", now.Add(time.Hour), end},
		{"setup: none becomes the end", "setup", time.Time{}, end},
		{"transaction: go-mail's shorter reset raised to the end", "transaction", now.Add(15 * time.Second), end},
		{"transaction: later cut to the end", "transaction", now.Add(time.Hour), end},
		{"transaction: none becomes the end", "transaction", time.Time{}, end},
		{"transaction: a past deadline still interrupts", "transaction", now.Add(-time.Hour), now.Add(-time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &deadlineConn{}
			g := newGuardConn(c)
			switch tt.span {
			case "setup":
				g.beginSetup(context.Background(), end)
			case "transaction":
				_ = g.beginTransaction(context.Background(), end)
			}
			if err := g.SetDeadline(tt.asked); err != nil {
				t.Fatal(err)
			}
			if !c.set.Equal(tt.want) {
				t.Errorf("got deadline %v, want %v", c.set, tt.want)
			}
			if !g.finish() {
				t.Errorf("finish reported the connection closed, want usable")
			}
		})
	}
}

// TestGuardClosesWhenTheAttemptEnds covers a call that sets no deadline at
// all: the connection is closed under it when the attempt's context ends,
// the error reads as a timeout, and finish reports it unusable.
func TestGuardClosesWhenTheAttemptEnds(t *testing.T) {
	t.Parallel()
	client, server := net.Pipe() // no deadlines of its own are set below
	defer server.Close()
	g := newGuardConn(client)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	g.beginSetup(ctx, time.Time{}) // a span with no deadline to apply
	_, err := g.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("got %v, want a timeout", err)
	}
	if g.finish() {
		t.Errorf("finish reported the connection usable after the attempt's end closed it")
	}
	if got := g.firstFailure(); !errors.Is(got, os.ErrDeadlineExceeded) {
		t.Errorf("got first failure %v, want the timeout", got)
	}
}
