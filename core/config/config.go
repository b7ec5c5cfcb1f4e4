// Package config loads and validates the server's configuration. It is the
// only package that reads the environment: everything else receives a Config.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"

	"github.com/joho/godotenv"
)

// Config is every setting of the server. Variable names are those of the
// Python NornWeave server, without a prefix, so an existing .env works as is.
type Config struct {
	// DBDriver is sqlite or postgres; unset, it is taken from DatabaseURL
	// (see inferDriver).
	DBDriver    string `envconfig:"DB_DRIVER"`
	DatabaseURL string `envconfig:"DATABASE_URL"`
	// DatabaseMaxConnections bounds one server's PostgreSQL connection
	// pool, which the store and held-mail dispatch (River) share; the
	// postgres throttle keeps its own 4. SQLite always has one connection.
	DatabaseMaxConnections int `envconfig:"DATABASE_MAX_CONNECTIONS" default:"20"`

	EmailProvider string `envconfig:"EMAIL_PROVIDER" default:"demo"`
	EmailDomain   string `envconfig:"EMAIL_DOMAIN"`

	SMTPHost     string `envconfig:"SMTP_HOST"`
	SMTPPort     int    `envconfig:"SMTP_PORT" default:"587"`
	SMTPUsername string `envconfig:"SMTP_USERNAME"`
	SMTPPassword string `envconfig:"SMTP_PASSWORD"`
	SMTPUseTLS   bool   `envconfig:"SMTP_USE_TLS" default:"true"`

	MailgunAPIKey      string `envconfig:"MAILGUN_API_KEY"`
	MailgunDomain      string `envconfig:"MAILGUN_DOMAIN"`
	SendgridAPIKey     string `envconfig:"SENDGRID_API_KEY"`
	ResendAPIKey       string `envconfig:"RESEND_API_KEY"`
	AWSAccessKeyID     string `envconfig:"AWS_ACCESS_KEY_ID"`
	AWSSecretAccessKey string `envconfig:"AWS_SECRET_ACCESS_KEY"`
	AWSRegion          string `envconfig:"AWS_REGION" default:"us-east-1"`

	// Providers' delivery events in (POST /webhooks/{provider}): each
	// provider's route answers 404 until its secret is set.
	// SES_SNS_TOPIC_ARNS lists the SNS topics (comma-separated) whose
	// notifications are accepted: without it, anyone's topic could forge
	// bounces.
	MailgunWebhookSigningKey string `envconfig:"MAILGUN_WEBHOOK_SIGNING_KEY"`
	SendgridWebhookPublicKey string `envconfig:"SENDGRID_WEBHOOK_PUBLIC_KEY"`
	ResendWebhookSecret      string `envconfig:"RESEND_WEBHOOK_SECRET"`
	SESSNSTopicARNs          string `envconfig:"SES_SNS_TOPIC_ARNS"`
	// SMTP bounces: with BOUNCE_ADDRESS (e.g. bounces@example.com) every
	// message the SMTP provider sends goes from a VERP address
	// (bounces+<token>@example.com) naming it; BOUNCE_IMAP_URL is the
	// mailbox those bounces arrive in, read every BOUNCE_POLL_INTERVAL.
	BounceAddress      string        `envconfig:"BOUNCE_ADDRESS"`
	BounceIMAPURL      string        `envconfig:"BOUNCE_IMAP_URL"`
	BouncePollInterval time.Duration `envconfig:"BOUNCE_POLL_INTERVAL" default:"1m"`

	// Hosted providers: base-URL overrides (a region, a gateway, a test
	// server) and the HTTP client's bounds. PROVIDER_MAX_CONCURRENCY is
	// API calls in flight at once; SMTP_MAX_CONNECTIONS the SMTP pool.
	// Zero durations and counts take the providers' defaults.
	MailgunAPIBase         string        `envconfig:"MAILGUN_API_BASE"`
	SendgridAPIBase        string        `envconfig:"SENDGRID_API_BASE"`
	ResendAPIBase          string        `envconfig:"RESEND_API_BASE"`
	SESEndpoint            string        `envconfig:"SES_ENDPOINT"`
	ProviderTimeout        time.Duration `envconfig:"PROVIDER_TIMEOUT" default:"30s"`
	ProviderMaxConcurrency int           `envconfig:"PROVIDER_MAX_CONCURRENCY" default:"16"`
	SMTPMaxConnections     int           `envconfig:"SMTP_MAX_CONNECTIONS" default:"4"`

	APIKey      string `envconfig:"API_KEY"`
	CORSOrigins string `envconfig:"CORS_ORIGINS"`
	Environment string `envconfig:"ENVIRONMENT" default:"development"`
	LogLevel    string `envconfig:"LOG_LEVEL" default:"info"`
	Host        string `envconfig:"HOST" default:"0.0.0.0"`
	Port        int    `envconfig:"PORT" default:"8000"`
	// AllowedHosts lists the host names, besides loopback, that requests
	// may be addressed to (the Host header): a web page on another name
	// that resolves to this server (DNS rebinding) is refused. See
	// network.go.
	AllowedHosts string `envconfig:"ALLOWED_HOSTS"`
	// TrustedProxies lists the reverse proxies (CIDRs) whose
	// X-Forwarded-For or Forwarded header names the client.
	TrustedProxies string `envconfig:"TRUSTED_PROXIES"`

	OutboundDomainAllowlist string `envconfig:"OUTBOUND_DOMAIN_ALLOWLIST"`
	OutboundDomainBlocklist string `envconfig:"OUTBOUND_DOMAIN_BLOCKLIST"`

	// The global windows, in THROTTLE_UNIT; 0 is unlimited. The second
	// is SES's maximum send rate, the day a rolling 24 h (SES's quota).
	SendRateLimitPerSecond int `envconfig:"GLOBAL_SEND_RATE_LIMIT_PER_SECOND" default:"0"`
	SendRateLimitPerMinute int `envconfig:"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE" default:"0"`
	SendRateLimitPerHour   int `envconfig:"GLOBAL_SEND_RATE_LIMIT_PER_HOUR" default:"0"`
	SendRateLimitPerDay    int `envconfig:"GLOBAL_SEND_RATE_LIMIT_PER_DAY" default:"0"`
	// Every inbox's own windows, unless it overrides them (PATCH).
	InboxSendRateLimitPerMinute int `envconfig:"INBOX_SEND_RATE_LIMIT_PER_MINUTE" default:"0"`
	InboxSendRateLimitPerHour   int `envconfig:"INBOX_SEND_RATE_LIMIT_PER_HOUR" default:"0"`
	InboxSendRateLimitPerDay    int `envconfig:"INBOX_SEND_RATE_LIMIT_PER_DAY" default:"0"`

	// Retrying temporary provider failures (issue 6): how many retries
	// after the first attempt, and how long after admission one may start.
	SendRetryMax      int           `envconfig:"SEND_RETRY_MAX" default:"3"`
	SendRetryDeadline time.Duration `envconfig:"SEND_RETRY_DEADLINE" default:"30s"`
	// SendTimeout bounds one provider attempt for a small message (a large
	// one gets more, in proportion to its size): with the retry deadline,
	// it makes every send's lease (skuld.Budget).
	SendTimeout time.Duration `envconfig:"SEND_TIMEOUT" default:"60s"`
	// SMTPTimeout bounds each SMTP dial and exchange; a message's
	// transmission gets more, in proportion to its size.
	SMTPTimeout time.Duration `envconfig:"SMTP_TIMEOUT" default:"15s"`

	AttachmentMaxSizeMB      int `envconfig:"ATTACHMENT_MAX_SIZE_MB" default:"25"`
	AttachmentMaxTotalSizeMB int `envconfig:"ATTACHMENT_MAX_TOTAL_SIZE_MB" default:"35"`
	AttachmentMaxCount       int `envconfig:"ATTACHMENT_MAX_COUNT" default:"20"`

	// AllowUnauthenticated lets a server with a real provider and no
	// API_KEY listen on a non-loopback HOST: anyone who can reach it can
	// send mail, so the operator must say so.
	AllowUnauthenticated bool `envconfig:"ALLOW_UNAUTHENTICATED" default:"false"`
	// AuthFailureLimit is how many failed API key attempts one client
	// address may make in 15 minutes before it gets 429; 0 = no limit.
	AuthFailureLimit int `envconfig:"AUTH_FAILURE_LIMIT" default:"10"`
	// AdminSessionTTL is how long a dashboard login (/admin) lasts.
	AdminSessionTTL time.Duration `envconfig:"ADMIN_SESSION_TTL" default:"12h"`
	// What the server tells operators (issue 9): the log line format, and
	// the key that guards /metrics (empty: open, like /health).
	LogFormat     string `envconfig:"LOG_FORMAT" default:"json"`
	MetricsAPIKey string `envconfig:"METRICS_API_KEY"`
	// BodyMaxSizeMB and HTMLMaxSizeMB cap a send's Markdown body and its
	// html; RequestsInFlightMB caps the request bytes all sends being
	// processed hold at once (at least one largest request is always let
	// through); SearchTimeoutSeconds bounds one search.
	BodyMaxSizeMB        int `envconfig:"BODY_MAX_SIZE_MB" default:"1"`
	HTMLMaxSizeMB        int `envconfig:"HTML_MAX_SIZE_MB" default:"2"`
	RequestsInFlightMB   int `envconfig:"REQUESTS_IN_FLIGHT_MB" default:"64"`
	SearchTimeoutSeconds int `envconfig:"SEARCH_TIMEOUT_SECONDS" default:"10"`
	// Several servers sharing one throttle (issue 11); see throttle.go.
	Throttle
	// Scheduled and queued sends (issue 19); see hold.go.
	Hold
	WebhooksOut
	// Where `nornweave mcp` finds the server; see mcp.go.
	MCPClient
}

