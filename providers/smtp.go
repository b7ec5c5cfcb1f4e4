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
// A Send's ctx deadline is the end of its attempt, and no byte of the
// message reaches the server after it: the wait for a free connection, the
// dial, greeting, STARTTLS and AUTH (each exchange also within Timeout),
// and the mail transaction (within Timeout plus the message's transfer
// allowance) are all cut off by it, at the TCP connection itself (see
// guardConn). A transaction cut off before the end of its content leaves
// the message certainly not taken; after the final "." its fate is
// unknown. A message is sent at most once: the only retry is on a fresh
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
	// transferRate is the bytes per second a message's transfer allowance
	// assumes: minTransferRate, lowered in tests so that a message of a
	// few MiB gets seconds, not minutes.
	transferRate int
	// dialTCP opens the TCP connection: a net.Dialer's, which tests wrap
	// to shrink the socket buffers.
	dialTCP func(ctx context.Context, network, address string) (net.Conn, error)
	// unguarded turns the guard of the attempt's end off: the baseline of
	// BenchmarkSMTPSendUnguarded, never set outside it.
	unguarded bool

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
		addr:         net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)),
		host:         cfg.Host,
		username:     cfg.Username,
		password:     cfg.Password,
		implicitTLS:  cfg.ImplicitTLS || (cfg.UseTLS && cfg.Port == 465),
		tlsConfig:    tlsConfig,
		idleTimeout:  cfg.IdleTimeout,
		timeout:      cfg.Timeout,
		logger:       cfg.Logger,
		now:          time.Now,
		transferRate: minTransferRate,
		dialTCP:      (&net.Dialer{}).DialContext,
		slots:        make(chan struct{}, cfg.MaxConns),
		done:         make(chan struct{}),
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
// from the server are *SendError. No byte of m reaches the server after
// ctx's deadline: the wait for a connection, the dial, the greeting,
// STARTTLS, AUTH and the transaction are all bounded by it, and the
// connection is closed when it passes.
func (p *SMTP) Send(ctx context.Context, m Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	msg, err := p.buildMsg(m)
	if err != nil {
		return "", invalidMessage("smtp", err)
	}
	start := time.Now()
	if err := p.acquire(ctx); err != nil {
		var se *SendError
		if errors.As(err, &se) { // its hand-over could not be recorded
			return "", se
		}
		if errors.Is(err, ErrClosed) {
			return "", &SendError{Temporary: true, Err: err, cause: CauseShuttingDown,
				msg: "smtp: not sent: the server is shutting down"}
		}
		return "", &SendError{Temporary: true, Err: err, cause: CauseNoFreeConnection,
			msg: "smtp: not sent: no free connection to the SMTP server in time (SMTP_MAX_CONNECTIONS)"}
	}
	defer p.release()

	reused, err := p.send(ctx, msg, m.Size())
	attrs := []any{
		slog.String("message_id_header", m.MessageID),
		slog.String("smtp_addr", p.addr),
		slog.Int64("duration_ms", time.Since(start).Milliseconds()),
		slog.Bool("reused", reused),
	}
	if err != nil {
		// The send pipeline logs the failure once, worded by its cause;
		// this line adds what only the provider knows.
		p.logger.DebugContext(ctx, "smtp send failed", append(attrs, slog.Any("error", err),
			slog.Any("detail", errors.Unwrap(err)))...)
		return "", p.redact(err)
	}
	p.logger.DebugContext(ctx, "smtp message sent", attrs...)
	if m.MessageID == "" {
		return msg.GetMessageID(), nil
	}
	return m.MessageID, nil
}

// Check connects to the SMTP server, secures and authenticates the session
// as a send would, and says goodbye, sending no message: nornweave check
// uses it to prove the configuration before the server runs.
func (p *SMTP) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	c, err := p.dial(ctx)
	if err != nil {
		return err
	}
	end, _ := ctx.Deadline()
	p.quit(c, end)
	return nil
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
		p.quit(c, time.Time{})
	}
	return nil
}
