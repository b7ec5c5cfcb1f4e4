package providers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"
)

// quitTimeout bounds the goodbye to a connection we no longer want.
const quitTimeout = 2 * time.Second

// conn is one open, greeted and authenticated SMTP session.
type conn struct {
	c        *smtp.Client
	lastUsed time.Time
}

// acquire waits for the right to hold a connection. At most MaxConns Sends
// hold one, and an idle connection is only ever taken by a holder, so no
// more than MaxConns connections are ever open.
func (p *SMTP) acquire(ctx context.Context) error {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.done:
		return ErrClosed
	}
	select {
	case <-p.done: // select picks at random when both were ready
		p.release()
		return ErrClosed
	default:
		return nil
	}
}

func (p *SMTP) release() { <-p.slots }

// send delivers msg on the most recently used idle connection, or a new
// one. It reports whether the message went out on a reused connection.
func (p *SMTP) send(ctx context.Context, msg *mail.Msg, timeout time.Duration) (reused bool, err error) {
	if c := p.take(); c != nil {
		err := p.deliver(c, msg, timeout)
		if !deadBeforeMail(err) {
			return true, err
		}
		// Nothing of the message reached the server, so it cannot be
		// delivered twice: try once more on a fresh connection.
		p.logger.DebugContext(ctx, "smtp pooled connection was dead, redialing",
			slog.String("smtp_addr", p.addr), slog.Any("error", err))
	}
	c, err := p.dial(ctx)
	if err != nil {
		return false, err
	}
	return false, p.deliver(c, msg, timeout)
}

// take pops the most recently used idle connection, closing any that have
// been idle longer than IdleTimeout: servers drop those on their side.
func (p *SMTP) take() *conn {
	now := p.now()
	var stale []*conn
	p.mu.Lock()
	p.idle = slices.DeleteFunc(p.idle, func(c *conn) bool {
		if now.Sub(c.lastUsed) >= p.idleTimeout {
			stale = append(stale, c)
			return true
		}
		return false
	})
	var c *conn
	if n := len(p.idle); n > 0 {
		c, p.idle = p.idle[n-1], p.idle[:n-1]
	}
	p.mu.Unlock()
	for _, s := range stale {
		p.quit(s)
	}
	return c
}

// put returns a healthy connection to the pool, or QUITs it after Close.
func (p *SMTP) put(c *conn) {
	c.lastUsed = p.now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.quit(c)
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// quit says goodbye politely; the connection is closed either way.
func (p *SMTP) quit(c *conn) {
	_ = c.c.UpdateDeadline(quitTimeout)
	if err := c.c.Quit(); err != nil {
		_ = c.c.Close()
	}
}

// deliver runs one mail transaction on c, bounded by timeout, and then
// pools or closes c: it is kept only after success or a clean rejection,
// when the session state is known.
func (p *SMTP) deliver(c *conn, msg *mail.Msg, timeout time.Duration) error {
	// A pooled connection's deadline has passed while it sat idle.
	_ = c.c.UpdateDeadline(timeout)
	err := p.client.SendWithSMTPClient(c.c, msg)
	if err == nil {
		p.put(c)
		return nil
	}
	var se *mail.SendError
	switch {
	case errors.As(err, &se) && se.Reason == mail.ErrSMTPReset:
		// Only the RSET after the accepted message failed: the message was
		// delivered, the connection is not trusted any more.
		_ = c.c.Close()
		return nil
	case errors.As(err, &se) && isCleanRejection(se) && c.c.Reset() == nil:
		p.put(c)
	default:
		_ = c.c.Close()
	}
	return deliveryError(err)
}

// dial opens, secures and authenticates a new connection.
func (p *SMTP) dial(ctx context.Context) (*conn, error) {
	// go-mail does not close the connection when the greeting or EHLO
	// fails; dialContext leaves it here so that dial can.
	var raw net.Conn
	c, err := p.client.DialToSMTPClientWithContext(context.WithValue(ctx, rawConnKey{}, &raw))
	if err != nil {
		if raw != nil {
			_ = raw.Close()
		}
		return nil, connectError(err)
	}
	if p.startTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			_ = c.Close()
			return nil, &SendError{cause: CauseTLS, msg: "smtp: the SMTP server does not offer STARTTLS and SMTP_USE_TLS requires it; refusing to send in plain text"}
		}
		if err := c.StartTLS(p.tlsConfig); err != nil {
			_ = c.Close()
			return nil, setupError("STARTTLS failed", CauseTLS, err)
		}
	}
	if p.username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			_ = c.Close()
			return nil, &SendError{cause: CauseAuth, msg: "smtp: authentication failed: the SMTP server does not offer AUTH"}
		}
		auth := &plainOrLogin{user: p.username, pass: p.password, host: p.host,
			allowUnencrypted: !p.startTLS && !p.implicitTLS}
		if err := c.Auth(auth); err != nil {
			_ = c.Close()
			return nil, setupError("authentication failed", CauseAuth, err)
		}
	}
	return &conn{c: c}, nil
}

type rawConnKey struct{}

// dialContext is go-mail's DialContextFunc. It does implicit TLS itself so
// that the raw connection can be handed back to dial in every mode, and
// dials p.addr because go-mail's "host:port" breaks IPv6 literals.
func (p *SMTP) dialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, p.addr)
	if err != nil {
		return nil, err
	}
	if p.implicitTLS {
		tc := tls.Client(nc, p.tlsConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tc
	}
	if slot, ok := ctx.Value(rawConnKey{}).(*net.Conn); ok {
		*slot = nc
	}
	return nc, nil
}

// plainOrLogin uses AUTH PLAIN when the server offers it and LOGIN
// otherwise: both carry the password as is, and between them they cover
// the submission servers in use (some offer only LOGIN).
type plainOrLogin struct {
	user, pass, host string
	allowUnencrypted bool
	smtp.Auth
}

// Start implements smtp.Auth.
func (a *plainOrLogin) Start(server *smtp.ServerInfo) (string, []byte, error) {
	if slices.Contains(server.Auth, "PLAIN") || !slices.Contains(server.Auth, "LOGIN") {
		a.Auth = smtp.PlainAuth("", a.user, a.pass, a.host, a.allowUnencrypted)
	} else {
		a.Auth = smtp.LoginAuth(a.user, a.pass, a.host, a.allowUnencrypted)
	}
	return a.Auth.Start(server)
}