// DefaultSQLitePath is where the embedded database lives when DB_DRIVER is
// sqlite and DATABASE_URL is not set.
const DefaultSQLitePath = "./data/nornweave.db"

// providers lists the accepted EMAIL_PROVIDER values ("imap-smtp" is an
// alias of "smtp", as in the Python server).
var providers = map[string]bool{"demo": true, "smtp": true, "imap-smtp": true,
	"mailgun": true, "sendgrid": true, "resend": true, "ses": true}

// Load reads dotenvPath (if it exists) into the environment without
// overriding variables already set, then the environment into a Config.
// It does not validate: call Validate. See LoadWith.
func Load(dotenvPath string) (Config, error) { return LoadWith(dotenvPath, nil) }

func readDotenv(path string) error {
	if path == "" {
		return nil
	}
	if err := godotenv.Load(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: cannot read: %w", path, err)
	}
	return nil
}

func (c *Config) normalize() {
	c.DBDriver = strings.ToLower(strings.TrimSpace(c.DBDriver))
	switch c.DBDriver {
	case "postgresql":
		c.DBDriver = "postgres"
	case "":
		c.DBDriver = inferDriver(c.DatabaseURL)
	}
	c.EmailProvider = strings.ToLower(strings.TrimSpace(c.EmailProvider))
	if c.EmailProvider == "imap-smtp" {
		c.EmailProvider = "smtp"
	}
	c.Environment = strings.ToLower(strings.TrimSpace(c.Environment))
	c.LogLevel = strings.ToLower(strings.TrimSpace(c.LogLevel))
	c.LogFormat = strings.ToLower(strings.TrimSpace(c.LogFormat))
	c.EmailDomain = strings.ToLower(strings.TrimSpace(c.EmailDomain))
	c.Throttle.normalize()
	c.Hold.normalize()
}

