package providers

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// These tests hold the promise the throttle rests on: no byte of a message
// reaches the relay after the deadline of its attempt, whatever the relay
// does and whatever go-mail does with the connection's deadline, while a
// large message still gets its whole transfer allowance.
//
// The durations are bounds, not performance targets: a Send must return by
// its deadline plus a generous slack for a loaded machine, and the
// relay's stalls are far longer than both, so that a Send that waits a
// stall out is told apart from one that was cut off.

// deadlineSlack is how late after its deadline a Send may return: timers
// and goroutines on a busy shared machine, not a tolerance of the design.
const deadlineSlack = 1500 * time.Millisecond

// outcome is how a Send ended, in the terms of the send pipeline.
type outcome string

const (
	sent      outcome = "sent"
	temporary outcome = "temporary"
	unknown   outcome = "unknown"
	permanent outcome = "permanent"
)

func outcomeOf(err error) outcome {
	var se *SendError
	switch {
	case err == nil:
		return sent
	case errors.As(err, &se) && se.Unknown:
		return unknown
	case errors.As(err, &se) && se.Temporary, errors.Is(err, context.DeadlineExceeded):
		return temporary
	}
	return permanent
}

// bigMessage carries an attachment of size random bytes.

func bigMessage(t testing.TB, n, size int) Message {
	t.Helper()
	content := make([]byte, size)
	if _, err := rand.Read(content); err != nil {
		t.Fatal(err)
	}
	m := simpleMessage(n)
	m.Attachments = []Attachment{{Filename: "big.bin", ContentType: "application/octet-stream", Content: content}}
	return m
}

// deadlineMode is how the provider and the attempt are set up.
type deadlineMode struct {
	name     string
	timeout  time.Duration // SMTPConfig.Timeout; 0 is the default, 15 s
	attempt  time.Duration // the ctx deadline of the attempt, from the start of Send
	stall    time.Duration // how long the relay stalls at the stage
	large    bool          // a large message whose transfer allowance is scaled to seconds
	serverTL []smtptest.Option
	tls      func(*SMTPConfig, *smtptest.Server)
}

var (
	// The attempt ends long before the relay's stall and, in the second,
	// long before SMTP_TIMEOUT too.
	defaultMode = deadlineMode{name: "default timeouts", attempt: 2 * time.Second, stall: 4 * time.Second}
	longMode    = deadlineMode{name: "Timeout 600s", timeout: 600 * time.Second, attempt: 2 * time.Second, stall: 4 * time.Second}
	// The stall is longer than Timeout but the transaction's allowance
	// (Timeout + the transfer allowance, scaled to 8 s) covers it and the
	// transfer, slow under the race detector.
	largeMode = deadlineMode{name: "large message", timeout: time.Second, attempt: 12 * time.Second,
		stall: 2 * time.Second, large: true}
	starttlsMode = deadlineMode{name: "STARTTLS", attempt: 2 * time.Second, stall: 4 * time.Second,
		serverTL: []smtptest.Option{smtptest.WithSTARTTLS()},
		tls:      func(c *SMTPConfig, s *smtptest.Server) { c.UseTLS, c.TLSConfig = true, s.ClientTLSConfig() }}
	implicitMode = deadlineMode{name: "implicit TLS", attempt: 2 * time.Second, stall: 4 * time.Second,
		serverTL: []smtptest.Option{smtptest.WithImplicitTLS()},
		tls: func(c *SMTPConfig, s *smtptest.Server) {
			c.UseTLS, c.ImplicitTLS, c.TLSConfig = true, true, s.ClientTLSConfig()
		}}
)

// cutOff is the outcome of an attempt cut off at its deadline at stage:
// before the content was handed over nothing can have been taken; after
// the final "." the relay may have queued it.
func cutOff(stage smtptest.Stage) outcome {
	if stage == smtptest.BeforeReply {
		return unknown
	}
	return temporary
}

// allowed is the outcome in the large mode: the setup is bounded by
// Timeout alone; the transaction by Timeout plus the transfer allowance.
func allowed(stage smtptest.Stage) outcome {
	if stage == smtptest.BeforeGreeting || stage == smtptest.AtEHLO {
		return temporary
	}
	return sent
}

var allStages = []smtptest.Stage{smtptest.BeforeGreeting, smtptest.AtEHLO, smtptest.AtMail, smtptest.AtRcpt,
	smtptest.AtData, smtptest.InContent, smtptest.BeforeReply}

// deadlineRun is one row set up and sent.
type deadlineRun struct {
	name     string
	mode     deadlineMode
	stage    smtptest.Stage
	want     outcome
	s        *smtptest.Server
	p        *SMTP
	m        Message
	deadline time.Time
	err      error
	elapsed  time.Duration
}

