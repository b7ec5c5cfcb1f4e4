package smtptest

import (
	"io"
	"slices"

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
	return &session{s: b.s, tls: isTLS}, nil
}

// session is the state of one connection's current transaction. go-smtp
// calls its methods from the connection's goroutine only.
type session struct {
	s      *Server
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
	if ss.s.cfg.username != "" && !ss.authed {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

// Rcpt implements smtp.Session.
func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if ss.s.recipientRejected(to) {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	}
	ss.to = append(ss.to, to)
	return nil
}

// Data implements smtp.Session. The whole message is read before a
// rejection is returned, as a real server answers after the final ".".
func (ss *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := ss.s.dataVerdict(); err != nil {
		return err
	}
	m := parse(raw)
	m.From, m.To, m.TLS = ss.from, slices.Clone(ss.to), ss.tls
	ss.s.store(m)
	ss.s.delayReply()
	return nil
}

// Reset implements smtp.Session.
func (ss *session) Reset() {
	ss.from, ss.to = "", nil
}

// Logout implements smtp.Session.
func (ss *session) Logout() error { return nil }