// Validate reports every problem that must stop the server from starting,
// each naming its variable.
func (c Config) Validate() error {
	var errs []error
	bad := func(variable, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", variable, fmt.Sprintf(format, args...)))
	}
	switch c.DBDriver {
	case "sqlite", "": // "": a Config that Load did not fill; sqlite is the default
		if err := checkSQLitePath(c.DatabaseURL); err != nil {
			bad("DATABASE_URL", "%v", err)
		}
	case "postgres":
		if c.DatabaseURL == "" {
			bad("DATABASE_URL", "is required when DB_DRIVER=postgres")
		} else if err := checkPostgresURL(c.PostgresURL()); err != nil {
			bad("DATABASE_URL", "%v", err)
		}
	default:
		bad("DB_DRIVER", "unknown driver %q (want sqlite or postgres)", c.DBDriver)
	}
	if !providers[c.EmailProvider] {
		bad("EMAIL_PROVIDER", "unknown provider %q (want demo, smtp, mailgun, sendgrid, resend or ses)", c.EmailProvider)
	}
	for _, m := range c.missingCredentials() {
		bad(m, "is required when EMAIL_PROVIDER=%s", c.EmailProvider)
	}
	if c.EmailProvider == "smtp" && c.SMTPPassword != "" && c.SMTPUsername == "" {
		bad("SMTP_USERNAME", "is required when SMTP_PASSWORD is set")
	}
	errs = append(errs, c.validateHostedProviders()...)
	if c.BounceIMAPURL != "" && c.BounceAddress == "" {
		bad("BOUNCE_IMAP_URL", "needs BOUNCE_ADDRESS: bounces are read only for mail sent from its VERP addresses")
	}
	if c.BounceAddress != "" && c.EmailProvider != "smtp" {
		bad("BOUNCE_ADDRESS", "is for EMAIL_PROVIDER=smtp; %s reports bounces by its webhook (POST /webhooks/%s)",
			c.EmailProvider, c.EmailProvider)
	}
	if c.BounceIMAPURL != "" && c.BouncePollInterval < time.Second {
		bad("BOUNCE_POLL_INTERVAL", "must be at least 1s")
	}
	switch c.Environment {
	case "development":
	case "staging", "production":
		if c.APIKey == "" {
			bad("API_KEY", "is required when ENVIRONMENT=%s", c.Environment)
		}
		if c.EmailProvider == "demo" {
			bad("EMAIL_PROVIDER", "demo sends nothing and is refused when ENVIRONMENT=%s", c.Environment)
		}
	default:
		bad("ENVIRONMENT", "unknown environment %q (want development, staging or production)", c.Environment)
	}
	if _, err := c.SlogLevel(); err != nil {
		bad("LOG_LEVEL", "%v", err)
	}
	switch c.LogFormat {
	case "json", "text", "":
	default:
		bad("LOG_FORMAT", "unknown format %q (want json or text)", c.LogFormat)
	}
	if err := checkHost(c.Host); err != nil {
		bad("HOST", "%v", err)
	}
	if c.Port < 0 || c.Port > 65535 {
		bad("PORT", "%d is not a TCP port", c.Port)
	}
	if c.SMTPPort <= 0 || c.SMTPPort > 65535 {
		bad("SMTP_PORT", "%d is not a TCP port", c.SMTPPort)
	}
	for _, v := range []struct {
		name string
		n    int
		min  int
	}{
		{"GLOBAL_SEND_RATE_LIMIT_PER_SECOND", c.SendRateLimitPerSecond, 0},
		{"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE", c.SendRateLimitPerMinute, 0},
		{"GLOBAL_SEND_RATE_LIMIT_PER_HOUR", c.SendRateLimitPerHour, 0},
		{"GLOBAL_SEND_RATE_LIMIT_PER_DAY", c.SendRateLimitPerDay, 0},
		{"INBOX_SEND_RATE_LIMIT_PER_MINUTE", c.InboxSendRateLimitPerMinute, 0},
		{"INBOX_SEND_RATE_LIMIT_PER_HOUR", c.InboxSendRateLimitPerHour, 0},
		{"INBOX_SEND_RATE_LIMIT_PER_DAY", c.InboxSendRateLimitPerDay, 0},
		{"ATTACHMENT_MAX_SIZE_MB", c.AttachmentMaxSizeMB, 1},
		{"ATTACHMENT_MAX_TOTAL_SIZE_MB", c.AttachmentMaxTotalSizeMB, 1},
		{"ATTACHMENT_MAX_COUNT", c.AttachmentMaxCount, 0},
		{"SEND_RETRY_MAX", c.SendRetryMax, 0},
		{"BODY_MAX_SIZE_MB", c.BodyMaxSizeMB, 1},
		{"HTML_MAX_SIZE_MB", c.HTMLMaxSizeMB, 1},
		{"REQUESTS_IN_FLIGHT_MB", c.RequestsInFlightMB, 1},
		{"SEARCH_TIMEOUT_SECONDS", c.SearchTimeoutSeconds, 1},
		{"DATABASE_MAX_CONNECTIONS", c.DatabaseMaxConnections, 2},
	} {
		if v.n < v.min {
			bad(v.name, "must be at least %d, got %d", v.min, v.n)
		}
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"SEND_RETRY_DEADLINE", c.SendRetryDeadline}, {"SEND_TIMEOUT", c.SendTimeout}, {"SMTP_TIMEOUT", c.SMTPTimeout}} {
		if d.d <= 0 {
			bad(d.name, "must be a positive duration such as 30s, got %s", d.d)
		}
	}
	if c.AuthFailureLimit < 0 {
		bad("AUTH_FAILURE_LIMIT", "must be at least 0 (0 = no limit), got %d", c.AuthFailureLimit)
	}
	if c.AdminSessionTTL <= 0 {
		bad("ADMIN_SESSION_TTL", "must be positive, got %s", c.AdminSessionTTL)
	}
	if c.APIKey == "" && c.EmailProvider != "demo" && !IsLoopback(c.Host) && !c.AllowUnauthenticated {
		bad("ALLOW_UNAUTHENTICATED", "API_KEY is not set, EMAIL_PROVIDER=%s sends real mail and HOST=%q is not loopback: "+
			"anyone who can reach the server could send mail. Set API_KEY, listen on HOST=127.0.0.1, "+
			"or set ALLOW_UNAUTHENTICATED=true to accept that", c.EmailProvider, c.Host)
	}
	for _, l := range []struct{ name, value string }{
		{"OUTBOUND_DOMAIN_ALLOWLIST", c.OutboundDomainAllowlist},
		{"OUTBOUND_DOMAIN_BLOCKLIST", c.OutboundDomainBlocklist},
	} {
		patterns, err := SplitPatterns(l.value)
		if err != nil {
			bad(l.name, "%v", err)
		}
		for _, p := range patterns {
			// Compiled alone for the message, so the user sees the pattern
			// as written, not wrapped in the anchors the filter adds.
			if _, err := regexp.Compile(p); err != nil {
				bad(l.name, "invalid pattern %q: %s", p, regexpReason(err))
			} else if _, err := regexp.Compile("(?i)^(?:" + p + ")$"); err != nil {
				bad(l.name, "invalid pattern %q", p)
			}
		}
	}
	errs = append(errs, c.validateThrottle()...)
	errs = append(errs, c.validateHold()...)
	errs = append(errs, c.validateWebhooksOut()...)
	errs = append(errs, c.validateNetwork()...)
	return errors.Join(errs...)
}

