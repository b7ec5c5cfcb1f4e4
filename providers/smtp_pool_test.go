package providers

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// Connection reuse, the MaxConns bound, redial, idle timeout and Close.

func TestSMTPReusesOneConnectionSequentially(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	p := newTestSMTP(t, s, nil)
	for i := range 20 {
		mustSend(t, p, simpleMessage(i))
	}
	if got := s.Count(); got != 20 {
		t.Errorf("got %d messages, want 20", got)
	}
	if got := s.Connections(); got != 1 {
		t.Errorf("got %d connections for 20 sequential sends, want 1", got)
	}
}

func TestSMTPConcurrentSendsStayWithinMaxConns(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	p := newTestSMTP(t, s, func(c *SMTPConfig) { c.MaxConns = 4 })
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if _, err := p.Send(context.Background(), simpleMessage(i)); err != nil {
				t.Errorf("Send %d: %v", i, err)
			}
		})
	}
	wg.Wait()

	if got := s.Connections(); got > 4 || got < 1 {
		t.Errorf("got %d connections, want 1 to 4", got)
	}
	seen := make(map[string]int)
	for _, m := range s.Messages() {
		seen[m.Header.Get("Message-Id")]++
	}
	for i := range 50 {
		if id := simpleMessage(i).MessageID; seen[id] != 1 {
			t.Errorf("message %s received %d times, want once", id, seen[id])
		}
	}
	if len(seen) != 50 {
		t.Errorf("got %d distinct messages, want 50", len(seen))
	}
}

func TestSMTPRedialsWhenPooledConnectionWasDropped(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	p := newTestSMTP(t, s, nil)
	mustSend(t, p, simpleMessage(1))

	for i := 2; i <= 4; i++ {
		s.DropIdleConnections()
		mustSend(t, p, simpleMessage(i))
		if got := s.Connections(); got != i {
			t.Errorf("after drop %d: got %d connections, want %d", i-1, got, i)
		}
	}
	seen := make(map[string]int)
	for _, m := range s.Messages() {
		seen[m.Header.Get("Message-Id")]++
	}
	for i := 1; i <= 4; i++ {
		if id := simpleMessage(i).MessageID; seen[id] != 1 {
			t.Errorf("message %s received %d times, want once", id, seen[id])
		}
	}
}

// fakeClock is a settable clock for ageing pooled connections.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestSMTPIdleTimeout(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	p := newTestSMTP(t, s, func(c *SMTPConfig) { c.IdleTimeout = time.Minute })
	clock := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	p.now = clock.Now

	steps := []struct {
		idle      time.Duration
		wantConns int
	}{
		{0, 1},                // first send dials
		{59 * time.Second, 1}, // younger than IdleTimeout: reused
		{time.Minute, 2},      // as old as IdleTimeout: closed, a new one dialed
		{time.Second, 2},
	}
	for i, st := range steps {
		clock.Advance(st.idle)
		mustSend(t, p, simpleMessage(i))
		if got := s.Connections(); got != st.wantConns {
			t.Errorf("send %d after %s idle: got %d connections, want %d", i, st.idle, got, st.wantConns)
		}
	}
}

func TestSMTPConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	ln.Close() // nothing listens on addr now

	p, err := NewSMTP(SMTPConfig{Host: "127.0.0.1", Port: addr.Port, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("NewSMTP must not dial, got %v", err)
	}
	defer p.Close()
	_, err = p.Send(context.Background(), simpleMessage(1))
	want := "smtp: cannot connect to the SMTP server: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), strconv.Itoa(addr.Port)) {
		t.Fatalf("got error %v, want one starting %q that does not name the relay", err, want)
	}
	var se *SendError
	if !errors.As(err, &se) || !se.Temporary {
		t.Errorf("got %#v, want a temporary *SendError", err)
	}
}

func TestSMTPClose(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	p := newTestSMTP(t, s, nil)
	mustSend(t, p, simpleMessage(1))

	if err := p.Close(); err != nil {
		t.Errorf("first Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := p.Send(context.Background(), simpleMessage(2)); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: got %v, want ErrClosed", err)
	}
	if got := s.Count(); got != 1 {
		t.Errorf("got %d messages, want 1", got)
	}
}

func TestSMTPCloseUnblocksWaitingSend(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	p := newTestSMTP(t, s, func(c *SMTPConfig) { c.MaxConns = 1 })
	if err := p.acquire(context.Background()); err != nil { // occupy the only slot
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := p.Send(context.Background(), simpleMessage(1))
		done <- err
	}()
	p.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("got %v, want ErrClosed", err)
	}
	p.release()
}

func TestSMTPContextEndsWaitForConnection(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	p := newTestSMTP(t, s, func(c *SMTPConfig) { c.MaxConns = 1 })
	if err := p.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.release()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := p.Send(ctx, simpleMessage(1))
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	if got := s.Connections(); got != 0 {
		t.Errorf("got %d connections, want 0", got)
	}
}

// TestSMTPWaitAndTransactionShareTheDeadline is the shape of issue 15:
// every connection is busy with a slow DATA; a send that waits for one and
// then meets the same slow DATA must still end by its deadline.
// Not parallel: it times a real deadline, which other tests' load would stretch.
func TestSMTPWaitAndTransactionShareTheDeadline(t *testing.T) {
	s := smtptest.Start(t)
	s.Stall(smtptest.AtData, 2*time.Second)
	p := newTestSMTP(t, s, func(c *SMTPConfig) { c.MaxConns = 4 })
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if _, err := p.Send(context.Background(), simpleMessage(i)); err != nil {
				t.Errorf("busy send %d: %v", i, err)
			}
		})
	}
	for s.Connections() < 4 {
		time.Sleep(5 * time.Millisecond)
	}

	const attempt = 3 * time.Second
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), attempt)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_, err := p.Send(ctx, simpleMessage(5))
	elapsed := time.Since(start)
	wg.Wait()
	p.Close()
	s.WaitIdle(t)

	t.Logf("after %s: %v", elapsed.Round(time.Millisecond), err)
	var se *SendError
	if !errors.As(err, &se) || !se.Temporary || se.Unknown {
		t.Errorf("got %v, want a temporary *SendError from the transaction (cut off before DATA)", err)
	}
	if elapsed > attempt+deadlineSlack {
		t.Errorf("Send returned after %s, want by its deadline %s (+%s slack)", elapsed.Round(time.Millisecond), attempt, deadlineSlack)
	}
	for _, m := range s.Messages() {
		if m.Header.Get("Message-Id") == simpleMessage(5).MessageID {
			t.Errorf("the relay received the waiting send's message, %s after its deadline",
				m.Received.Sub(deadline).Round(time.Millisecond))
		}
	}
	if got := s.Count(); got != 4 {
		t.Errorf("the relay stored %d messages, want the 4 busy ones", got)
	}
}

// TestSMTPPooledConnectionOutlivesTheAttempt checks that the guard of an
// attempt's end is lifted when the attempt ends: a pooled connection idle
// past that end is reused, not killed.
func TestSMTPPooledConnectionOutlivesTheAttempt(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	p := newTestSMTP(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	if _, err := p.Send(ctx, simpleMessage(1)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	cancel()
	time.Sleep(1200 * time.Millisecond) // past the first attempt's deadline
	mustSend(t, p, simpleMessage(2))
	if got := s.Connections(); got != 1 {
		t.Errorf("got %d connections, want 1: the pooled connection was not reused", got)
	}
}
