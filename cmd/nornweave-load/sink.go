package main

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/mail"
	"slices"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// A sink is an SMTP server that accepts every message and keeps only its
// arrival time: the outside view of when the server really sent. With a
// hang it holds each message that long after its DATA before answering:
// a relay that hangs. It is safe for concurrent use; Close may be called
// more than once, and releases the messages held.
type sink struct {
	srv  *smtp.Server
	ln   net.Listener
	now  func() time.Time
	hang time.Duration
	quit chan struct{} // closed by Close: stop holding
	done chan struct{}

	mu       sync.Mutex
	arrivals []time.Time
	ids      map[string]int // Message-ID → arrivals
	closed   bool
}

// startSink serves SMTP on ln until Close. now stamps each arrival; hang
// is how long each DATA is held before it is answered (0: not at all).
func startSink(ln net.Listener, now func() time.Time, hang time.Duration, errLog io.Writer) *sink {
	s := &sink{ln: ln, now: now, hang: hang, quit: make(chan struct{}), done: make(chan struct{}), ids: map[string]int{}}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return sinkSession{s}, nil
	}))
	srv.Domain = "sink.nornweave-load.localhost"
	srv.MaxMessageBytes = 64 << 20
	srv.MaxRecipients = 1000
	srv.ReadTimeout = 5 * time.Minute // the server's pool keeps idle connections
	srv.WriteTimeout = 30 * time.Second
	srv.ErrorLog = log.New(errLog, "sink: ", 0)
	s.srv = srv
	go func() {
		defer close(s.done)
		_ = srv.Serve(ln) // returns once Close closes the listener
	}()
	return s
}

// listenSink opens the sink's listener: "auto" is a free loopback port.
func listenSink(addr string) (net.Listener, error) {
	if addr == "auto" {
		addr = "127.0.0.1:0"
	}
	return net.Listen("tcp", addr)
}

// Addr is the address the sink listens on.
func (s *sink) Addr() *net.TCPAddr { return s.ln.Addr().(*net.TCPAddr) }

// Count is the number of messages received so far.
func (s *sink) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.arrivals)
}

// Arrivals returns a copy of the arrival times, sorted.
func (s *sink) Arrivals() []time.Time {
	s.mu.Lock()
	out := slices.Clone(s.arrivals)
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// Settle waits until the count stops changing or reaches want, at most
// limit: a message whose 201 the client saw has already arrived, but a
// send still in flight when the run ended may arrive a little later.
func (s *sink) Settle(ctx context.Context, want int, limit time.Duration) {
	const poll = 100 * time.Millisecond
	tick := time.NewTicker(poll)
	defer tick.Stop()
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	last, stable := s.Count(), 0
	for last < want || stable < 3 {
		select {
		case <-ctx.Done():
			return
		case <-timeout.C:
			return
		case <-tick.C:
		}
		if n := s.Count(); n != last {
			last, stable = n, 0
		} else {
			stable++
		}
	}
}

// Close stops accepting and drops every connection; it does not wait for
// the server under test to QUIT.
func (s *sink) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.quit)
	// Closing ln as well covers a Close that comes before Serve has
	// registered the listener with the server.
	_ = s.ln.Close()
	_ = s.srv.Close()
	<-s.done
}

// sinkSession accepts everything; go-smtp calls it from one goroutine per
// connection.
type sinkSession struct{ s *sink }

// Mail implements smtp.Session.
func (sinkSession) Mail(string, *smtp.MailOptions) error { return nil }

// Rcpt implements smtp.Session.
func (sinkSession) Rcpt(string, *smtp.RcptOptions) error { return nil }

// Data implements smtp.Session. The arrival is the end of DATA, the moment
// a real server would take responsibility for the message.
func (ss sinkSession) Data(r io.Reader) error {
	var id string
	if m, err := mail.ReadMessage(r); err == nil {
		id = m.Header.Get("Message-Id")
		r = m.Body
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	if ss.s.hang > 0 {
		t := time.NewTimer(ss.s.hang)
		select {
		case <-t.C:
		case <-ss.s.quit:
			t.Stop()
			return errors.New("sink closed while holding the message")
		}
	}
	t := ss.s.now()
	ss.s.mu.Lock()
	ss.s.arrivals = append(ss.s.arrivals, t)
	if id != "" {
		ss.s.ids[id]++
	}
	ss.s.mu.Unlock()
	return nil
}

// Duplicates is the number of arrivals of a Message-ID that had arrived
// before: a message the server sent twice.
func (s *sink) Duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.ids {
		n += c - 1
	}
	return n
}

// Reset implements smtp.Session.
func (sinkSession) Reset() {}

// Logout implements smtp.Session.
func (sinkSession) Logout() error { return nil }