// regexpReason is the regexp error without its echo of the pattern.
func regexpReason(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return se.Code.String()
	}
	return err.Error()
}

// checkPostgresURL accepts a postgres:// URL with a host, or pgx's
// "host=... dbname=..." keyword form. The message never repeats the value,
// which may hold a password.
func checkPostgresURL(s string) error {
	if !strings.Contains(s, "://") {
		if strings.Contains(s, "=") {
			return nil
		}
		return errors.New("want a URL such as postgres://user:password@host:5432/db or host=... dbname=... keywords")
	}
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("is not a valid URL (check that special characters in the password are percent-encoded)")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("scheme %q is not postgres:// or postgresql://", u.Scheme)
	}
	if u.Host == "" && u.Query().Get("host") == "" {
		return errors.New("names no host")
	}
	return nil
}

// checkHost accepts an IP address or a host name to listen on.
func checkHost(h string) error {
	if h == "" {
		return nil // every interface
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%q is not an IP address or host name", h)
		}
		for _, r := range label {
			if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return fmt.Errorf("%q is not an IP address or host name", h)
			}
		}
	}
	return nil
}

// missingCredentials names the variables the chosen provider needs but lacks.
func (c Config) missingCredentials() []string {
	need := map[string][]struct{ name, value string }{
		"smtp":     {{"SMTP_HOST", c.SMTPHost}},
		"mailgun":  {{"MAILGUN_API_KEY", c.MailgunAPIKey}, {"MAILGUN_DOMAIN", c.MailgunDomain}},
		"sendgrid": {{"SENDGRID_API_KEY", c.SendgridAPIKey}},
		"resend":   {{"RESEND_API_KEY", c.ResendAPIKey}},
	}
	// SES without explicit keys uses the AWS default credential chain;
	// one key without the other is a mistake.
	if c.EmailProvider == "ses" && (c.AWSAccessKeyID == "") != (c.AWSSecretAccessKey == "") {
		need["ses"] = []struct{ name, value string }{
			{"AWS_ACCESS_KEY_ID", c.AWSAccessKeyID}, {"AWS_SECRET_ACCESS_KEY", c.AWSSecretAccessKey}}
	}
	var missing []string
	for _, v := range need[c.EmailProvider] {
		if strings.TrimSpace(v.value) == "" {
			missing = append(missing, v.name)
		}
	}
	return missing
}

