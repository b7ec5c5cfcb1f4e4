// Package smtptest runs a real SMTP server inside a test process, so code
// that talks SMTP is tested against the protocol rather than a mock. The
// server is built on github.com/emersion/go-smtp, listens on 127.0.0.1:0,
// keeps every accepted message in memory and parses it for assertions.
package smtptest

import (
	"cmp"
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// waitLimit bounds WaitForCount; generous because the machine is shared.
const waitLimit = 10 * time.Second

// Option configures a Server started by Start.
type Option func(*config)

type config struct {
	startTLS    bool
	implicitTLS bool
	username    string
	password    string
	readTimeout time.Duration
}

// defaultTimeout is the server's read and write timeout.
const defaultTimeout = 5 * time.Minute

// WithReadTimeout sets how long the server waits for a client's next
// bytes (default 5 min). smtptest's own tests shorten it.
func WithReadTimeout(d time.Duration) Option { return func(c *config) { c.readTimeout = d } }

// WithSTARTTLS advertises STARTTLS with a self-signed certificate generated
// for this server; ClientTLSConfig trusts it.
func WithSTARTTLS() Option { return func(c *config) { c.startTLS = true } }

// WithImplicitTLS makes the listener itself speak TLS, as on port 465.
func WithImplicitTLS() Option { return func(c *config) { c.implicitTLS = true } }

// WithAuth requires AUTH PLAIN with these credentials before MAIL FROM;
// wrong credentials are answered with 535.
func WithAuth(username, password string) Option {
	return func(c *config) { c.username, c.password = username, password }
}

// Server is a running SMTP server. All methods are safe for concurrent use.
type Server struct {
	srv       *smtp.Server
	ln        *trackingListener
	cfg       config
	clientTLS *tls.Config
	serveDone chan struct{}

	mu       sync.Mutex
	messages []Message
	rejectDt *smtp.SMTPError
	rejectN  []*smtp.SMTPError // answers for the next messages, before rejectDt
	stages   map[Stage]stageAction
	quit     chan struct{} // closed by stop: ends stalls
	rejectTo map[string]bool
	replyTo  map[string]time.Duration // DelayDataReplyTo
	changed  chan struct{}            // closed and replaced whenever a message arrives
}

// Start starts a server and registers t.Cleanup to stop it: Cleanup closes
// every connection and waits until all connection goroutines have exited.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}

	s := &Server{
		cfg:       cfg,
		serveDone: make(chan struct{}),
		rejectTo:  make(map[string]bool),
		replyTo:   make(map[string]time.Duration),
		stages:    make(map[Stage]stageAction),
		changed:   make(chan struct{}),
		quit:      make(chan struct{}),
	}

	srv := smtp.NewServer(&backend{s: s})
	srv.Domain = "smtptest.localhost"
	srv.MaxRecipients = 1000
	srv.MaxMessageBytes = 64 << 20
	// A bound on a hang, not a measure of speed: the read deadline is set
	// once, before DATA, and covers the whole message, which go-smtp reads
	// byte by byte. At 30 s a 2 MB message from a client starved by a
	// loaded make test (race detector, load 10) was cut off mid-DATA, and
	// a held send that had nothing wrong with it failed.
	srv.ReadTimeout = cmp.Or(cfg.readTimeout, defaultTimeout)
	srv.WriteTimeout = defaultTimeout
	// Without TLS go-smtp refuses AUTH; tests of plain-mode AUTH need it.
	srv.AllowInsecureAuth = true
	srv.ErrorLog = tbLogger{t}
	s.srv = srv

	var serverTLS *tls.Config
	if cfg.startTLS || cfg.implicitTLS {
		cert, pool, err := selfSigned()
		if err != nil {
			t.Fatalf("smtptest: generate certificate: %v", err)
		}
		serverTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		s.clientTLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	}
	if cfg.startTLS {
		srv.TLSConfig = serverTLS
	}

	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("smtptest: listen: %v", err)
	}
	s.ln = newTrackingListener(raw, s)
	var ln net.Listener = s.ln
	if cfg.implicitTLS {
		// Wrapping outside the tracking listener keeps the raw TCP
		// connections in reach of DropIdleConnections.
		ln = tls.NewListener(s.ln, serverTLS)
	}

	go func() {
		defer close(s.serveDone)
		_ = srv.Serve(ln) // returns once the listener is closed in stop
	}()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop closes the listener first, so that Serve returns and no connection