// Not parallel: it times real deadlines, which other tests' load would stretch.
func TestSMTPAttemptNeverOutlivesItsDeadline(t *testing.T) {
	var runs []*deadlineRun
	for _, mode := range []deadlineMode{defaultMode, longMode, largeMode} {
		for _, stage := range allStages {
			want := cutOff(stage)
			if mode.large {
				want = allowed(stage)
			}
			runs = append(runs, &deadlineRun{mode: mode, stage: stage, want: want})
		}
	}
	for _, mode := range []deadlineMode{starttlsMode, implicitMode} {
		for _, stage := range []smtptest.Stage{smtptest.BeforeGreeting, smtptest.AtEHLO, smtptest.AtMail,
			smtptest.InContent, smtptest.BeforeReply} {
			runs = append(runs, &deadlineRun{mode: mode, stage: stage, want: cutOff(stage)})
		}
	}

	// A message of 512 KiB (700 KB as sent): for the large mode, whose
	// allowance is scaled to its size, and for the rows whose relay stops
	// reading the content, where it is more than twice what the socket
	// buffers hold (smallBuffers), so the writer blocks. Larger would be no
	// truer and much slower: under the race detector go-mail and go-smtp
	// take over a second per MiB, and the rows share two cores.
	big := bigMessage(t, 1, 512<<10)
	for i, r := range runs {
		r.name = r.mode.name + "/" + r.stage.String()
		r.s = smtptest.Start(t, r.mode.serverTL...)
		r.s.Stall(r.stage, r.mode.stall)
		r.p = newTestSMTP(t, r.s, func(c *SMTPConfig) {
			c.Timeout = r.mode.timeout
			if r.mode.tls != nil {
				r.mode.tls(c, r.s)
			}
		})
		if r.stage == smtptest.InContent && !r.mode.large {
			smallBuffers(r.p)
		}
		r.m = simpleMessage(i)
		if r.mode.large || r.stage == smtptest.InContent {
			r.m = big
			r.m.MessageID = simpleMessage(i).MessageID
		}
		if r.mode.large {
			// Scaled so that the transaction may take Timeout + 8 s.
			r.p.transferRate = max(r.m.Size()/8, 1)
		}
	}
	// The rows run at once: each mostly waits on its relay's stall, and
	// run one after the other they would take minutes.
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			start := time.Now()
			ctx, cancel := context.WithDeadline(context.Background(), start.Add(r.mode.attempt))
			defer cancel()
			r.deadline, _ = ctx.Deadline()
			_, r.err = r.p.Send(ctx, r.m)
			r.elapsed = time.Since(start)
		})
	}
	wg.Wait()
	for _, r := range runs {
		r.p.Close()
		r.s.WaitIdle(t) // whatever the relay does after its stall is done
	}

	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			t.Logf("after %s: %v", r.elapsed.Round(time.Millisecond), r.err)
			if got := outcomeOf(r.err); got != r.want {
				t.Errorf("got outcome %s (%v), want %s", got, r.err, r.want)
			}
			if r.elapsed > r.mode.attempt+deadlineSlack {
				t.Errorf("Send returned after %s, want by its deadline %s (+%s slack)",
					r.elapsed.Round(time.Millisecond), r.mode.attempt, deadlineSlack)
			}
			msgs := r.s.Messages()
			for _, m := range msgs {
				if m.Received.After(r.deadline) {
					t.Errorf("the relay received the message %s after the attempt's deadline",
						m.Received.Sub(r.deadline).Round(time.Millisecond))
				}
			}
			wantMsgs := 0
			if r.want == sent || r.want == unknown {
				wantMsgs = 1
			}
			if len(msgs) != wantMsgs {
				t.Errorf("the relay stored %d messages, want %d", len(msgs), wantMsgs)
			}
			checkNoRelayAddress(t, r.err, r.s)
		})
	}
}

// smallBuffers gives p's connections a send buffer of 64 KiB instead of
// the several MiB Linux grows it to, so that a relay that stops reading
// blocks a message of 512 KiB (the relay's side is kept small by smtptest),
// without the CPU cost of a bigger one under the race detector. Only for
// rows that are cut off mid-content: on loopback, a buffer this small
// slows a whole transfer to a crawl.
func smallBuffers(p *SMTP) {
	dial := p.dialTCP
	p.dialTCP = func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(ctx, network, address)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetWriteBuffer(64 << 10)
		}
		return c, err
	}
}

// checkNoRelayAddress fails when a user-facing error names the relay: its
// IP address, port or host name are for the operator's log.
func checkNoRelayAddress(t *testing.T, err error, s *smtptest.Server) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	for _, s := range []string{s.Host(), ":" + strconv.Itoa(s.Port()), strconv.Itoa(s.Port()), "localhost", "127.0.0.1", "tcp "} {
		if strings.Contains(msg, s) {
			t.Errorf("error %q names the relay (%q)", msg, s)
		}
	}
}
