package smtptest

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// runSession runs one message through go-smtp's client step by step and
// returns when each step ended (index: the Stage it waits on) and the
// first error.
func runSession(s *Server, msg string) (ends map[Stage]time.Time, start time.Time, err error) {
	ends = make(map[Stage]time.Time)
	start = time.Now()
	c, err := smtp.Dial(s.Addr())
	if err != nil {
		return ends, start, err
	}
	defer c.Close()
	mark := func(st Stage, err error) error {
		ends[st] = time.Now()
		return err
	}
	// go-smtp's client reads the greeting with its first command.
	if err := mark(AtEHLO, c.Hello("client.test")); err != nil {
		return ends, start, err
	}
	if err := mark(AtMail, c.Mail("a@example.com", nil)); err != nil {
		return ends, start, err
	}
	if err := mark(AtRcpt, c.Rcpt("b@example.org", nil)); err != nil {
		return ends, start, err
	}
	w, err := c.Data()
	if err := mark(AtData, err); err != nil {
		return ends, start, err
	}
	_, err = io.Copy(w, strings.NewReader(msg))
	if err := mark(InContent, err); err != nil {
		return ends, start, err
	}
	return ends, start, mark(BeforeReply, w.Close())
}

func TestStallAtEachStage(t *testing.T) {
	const d = 300 * time.Millisecond
	// The step whose end must come at least d after prev's end; the
	// greeting is read together with EHLO. Where the server stalls after
	// writing a reply (DATA, content), the client marks that reply's step
	// after the stall has begun, so prev is the step before it: the one
	// whose end certainly came first. (CI once saw 299.97ms for a 300ms
	// stall measured from the 354.)
	tests := []struct {
		stage      Stage
		step, prev Stage
	}{
		{BeforeGreeting, AtEHLO, 0},
		{AtEHLO, AtEHLO, 0},
		{AtMail, AtMail, AtEHLO},
		{AtRcpt, AtRcpt, AtEHLO},
		{AtData, AtData, AtMail},
		{InContent, BeforeReply, AtRcpt},
		{BeforeReply, BeforeReply, InContent},
	}
	for _, tt := range tests {
		t.Run(tt.stage.String(), func(t *testing.T) {
			t.Parallel()
			s := Start(t)
			s.Stall(tt.stage, d)
			ends, start, err := runSession(s, rawMultipart)
			if err != nil {
				t.Fatalf("session: %v", err)
			}
			from := start
			if tt.prev != 0 {
				from = ends[tt.prev]
			}
			if got := ends[tt.step].Sub(from); got < d {
				t.Errorf("step took %s, want at least the stall of %s", got, d)
			}
			msgs := s.Messages()
			if len(msgs) != 1 {
				t.Fatalf("got %d messages, want 1", len(msgs))
			}
			// Received is when the data was read: after a stall in the
			// content, before the reply's.
			switch rec := msgs[0].Received; {
			case tt.stage == InContent && rec.Sub(ends[AtRcpt]) < d:
				t.Errorf("got Received %s after RCPT, want at least %s", rec.Sub(ends[AtRcpt]), d)
			case tt.stage == BeforeReply && ends[BeforeReply].Sub(rec) < d:
				t.Errorf("got the reply %s after Received, want at least %s", ends[BeforeReply].Sub(rec), d)
			}
		})
	}
}

func TestResetAtEachStage(t *testing.T) {
	for _, stage := range []Stage{BeforeGreeting, AtEHLO, AtMail, AtRcpt, AtData, InContent, BeforeReply} {
		t.Run(stage.String(), func(t *testing.T) {
			s := Start(t)
			s.ResetAt(stage)
			msg := "Subject: x\r\n\r\nbody\r\n"
			if stage == InContent {
				// Larger than the socket buffers, so that the reset
				// reaches the writer rather than a reply's reader.
				msg = "Subject: x\r\n\r\n" + strings.Repeat("0123456789abcdef\r\n", 1<<19)
			}
			_, _, err := runSession(s, msg)
			if err == nil {
				t.Fatalf("session succeeded, want the reset to fail it")
			}
			want := 0
			if stage == BeforeReply {
				want = 1 // stored, then the connection was reset
			}
			s.WaitIdle(t)
			if got := s.Count(); got != want {
				t.Errorf("got %d messages stored, want %d", got, want)
			}
		})
	}
}

func TestWaitIdle(t *testing.T) {
	s := Start(t)
	s.Stall(AtMail, 200*time.Millisecond)
	c, err := smtp.Dial(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Hello("client.test"); err != nil {
		t.Fatal(err)
	}
	go c.Mail("a@example.com", nil) // the server is inside the stall
	time.Sleep(50 * time.Millisecond)
	c.Close()
	s.WaitIdle(t) // returns once the server has finished with it
	if n, _ := s.ln.idle(); n != 0 {
		t.Errorf("got %d open connections after WaitIdle, want 0", n)
	}
}

// A hold the test keeps past the server's read timeout does not spend the
// client's time: released, the message is read and stored, not refused
// with go-smtp's 554 for a read deadline that ran out during the hold (a
// held-race test's hold outlasted 30 s on a busy machine, issue 28).
func TestHoldOutlastsTheReadTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	for _, stage := range []Stage{InContent, BeforeReply} {
		t.Run(stage.String(), func(t *testing.T) {
			s := Start(t, WithReadTimeout(timeout))
			h := s.HoldAt(stage)
			done := make(chan error, 1)
			go func() {
				_, _, err := runSession(s, "Subject: held\r\n\r\nHi\r\n")
				done <- err
			}()
			<-h.Reached()
			time.Sleep(3 * timeout)
			h.Release()
			if err := <-done; err != nil {
				t.Fatalf("session after a hold of %v (read timeout %v): %v", 3*timeout, timeout, err)
			}
			if n := s.Count(); n != 1 {
				t.Fatalf("%d messages stored, want 1", n)
			}
		})
	}
}