// validateHostedProviders checks the base-URL overrides and the HTTP and
// SMTP client bounds.
func (c Config) validateHostedProviders() []error {
	var errs []error
	for _, v := range []struct{ name, value string }{
		{"MAILGUN_API_BASE", c.MailgunAPIBase}, {"SENDGRID_API_BASE", c.SendgridAPIBase},
		{"RESEND_API_BASE", c.ResendAPIBase}, {"SES_ENDPOINT", c.SESEndpoint},
	} {
		if v.value == "" {
			continue
		}
		u, err := url.Parse(v.value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// The value may hold a password or a key: only its redacted
			// form is repeated.
			errs = append(errs, fmt.Errorf("%s: %q is not an http or https URL", v.name, RedactURL(v.value)))
		}
	}
	if c.ProviderTimeout < 0 {
		errs = append(errs, fmt.Errorf("PROVIDER_TIMEOUT: must not be negative, got %s", c.ProviderTimeout))
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"PROVIDER_MAX_CONCURRENCY", c.ProviderMaxConcurrency}, {"SMTP_MAX_CONNECTIONS", c.SMTPMaxConnections}} {
		if v.n < 0 || v.n > 1024 {
			errs = append(errs, fmt.Errorf("%s: must be between 1 and 1024 (0 takes the default), got %d", v.name, v.n))
		}
	}
	return errs
}

