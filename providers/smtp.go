package providers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wneessen/go-mail"
)

// SMTP defaults.
const (
	DefaultSMTPPort        = 587
	DefaultSMTPMaxConns    = 4
	DefaultSMTPIdleTimeout = 30 * time.Second
	DefaultSMTPTimeout     = 15 * time.Second
)

// SMTPConfig configures an SMTP provider. Zero values take the defaults.
type SMTPConfig struct {
	Host string
	Port int // default 587
	// Username turns on AUTH (PLAIN, or LOGIN when the server offers only
	// that); Password goes with it.
	Username, Password string
	// UseTLS makes STARTTLS mandatory: a server that does not offer it is
	// an error, never a silent downgrade. With Port 465 it means implicit
	// TLS instead. False sends in plain text.
	UseTLS bool
	// ImplicitTLS speaks TLS from the first byte (SMTPS) whatever the
	// port; it is implied by UseTLS with Port 465.
	ImplicitTLS bool
	// TLSConfig overrides the TLS client configuration; its ServerName
	// defaults to Host.
	TLSConfig   *tls.Config
	HELO        string        // EHLO name; default: this machine's host name
	MaxConns    int           // connections open at once, default 4
	IdleTimeout time.Duration // close a pooled connection unused this long, default 30 s
	Timeout     time.Duration // bound on each dial and SMTP exchange, default 15 s
	Logger      *slog.Logger
}

// SMTP delivers messages to one SMTP server through go-mail, keeping up to
// MaxConns authenticated connections open for reuse. It is safe for
// concurrent use.
//
// A Send's ctx bounds the wait for a free connection and the dial. Once the
// SMTP transaction has started it runs to its end, bounded by Timeout,
// because abandoning it half way would leave unknown whether the message
// went out. A message is sent at most once: the only retry is on a fresh
// connection when a pooled one turns out dead before MAIL FROM was
// answered.
type SMTP struct {
	client      *mail.Client // the configuration; each connection is its own *smtp.Client
	addr        string
	host        string
	username    string
	password    string
	startTLS    bool
	implicitTLS bool
	tlsConfig   *tls.Config
	idleTimeout time.Duration
	timeout     time.Duration
	logger      *slog.Logger
	now         func() time.Time // replaced in tests to age pooled connections

	slots chan struct{} // one token per Send holding or dialing a connection
	done  chan struct{} // closed by Close

	mu     sync.Mutex
	idle   []*conn // most recently used last
	closed bool
}

// NewSMTP validates cfg and returns a provider. It does not dial, so the
// server may be down when the process starts.
func NewSMTP(cfg SMTPConfig) (*SMTP, error) {
	if cfg.Host == "" || strings.ContainsAny(cfg.Host, " \t\r\n") {
		return nil, fmt.Errorf("smtp: invalid host %q", cfg.Host)
	}
	cfg.Host = strings.Trim(cfg.Host, "[]") // "[::1]" as in a URL
	if cfg.Port == 0 {
		cfg.Port = DefaultSMTPPort
	}
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, fmt.Errorf("smtp: invalid port %d", cfg.Port)
	}
	if cfg.Password != "" && cfg.Username == "" {
		return nil, errors.New("smtp: a password is set but no username")
	}
	if cfg.MaxConns < 0 || cfg.IdleTimeout < 0 || cfg.Timeout < 0 {
		return nil, errors.New("smtp: MaxConns, IdleTimeout and Timeout must not be negative")
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultSMTPMaxConns
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultSMTPIdleTimeout
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultSMTPTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLSConfig != nil {
		tlsConfig = cfg.TLSConfig.Clone()
	}
	if tlsConfig.ServerName == "" {
		tlsConfig.ServerName = cfg.Host
	}

	p := &SMTP{
		addr:        net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)),
		host:        cfg.Host,
		username:    cfg.Username,
		password:    cfg.Password,
		implicitTLS: cfg.ImplicitTLS || (cfg.UseTLS && cfg.Port == 465),
		tlsConfig:   tlsConfig,
		idleTimeout: cfg.IdleTimeout,
		timeout:     cfg.Timeout,
		logger:      cfg.Logger,
		now:         time.Now,
		slots:       make(chan struct{}, cfg.MaxConns),
		done:        make(chan struct{}),
	}
	p.startTLS = cfg.UseTLS && !p.implicitTLS

	// STARTTLS and AUTH are done in dial rather than by go-mail so that
	// each failure gets its own error; go-mail dials through dialContext,
	// greets, and runs the mail transaction.
	opts := []mail.Option{
		mail.WithPort(cfg.Port),
		mail.WithTimeout(cfg.Timeout),
		mail.WithTLSPolicy(mail.NoTLS),
		mail.WithDialContextFunc(p.dialContext),
		// go-mail sends NOOP before and RSET (with another NOOP) after
		// every message: three extra round trips on a reused connection.
		// A dead pooled connection shows at MAIL FROM instead, before the
		// server has taken anything, and is redialled then (send); after
		// an accepted message the session is ready for the next MAIL
		// without RSET (RFC 5321 §4.1.1.5), and deliver RSETs itself after
		// a rejection.
		mail.WithoutNoop(),
		mail.WithoutRset(),
	}
	if cfg.HELO != "" {
		opts = append(opts, mail.WithHELO(cfg.HELO))
	}
	client, err := mail.NewClient(cfg.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("smtp: %w", err)
	}
	p.client = client

	if p.username != "" && !p.startTLS && !p.implicitTLS {
		cfg.Logger.Warn("smtp credentials will be sent without TLS", slog.String("smtp_addr", p.addr))
	}
	return p, nil
}

// Name returns "smtp".
func (p *SMTP) Name() string { return "smtp" }

// Send delivers m and returns its Message-ID as the provider id. Failures
// from the server are *SendError.
func (p *SMTP) Send(ctx context.Context, m Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	msg, err := p.buildMsg(m)
	if err != nil {
		return "", err
	}
	start := p.now()
	if err := p.acquire(ctx); err != nil {
		return "", err
	}
	defer p.release()

	reused, err := p.send(ctx, msg, p.transactionTimeout(ctx, m))
	attrs := []any{
		slog.String("message_id", m.MessageID),
		slog.Int64("duration_ms", p.now().Sub(start).Milliseconds()),
		slog.Bool("reused", reused),
	}
	if err != nil {
		p.logger.WarnContext(ctx, "smtp send failed", append(attrs, slog.String("smtp_addr", p.addr),
			slog.Any("error", err), slog.Any("cause", errors.Unwrap(err)))...)
		return "", err
	}
	p.logger.DebugContext(ctx, "smtp message sent", attrs...)
	if m.MessageID == "" {
		return msg.GetMessageID(), nil
	}
	return m.MessageID, nil
}

// transactionTimeout bounds one mail transaction: Timeout plus the time a
// message of m's size may take to transmit, so that a large message is not
// cut off (and left with an unknown fate) by a deadline fit for a short
// one; and never past ctx's deadline, which the send pipeline's budget for
// the attempt sets.
func (p *SMTP) transactionTimeout(ctx context.Context, m Message) time.Duration {
	d := p.timeout + TransferAllowance(m.Size())
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	return max(d, time.Millisecond)
}

// Close QUITs the idle connections and makes later Sends fail with
// ErrClosed; connections in use are closed when their Send ends. It is safe
// to call more than once and always returns nil: a failed QUIT at shutdown
// leaves nothing to do.
func (p *SMTP) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		p.quit(c)
	}
	return nil
}
