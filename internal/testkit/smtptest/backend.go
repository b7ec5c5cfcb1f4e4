package smtptest

import (
	"io"
	"slices"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// backend hands each SMTP connection a session that reports to the Server.
type backend struct{ s *Server }

// NewSession implements smtp.Backend.
// go-smtp starts a new session after STARTTLS, so the TLS state read here
// holds for every message of the session.
func (b *backend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	_, isTLS := c.TLSConnectionState()
	ss := &session{s: b.s, conn: trackedOf(c.Conn()), tls: isTLS}
	// go-smtp asks for a session on the EHLO that opens one, before
	// answering it.
	b.s.at(AtEHLO, ss.conn)
	return ss, nil
}

// session is the state of one connection's current transaction. go-smtp
// calls its methods from the connection's goroutine only.
type session struct {
	s      *Server
	conn   *trackedConn // nil only if go-smtp wraps connections in a way not foreseen
	tls    bool
	authed bool
	from   string
	to     []string
}

// AuthMechanisms implements smtp.AuthSession; AUTH is advertised only when
// the server was started WithAuth.
func (ss *session) AuthMechanisms() []string {
	if ss.s.cfg.username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

// Auth implements smtp.AuthSession.
func (ss *session) Auth(mech string) (sasl.Server, error) {
	if ss.s.cfg.username == "" || mech != sasl.Plain {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != ss.s.cfg.username || password != ss.s.cfg.password {
			return smtp.ErrAuthFailed
		}
		ss.authed = true
		return nil
	}), nil
}

// Mail implements smtp.Session.
func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.s.at(AtMail, ss.conn)
	if ss.s.cfg.username != "" && !ss.authed {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

// Rcpt implements smtp.Session.
func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.s.at(AtRcpt, ss.conn)
	if ss.conn != nil && ss.s.stallsAt(AtData) {
		// The reply to this RCPT is written before the next read: what
		// waits is the reading of DATA.
		ss.conn.beforeRead = func() { ss.s.at(AtData, ss.conn) }
	}
	if ss.s.recipientRejected(to) {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	}
	ss.to = append(ss.to, to)
	return nil
}

// Data implements smtp.Session. The whole message is read before a
// rejection is returned, as a real server answers after the final ".".
func (ss *session) Data(r io.Reader) error {
	ss.s.at(InContent, ss.conn)
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	received := time.Now()
	if err := ss.s.dataVerdict(); err != nil {
		return err
	}
	m := parse(raw)
	m.From, m.To, m.TLS, m.Received = ss.from, slices.Clone(ss.to), ss.tls, received
	ss.s.store(m)
	ss.s.at(BeforeReply, ss.conn)
	ss.s.waitReply(m.To, ss.conn)
	return nil
}

// Reset implements smtp.Session.
func (ss *session) Reset() {
	ss.from, ss.to = "", nil
}

// Logout implements smtp.Session.
func (ss *session) Logout() error { return nil }
