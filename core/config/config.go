// Package config loads and validates the server's configuration. It is the
// only package that reads the environment: everything else receives a Config.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/joho/godotenv"
	"github.com/kelseyhightower/envconfig"
)

// Config is every setting of the server. Variable names are those of the
// Python NornWeave server, without a prefix, so an existing .env works as is.
type Config struct {
	DBDriver    string `envconfig:"DB_DRIVER" default:"sqlite"`
	DatabaseURL string `envconfig:"DATABASE_URL"`

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

	OutboundDomainAllowlist string `envconfig:"OUTBOUND_DOMAIN_ALLOWLIST"`
	OutboundDomainBlocklist string `envconfig:"OUTBOUND_DOMAIN_BLOCKLIST"`

	SendRateLimitPerMinute int `envconfig:"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE" default:"0"`
	SendRateLimitPerHour   int `envconfig:"GLOBAL_SEND_RATE_LIMIT_PER_HOUR" default:"0"`
	// Every inbox's own windows, unless it overrides them (PATCH).
	InboxSendRateLimitPerMinute int `envconfig:"INBOX_SEND_RATE_LIMIT_PER_MINUTE" default:"0"`
	InboxSendRateLimitPerHour   int `envconfig:"INBOX_SEND_RATE_LIMIT_PER_HOUR" default:"0"`

	// Retrying temporary provider failures (issue 6): how many retries
	// after the first attempt, and how long after admission one may start.
	SendRetryMax      int           `envconfig:"SEND_RETRY_MAX" default:"3"`
	SendRetryDeadline time.Duration `envconfig:"SEND_RETRY_DEADLINE" default:"30s"`
	// SMTPTimeout bounds each SMTP dial and exchange; a message's
	// transmission gets more, in proportion to its size.
	SMTPTimeout time.Duration `envconfig:"SMTP_TIMEOUT" default:"15s"`

	AttachmentMaxSizeMB      int `envconfig:"ATTACHMENT_MAX_SIZE_MB" default:"25"`
	AttachmentMaxTotalSizeMB int `envconfig:"ATTACHMENT_MAX_TOTAL_SIZE_MB" default:"35"`
	AttachmentMaxCount       int `envconfig:"ATTACHMENT_MAX_COUNT" default:"20"`

	// Several servers sharing one throttle (issue 11); see throttle.go.
	Throttle
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
// It does not validate: call Validate.
func Load(dotenvPath string) (Config, error) {
	var c Config
	if dotenvPath != "" {
		if err := godotenv.Load(dotenvPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return c, fmt.Errorf("config: read %s: %w", dotenvPath, err)
		}
	}
	if err := envconfig.Process("", &c); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return c, fmt.Errorf("config: %s: cannot parse %q as %s", pe.KeyName, pe.Value, pe.TypeName)
		}
		return c, fmt.Errorf("config: %w", err)
	}
	c.normalize()
	return c, nil
}

func (c *Config) normalize() {
	c.DBDriver = strings.ToLower(strings.TrimSpace(c.DBDriver))
	if c.DBDriver == "postgresql" {
		c.DBDriver = "postgres"
	}
	c.EmailProvider = strings.ToLower(strings.TrimSpace(c.EmailProvider))
	if c.EmailProvider == "imap-smtp" {
		c.EmailProvider = "smtp"
	}
	c.Environment = strings.ToLower(strings.TrimSpace(c.Environment))
	c.LogLevel = strings.ToLower(strings.TrimSpace(c.LogLevel))
	c.EmailDomain = strings.ToLower(strings.TrimSpace(c.EmailDomain))
	c.Throttle.normalize()
}

// Validate reports every problem that must stop the server from starting,
// each naming its variable.
func (c Config) Validate() error {
	var errs []error
	bad := func(variable, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", variable, fmt.Sprintf(format, args...)))
	}
	switch c.DBDriver {
	case "sqlite":
	case "postgres":
		if c.DatabaseURL == "" {
			bad("DATABASE_URL", "is required when DB_DRIVER=postgres")
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
	errs = append(errs, c.validateHostedProviders()...)
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
		{"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE", c.SendRateLimitPerMinute, 0},
		{"GLOBAL_SEND_RATE_LIMIT_PER_HOUR", c.SendRateLimitPerHour, 0},
		{"INBOX_SEND_RATE_LIMIT_PER_MINUTE", c.InboxSendRateLimitPerMinute, 0},
		{"INBOX_SEND_RATE_LIMIT_PER_HOUR", c.InboxSendRateLimitPerHour, 0},
		{"ATTACHMENT_MAX_SIZE_MB", c.AttachmentMaxSizeMB, 1},
		{"ATTACHMENT_MAX_TOTAL_SIZE_MB", c.AttachmentMaxTotalSizeMB, 1},
		{"ATTACHMENT_MAX_COUNT", c.AttachmentMaxCount, 0},
		{"SEND_RETRY_MAX", c.SendRetryMax, 0},
	} {
		if v.n < v.min {
			bad(v.name, "must be at least %d, got %d", v.min, v.n)
		}
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"SEND_RETRY_DEADLINE", c.SendRetryDeadline}, {"SMTP_TIMEOUT", c.SMTPTimeout}} {
		if d.d <= 0 {
			bad(d.name, "must be a positive duration such as 30s, got %s", d.d)
		}
	}
	for _, l := range []struct{ name, value string }{
		{"OUTBOUND_DOMAIN_ALLOWLIST", c.OutboundDomainAllowlist},
		{"OUTBOUND_DOMAIN_BLOCKLIST", c.OutboundDomainBlocklist},
	} {
		for _, p := range SplitList(l.value) {
			if _, err := regexp.Compile("(?i)^(?:" + p + ")$"); err != nil {
				bad(l.name, "invalid pattern %q: %v", p, err)
			}
		}
	}
	errs = append(errs, c.validateThrottle()...)
	return errors.Join(errs...)
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
			errs = append(errs, fmt.Errorf("%s: %q is not an http or https URL", v.name, v.value))
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

// Addr is the listen address.
func (c Config) Addr() string {
	return fmt.Sprintf("%s:%d", c.Host, c.Port)
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
