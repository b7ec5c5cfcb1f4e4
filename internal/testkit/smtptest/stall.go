package smtptest

import (
	"net"
	"time"
)

// Stage is a point in an SMTP session at which the server can be told to
// stall or to abort the connection, so that a client's deadlines can be
// tested at each step of the protocol.
type Stage int

// The stages of a session, in the order a client meets them.
const (
	// BeforeGreeting is before the server's first byte: the 220 greeting,
	// or the TLS handshake on an implicit-TLS server.
	BeforeGreeting Stage = iota + 1
	// AtEHLO is before the reply to an EHLO that opens a session: the
	// first one, and the one after STARTTLS.
	AtEHLO
	// AtMail is before the reply to MAIL FROM.
	AtMail
	// AtRcpt is before the reply to each RCPT TO.
	AtRcpt
	// AtData is after the reply to RCPT TO, before the server reads the
	// next command: for a message with one recipient, the DATA command,
	// so the client waits for its 354. (go-smtp writes 354 before a
	// backend hears of DATA, so the wait is taken before reading it.)
	AtData
	// InContent is after 354, before the server reads the message: the
	// client's writes fill the socket buffers and block. The server's
	// receive buffer is kept small on connections accepted while this
	// stage is set, so that a message of a few MiB cannot fit in them.
	InContent
	// BeforeReply is after the final ".", the message stored, before the
	// server answers it: the client cannot know whether it was taken.
	BeforeReply
)

// String names the stage, for test names.
func (st Stage) String() string {
	switch st {
	case BeforeGreeting:
		return "before greeting"
	case AtEHLO:
		return "EHLO"
	case AtMail:
		return "MAIL"
	case AtRcpt:
		return "RCPT"
	case AtData:
		return "DATA"
	case InContent:
		return "content"
	case BeforeReply:
		return "final reply"
	}
	return "unknown stage"
}

// contentReadBuffer is the receive buffer of connections accepted while
// InContent is set: small, so a blocked client has only its own send
// buffer (at most 4 MiB on Linux by default) to fill.
const contentReadBuffer = 64 << 10

// stageAction is what the server does at a stage.
type stageAction struct {
	delay time.Duration
	reset bool
	hold  *Hold
}

// Stall makes every following session wait d at stage before going on, as
// a slow or overloaded server does; 0 removes the stall. The wait ends
// early when the server stops.
func (s *Server) Stall(stage Stage, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stages[stage] = stageAction{delay: d}
}

// ResetAt makes every following session abort its connection at stage with
// a TCP reset (RST), as a crashing server or a middlebox does. At
// BeforeReply the message is stored first.
func (s *Server) ResetAt(stage Stage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stages[stage] = stageAction{reset: true}
}

// DelayDataReply is Stall(BeforeReply, d): the message is stored, as a
// server queues it, and only then is the final "." answered.
func (s *Server) DelayDataReply(d time.Duration) { s.Stall(BeforeReply, d) }

// DelayDataReplyTo is DelayDataReply for the messages to rcpt only; 0
// removes it. A test that cuts a client off while one message is
// unanswered uses it so that the other sends of the moment are answered
// as usual and cannot be caught in the same cut.
func (s *Server) DelayDataReplyTo(rcpt string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d <= 0 {
		delete(s.replyTo, rcpt)
		return
	}
	s.replyTo[rcpt] = d
}

// replyDelay is the longest DelayDataReplyTo set for any of to.
func (s *Server) replyDelay(to []string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, rcpt := range to {
		d = max(d, s.replyTo[rcpt])
	}
	return d
}

// waitReply carries out replyDelay's wait on connection c.
func (s *Server) waitReply(to []string, c *trackedConn) {
	if d := s.replyDelay(to); d > 0 {
		s.pause(d, c)
	}
}

// stallsAt reports whether anything is set for stage.
func (s *Server) stallsAt(stage Stage) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.stages[stage]
	return a.delay > 0 || a.reset || a.hold != nil
}

// at carries out what is set for stage on connection c (nil when the
// connection cannot be found, when only a delay applies).
func (s *Server) at(stage Stage, c *trackedConn) {
	s.mu.Lock()
	a := s.stages[stage]
	s.mu.Unlock()
	switch {
	case a.hold != nil:
		a.hold.arrive()
		select {
		case <-a.hold.release:
		case <-s.quit:
		}
		s.renewReadDeadline(c)
	case a.reset && c != nil:
		c.reset()
	case a.delay > 0:
		s.pause(a.delay, c)
	}
}

// pause waits d on connection c, or until the server stops, and then
// gives c its read timeout again.
func (s *Server) pause(d time.Duration, c *trackedConn) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.quit:
	}
	s.renewReadDeadline(c)
}

// renewReadDeadline gives c its whole read timeout again after a stall:
// go-smtp sets the deadline once before DATA, and a hold the test keeps
// longer than that (a busy machine, a slow step beside it) must not turn
// into the server's own read error, 554, which no test asked for.
func (s *Server) renewReadDeadline(c *trackedConn) {
	if c != nil {
		_ = c.SetReadDeadline(time.Now().Add(s.srv.ReadTimeout))
	}
}

// accepted prepares a new connection for the stages set now.
func (s *Server) accepted(c *trackedConn) {
	if s.stallsAt(InContent) {
		if tc, ok := c.Conn.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(contentReadBuffer)
		}
	}
	if s.stallsAt(BeforeGreeting) {
		c.beforeWrite = func() { s.at(BeforeGreeting, c) }
	}
}
