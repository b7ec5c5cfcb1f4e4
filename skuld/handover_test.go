package skuld

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// TestSendRecordsItsWaitForTheProvider: with the one SMTP connection busy,
// a second send records on its slot that it waits, and, once it holds the
// connection and before a byte of it reaches the server, that it was
// handed over; a send whose connection is free at once writes nothing.
func TestSendRecordsItsWaitForTheProvider(t *testing.T) {
	mx := smtptest.Start(t)
	p, err := providers.NewSMTP(providers.SMTPConfig{Host: mx.Host(), Port: mx.Port(), MaxConns: 1,
		Timeout: 5 * time.Second, HELO: "client.test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	st := newMemStore()
	marks := make(chan string, 4)
	// What the server had received when each mark was written.
	var atMark []string
	st.marked = func(m string) {
		atMark = append(atMark, fmt.Sprintf("%s after %d messages on %d connections", m, mx.Count(), mx.Connections()))
		marks <- m
	}
	clock := newFakeClock()
	s := NewSender(Options{Store: st, Provider: p, Throttle: throttle.NewMemory(newLimiter(10), clock), Clock: clock})
	send := func(id string) <-chan *store.Message {
		done := make(chan *store.Message, 1)
		go func() {
			m, err := sendMsg(s, context.Background(), SendRequest{MessageID: id, InboxID: "ib1",
				To: address.MustParseList("bob@x.test"), Subject: "Hi", Body: "hello"})
			if err != nil {
				t.Errorf("Send %s: %v", id, err)
			}
			done <- m
		}()
		return done
	}

	hold := mx.HoldAt(smtptest.AtData)
	first := send("m1")
	<-hold.Reached() // m1 holds the only connection
	second := send("m2")
	// The wait is recorded once it has lasted waitUnrecorded.
	for clock.Timers() == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case got := <-marks:
		t.Fatalf("%q written before the wait lasted %v", got, waitUnrecorded)
	default:
	}
	clock.Advance(waitUnrecorded)
	if got := <-marks; got != "waiting m2" {
		t.Fatalf("first mark: got %q, want %q", got, "waiting m2")
	}
	hold.Release()
	for _, done := range []<-chan *store.Message{first, second} {
		if m := <-done; m == nil || m.Status != store.StatusSent {
			t.Fatalf("got %+v, want sent", m)
		}
	}
	want := []string{"waiting m2 after 0 messages on 1 connections", "handed over m2 after 1 messages on 1 connections"}
	if !slices.Equal(atMark, want) {
		t.Errorf("marks: got %q, want %q (handed over before its bytes went)", atMark, want)
	}

	if m := <-send("m3"); m == nil || m.Status != store.StatusSent {
		t.Fatalf("got %+v, want sent", m)
	}
	if len(st.marks) != 2 {
		t.Errorf("a send whose connection was free wrote %q, want nothing", st.marks[2:])
	}

	// A wait shorter than waitUnrecorded writes nothing either.
	hold = mx.HoldAt(smtptest.AtData)
	first = send("m4")
	<-hold.Reached()
	second = send("m5")
	for clock.Timers() == 0 {
		time.Sleep(time.Millisecond)
	}
	hold.Release()
	for _, done := range []<-chan *store.Message{first, second} {
		if m := <-done; m == nil || m.Status != store.StatusSent {
			t.Fatalf("got %+v, want sent", m)
		}
	}
	clock.Advance(waitUnrecorded)
	if len(st.marks) != 2 {
		t.Errorf("a send that waited less than %v wrote %q, want nothing", waitUnrecorded, st.marks[2:])
	}
}
