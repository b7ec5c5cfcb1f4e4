package providers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"github.com/wneessen/go-mail/smtp"
)

// Opening a connection: dial, greeting, STARTTLS and AUTH, all by the
// attempt's end, with the guard on the TCP connection from its first byte.

// dialState carries, through go-mail's dial, the attempt's context to
// dialContext and the connection it opened back to dial.
type dialState struct {
	ctx   context.Context // the attempt's: go-mail's own adds SMTP_TIMEOUT
	end   time.Time       // ctx's deadline; zero for none
	raw   net.Conn        // the TCP connection, for dial to close on failure
	guard *guardConn
}

type dialStateKey struct{}

// dial opens, secures and authenticates a new connection, all of it by
// ctx's deadline.
func (p *SMTP) dial(ctx context.Context) (*conn, error) {
	st := &dialState{ctx: ctx}
	st.end, _ = ctx.Deadline()
	c, err := p.client.DialToSMTPClientWithContext(context.WithValue(ctx, dialStateKey{}, st))
	var failure error
	if st.guard != nil {
		failure = st.guard.firstFailure()
		if !st.guard.finish() && err == nil {
			err = os.ErrDeadlineExceeded // the attempt's end came as the greeting was done
		}
	}
	if err != nil {
		// go-mail does not close the connection when the greeting or
		// EHLO fails.
		if st.raw != nil {
			_ = st.raw.Close()
		}
		return nil, connectError(errors.Join(err, failure))
	}
	cn := &conn{c: c, guard: st.guard}
	if err := p.secure(ctx, cn); err != nil {
		_ = c.Close()
		return nil, err
	}
	return cn, nil
}

// secure runs STARTTLS and AUTH on a greeted connection, by ctx's deadline.
func (p *SMTP) secure(ctx context.Context, cn *conn) error {
	if cn.guard != nil {
		end, _ := ctx.Deadline()
		cn.guard.beginSetup(ctx, end)
	}
	err := p.startTLSAndAuth(cn.c)
	if cn.guard != nil && !cn.guard.finish() && err == nil {
		err = connectError(os.ErrDeadlineExceeded)
	}
	return err
}

func (p *SMTP) startTLSAndAuth(c *smtp.Client) error {
	if p.startTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return &SendError{cause: CauseTLS, msg: "smtp: the SMTP server does not offer STARTTLS and SMTP_USE_TLS requires it; refusing to send in plain text"}
		}
		if err := c.StartTLS(p.tlsConfig); err != nil {
			return setupError("STARTTLS failed", CauseTLS, err)
		}
	}
	if p.username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return &SendError{cause: CauseCredentials, msg: "smtp: authentication failed: the SMTP server does not offer AUTH"}
		}
		auth := &plainOrLogin{user: p.username, pass: p.password, host: p.host,
			allowUnencrypted: !p.startTLS && !p.implicitTLS}
		if err := c.Auth(auth); err != nil {
			return setupError("authentication failed", CauseCredentials, err)
		}
	}
	return nil
}

// dialContext is go-mail's DialContextFunc. It puts the guard directly on
// the TCP connection, under any TLS, with the attempt's end for the whole
// setup; does implicit TLS itself so that the connection can be handed
// back to dial in every mode; and dials p.addr because go-mail's
// "host:port" breaks IPv6 literals.
func (p *SMTP) dialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	st, _ := ctx.Value(dialStateKey{}).(*dialState)
	nc, err := p.dialTCP(ctx, network, p.addr)
	if err != nil {
		return nil, err
	}
	if st != nil {
		st.raw = nc
		if !p.unguarded {
			st.guard = newGuardConn(nc)
			st.guard.beginSetup(st.ctx, st.end)
			nc = st.guard
		}
	}
	if p.implicitTLS {
		tc := tls.Client(nc, p.tlsConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tc
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