// can be accepted while go-smtp's Shutdown waits for the open ones.
func (s *Server) stop(t testing.TB) {
	close(s.quit)
	s.ln.Close()
	<-s.serveDone
	s.ln.closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && ctx.Err() != nil {
		t.Errorf("smtptest: connections still open after %s", waitLimit)
	}
}

// Addr returns the listening address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Host returns the listening IP address, "127.0.0.1".
func (s *Server) Host() string { return s.ln.Addr().(*net.TCPAddr).IP.String() }

// Port returns the listening TCP port.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// ClientTLSConfig returns a client configuration that trusts this server's
// certificate, or nil when the server was started without TLS. Each call
// returns a new value the caller may modify.
func (s *Server) ClientTLSConfig() *tls.Config {
	if s.clientTLS == nil {
		return nil
	}
	return s.clientTLS.Clone()
}

// Messages returns copies of the accepted messages in arrival order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.messages))
	for i, m := range s.messages {
		out[i] = m.clone()
	}
	return out
}

// Count returns the number of accepted messages.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.messages)
}

// Connections returns the number of connections accepted so far, which
// lets a test prove that a client reuses its connections.
func (s *Server) Connections() int { return s.ln.accepted() }

// RejectData makes the server answer every following message, after its
// final ".", with this error, e.g. RejectData(554, [3]int{5, 7, 1},
// "rejected by policy"). Rejected messages are not stored.
func (s *Server) RejectData(code int, enhanced [3]int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectDt = &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode(enhanced), Message: message}
}

// AcceptData undoes RejectData and RejectDataTimes.
func (s *Server) AcceptData() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectDt, s.rejectN = nil, nil
}

// RejectDataTimes answers the next n messages with this error, as a server
// with a transient problem does (451 4.3.0), and then goes back to the
// verdict set by RejectData or AcceptData.
func (s *Server) RejectDataTimes(n, code int, enhanced [3]int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.rejectN = append(s.rejectN, &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode(enhanced), Message: message})
	}
}

// RejectRecipient makes the server answer RCPT TO for addr with
// 550 5.1.1 from now on.
func (s *Server) RejectRecipient(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectTo[addr] = true
}

// DropIdleConnections closes every connection currently open without a
// word, as a server does when its idle timeout strikes or it restarts.
func (s *Server) DropIdleConnections() { s.ln.closeAll() }

// WaitIdle waits until every connection has ended, closed by either side,
// so that whatever the server does after a stall has been done: a test
// that cut a client off mid-session can then check that no message
// arrived late. It fails the test after 10 seconds.
func (s *Server) WaitIdle(t testing.TB) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		n, changed := s.ln.idle()
		if n == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("smtptest: %d connections still open after %s", n, waitLimit)
		}
	}
}

// WaitForCount waits until at least n messages have been accepted and fails
// the test if that does not happen within 10 seconds.
func (s *Server) WaitForCount(t testing.TB, n int) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got, changed := len(s.messages), s.changed
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("smtptest: got %d messages after %s, want %d", got, waitLimit, n)
		}
	}
}

// store records an accepted message and wakes WaitForCount.
func (s *Server) store(m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages = append(s.messages, m)
	close(s.changed)
	s.changed = make(chan struct{})
}

// dataVerdict returns the configured DATA rejection, or nil.
func (s *Server) dataVerdict() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rejectN) > 0 {
		e := s.rejectN[0]
		s.rejectN = s.rejectN[1:]
		return e
	}
	if s.rejectDt == nil {
		return nil
	}
	e := *s.rejectDt
	return &e
}

func (s *Server) recipientRejected(addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejectTo[addr]
}

// tbLogger sends go-smtp's internal errors to the test log. It is safe
// because stop waits for every connection goroutine before the test ends.
type tbLogger struct{ t testing.TB }

func (l tbLogger) Printf(format string, v ...any) { l.t.Logf("smtptest: "+format, v...) }
func (l tbLogger) Println(v ...any)               { l.t.Log(append([]any{"smtptest:"}, v...)...) }