// SlogLevel maps LOG_LEVEL to a slog level.
func (c Config) SlogLevel() (slog.Level, error) {
	switch c.LogLevel {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error", "critical":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown level %q (want debug, info, warning or error)", c.LogLevel)
}

// SQLitePath is the database file when DB_DRIVER=sqlite. DATABASE_URL may
// name it, also in the Python server's "sqlite+aiosqlite:///path" form.
func (c Config) SQLitePath() string {
	u := strings.TrimSpace(c.DatabaseURL)
	if u == "" {
		return DefaultSQLitePath
	}
	if i := strings.Index(u, ":///"); i >= 0 && strings.HasPrefix(u, "sqlite") {
		return u[i+len(":///"):]
	}
	return u
}

// PostgresURL is DATABASE_URL with the Python driver suffix
// ("postgresql+asyncpg://") removed, so the Python server's value works.
func (c Config) PostgresURL() string {
	u := strings.TrimSpace(c.DatabaseURL)
	if scheme, rest, ok := strings.Cut(u, "://"); ok {
		if base, _, hasDriver := strings.Cut(scheme, "+"); hasDriver {
			return base + "://" + rest
		}
	}
	return u
}

// IsLoopback reports whether host (HOST) listens on loopback only:
// "localhost" or a loopback IP. An empty host or 0.0.0.0 listens everywhere.
func IsLoopback(host string) bool {
	host = strings.Trim(strings.TrimSpace(host), "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Addr is the listen address.
func (c Config) Addr() string {
	return net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

// SplitList splits a comma-separated variable, trimming spaces and dropping
// empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
