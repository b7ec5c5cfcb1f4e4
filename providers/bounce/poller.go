package bounce

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// DefaultMaxPerPass bounds the messages one pass reads.
const DefaultMaxPerPass = 200

// PollerOptions configure a Poller. IMAP, VERP and Handle are required.
type PollerOptions struct {
	IMAP IMAPConfig
	// TLSConfig is used for imaps:// and STARTTLS; nil is the system's
	// roots. Its ServerName defaults to IMAP.Host. Tests give their own.
	TLSConfig *tls.Config
	// DialTimeout bounds connecting; 0 is 30 seconds.
	DialTimeout time.Duration
	// VERP checks the tokens of the notifications read.
	VERP *VERP
	// Handle records the events of one message (all of them, or none: it
	// returns an error). It runs in the pass, with the connection open,
	// one message at a time. Only after it returns nil is the message moved
	// to the processed mailbox; otherwise it stays and is read again on
	// the next pass, so Handle must treat an event ID it has seen before
	// as done (the store's RecordEvents does).
	Handle func(ctx context.Context, bounces []Bounce) error
	// Logger receives a line per pass that fails and per message left
	// alone; nil discards them. Message bodies are never logged.
	Logger *slog.Logger
	// Now is the clock for events without a plausible date; nil is
	// time.Now.
	Now func() time.Time
	// MaxPerPass bounds the messages read in one pass (the oldest
	// first); 0 is DefaultMaxPerPass. The rest wait for the next pass.
	MaxPerPass int
}

// Stats says what one pass did.
type Stats struct {
	// Messages is how many messages the mailbox held (not \Deleted).
	Messages int
	// Read is how many were fetched and parsed in this pass; messages
	// left alone by an earlier pass are not read again.
	Read int
	// Handled were attributed, given to Handle, and moved.
	Handled int
	// Events is the number of events of the handled messages.
	Events int
	// Ignored are left alone for good: not a DSN, not ours, forged, or
	// larger than MaxDSNSize.
	Ignored int
	// Failed were attributed but Handle or the move failed; they are read
	// again on the next pass.
	Failed int
}

// Poller reads the bounce mailbox over IMAP: each pass logs in, reads the
// messages it has not ruled out before, hands the events of each
// attributed DSN to Handle and moves it to the processed mailbox. A
// message it cannot attribute is never moved, deleted or marked \Seen (it
// is read with BODY.PEEK): the mailbox may be shared with people, and what
// is not a bounce is theirs. It is remembered, by UID, so that later passes
// do not download it again.
//
// Poll and Run are safe for concurrent use; passes run one at a time.
type Poller struct {
	o   PollerOptions
	log *slog.Logger

	mu          sync.Mutex // one pass at a time; guards the fields below
	uidValidity uint32
	ignored     map[imap.UID]bool
}

// NewPoller returns a Poller; it connects to nothing until Poll.
func NewPoller(o PollerOptions) *Poller {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxPerPass <= 0 {
		o.MaxPerPass = DefaultMaxPerPass
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 30 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Poller{o: o, log: log.With(slog.String("component", "bounce_poller")), ignored: map[imap.UID]bool{}}
}

// Run polls now and then every interval (which must be positive) until
// ctx is done, logging a failed pass at WARN and a pass that handled
// bounces at INFO. It returns when ctx is done, after the pass in
// progress, which ctx also interrupts: the caller that starts Run in a
// goroutine stops it by cancelling ctx and waiting for it to return.
func (p *Poller) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		st, err := p.Poll(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			p.log.WarnContext(ctx, "bounce poll failed", slog.Any("error", err),
				slog.Int("handled", st.Handled), slog.Int("failed", st.Failed))
		case err == nil && st.Handled > 0:
			p.log.InfoContext(ctx, "bounces handled", slog.Int("messages", st.Handled), slog.Int("events", st.Events),
				slog.Int("ignored", st.Ignored))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll makes one pass over the mailbox. It returns the pass's Stats and
// an error if the pass could not run (connection, login, mailbox) or if
// some attributed message could not be handled or moved; the messages
// handled before that stay handled.
func (p *Poller) Poll(ctx context.Context) (Stats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.o.VERP == nil || p.o.Handle == nil {
		return Stats{}, errors.New("bounce: poller needs a VERP and a Handle")
	}
	c, err := p.dial(ctx)
	if err != nil {
		return Stats{}, err
	}
	// The client has no context: closing it unblocks whatever waits.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer func() {
		stop()
		c.Close()
	}()
	st, err := p.pass(ctx, c)
	if err == nil {
		err = c.Logout().Wait()
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("bounce: poll: %w", ctx.Err())
	}
	return st, err
}

// dial connects and, for STARTTLS, upgrades before anything else is sent.
func (p *Poller) dial(ctx context.Context) (*imapclient.Client, error) {
	cfg := p.o.IMAP
	d := &net.Dialer{Timeout: p.o.DialTimeout}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if p.o.TLSConfig != nil {
		tlsConfig = p.o.TLSConfig.Clone()
	}
	if tlsConfig.ServerName == "" {
		tlsConfig.ServerName = cfg.Host
	}
	opts := &imapclient.Options{TLSConfig: tlsConfig}
	var (
		conn net.Conn
		err  error
	)
	if cfg.Security == TLS {
		conn, err = (&tls.Dialer{NetDialer: d, Config: tlsConfig}).DialContext(ctx, "tcp", cfg.Addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", cfg.Addr)
	}
	if err != nil {
		return nil, fmt.Errorf("bounce: connect to %s: %w", cfg.Addr, err)
	}
	if cfg.Security == StartTLS {
		c, err := imapclient.NewStartTLS(conn, opts) // closes conn on failure
		if err != nil {
			return nil, fmt.Errorf("bounce: STARTTLS with %s: %w", cfg.Addr, err)
		}
		return c, nil
	}
	return imapclient.New(conn, opts), nil
}
