package providers

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"
)

// quitTimeout bounds the goodbye to a connection we no longer want.
const quitTimeout = 2 * time.Second

// conn is one open, greeted and authenticated SMTP session.
type conn struct {
	c *smtp.Client
	// guard is the raw connection under c, which bounds each use of it by
	// the attempt's end; nil only in the unguarded benchmark baseline.
	guard    *guardConn
	lastUsed time.Time
}

// failure is the network error that broke the connection, or nil.
func (c *conn) failure() error {
	if c.guard == nil {
		return nil
	}
	return c.guard.firstFailure()
}

// acquire waits for the right to hold a connection. At most MaxConns Sends
// hold one, and an idle connection is only ever taken by a holder, so no
// more than MaxConns connections are ever open. A Send that must wait tells
// ctx's HandoverTrace (claim).
func (p *SMTP) acquire(ctx context.Context) error {
	err := claim(ctx, "smtp", p.slots, func() error {
		select {
		case p.slots <- struct{}{}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return ErrClosed
		}
	})
	if err != nil {
		return err
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
func (p *SMTP) send(ctx context.Context, msg *mail.Msg, size int) (reused bool, err error) {
	if c := p.take(ctx); c != nil {
		err := p.deliver(ctx, c, msg, size)
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
	return false, p.deliver(ctx, c, msg, size)
}

// take pops the most recently used idle connection, closing any that have
// been idle longer than IdleTimeout: servers drop those on their side. Their
// goodbye is bounded by ctx's deadline, which is the attempt's.
func (p *SMTP) take(ctx context.Context) *conn {
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
	end, _ := ctx.Deadline()
	for _, s := range stale {
		p.quit(s, end)
	}
	return c
}

// put returns a healthy connection to the pool, or QUITs it after Close.
func (p *SMTP) put(c *conn) {
	c.lastUsed = p.now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.quit(c, time.Time{})
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// quit says goodbye politely, within quitTimeout and by end if it is not
// zero; the connection is closed either way.
func (p *SMTP) quit(c *conn, end time.Time) {
	if d := time.Now().Add(quitTimeout); end.IsZero() || d.Before(end) {
		end = d
	}
	if c.guard != nil {
		// A goodbye sends nothing of a message: its own deadline is
		// enough, no context closes it.
		c.guard.beginSetup(context.Background(), end)
		defer c.guard.finish()
	}
	_ = c.c.UpdateDeadline(time.Until(end))
	if err := c.c.Quit(); err != nil {
		_ = c.c.Close()
	}
}

// transactionEnd is when one mail transaction must be over: Timeout plus
// the time a message of size bytes may take to transmit, so that a large
// message is not cut off (and left with an unknown fate) by a deadline fit
// for a short one; and never past ctx's deadline, the end of the attempt
// that the send pipeline's lease is built on.
func (p *SMTP) transactionEnd(ctx context.Context, size int) time.Time {
	end := time.Now().Add(p.timeout + time.Duration(size)*time.Second/time.Duration(p.transferRate))
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	return end
}

// deliver runs one mail transaction on c, by transactionEnd, and then
// pools or closes c: it is kept only after success or a clean rejection,
// when the session state is known, and while the attempt's end has not
// closed it.
func (p *SMTP) deliver(ctx context.Context, c *conn, msg *mail.Msg, size int) error {
	end := p.transactionEnd(ctx, size)
	if c.guard != nil {
		_ = c.guard.beginTransaction(ctx, end)
	} else {
		// A pooled connection's deadline has passed while it sat idle.
		_ = c.c.UpdateDeadline(time.Until(end))
	}
	err := p.client.SendWithSMTPClient(c.c, msg)
	keep := err == nil
	var se *mail.SendError
	switch {
	case errors.As(err, &se) && se.Reason == mail.ErrSMTPReset:
		// Only the RSET after the accepted message failed: the message was
		// delivered, the connection is not trusted any more.
		err = nil
	case errors.As(err, &se) && isCleanRejection(se):
		keep = c.c.Reset() == nil
	}
	if c.guard != nil && !c.guard.finish() {
		keep = false // the attempt's end closed it
	}
	if keep {
		p.put(c)
	} else {
		_ = c.c.Close()
	}
	if err != nil {
		return deliveryError(err, c.failure())
	}
	return nil
}
