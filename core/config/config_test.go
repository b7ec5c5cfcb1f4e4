package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// valid is a configuration that passes Validate; each case breaks one thing.
func valid() Config {
	return Config{DBDriver: "sqlite", EmailProvider: "demo", Environment: "development",
		LogLevel: "info", Port: 8000, SMTPPort: 587, AttachmentMaxSizeMB: 25,
		AttachmentMaxTotalSizeMB: 35, AttachmentMaxCount: 20, BodyMaxSizeMB: 1, HTMLMaxSizeMB: 2,
		RequestsInFlightMB: 64, SearchTimeoutSeconds: 10}
}

func TestValidateNamesTheVariable(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   []string // substrings of the error
	}{
		{"negative per-minute", func(c *Config) { c.SendRateLimitPerMinute = -1 }, []string{"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE"}},
		{"negative per-hour", func(c *Config) { c.SendRateLimitPerHour = -5 }, []string{"GLOBAL_SEND_RATE_LIMIT_PER_HOUR"}},
		{"bad blocklist regex", func(c *Config) { c.OutboundDomainBlocklist = `ok\.com, [bad` }, []string{"OUTBOUND_DOMAIN_BLOCKLIST", `"[bad"`}},
		{"bad allowlist regex", func(c *Config) { c.OutboundDomainAllowlist = `(unclosed` }, []string{"OUTBOUND_DOMAIN_ALLOWLIST", `"(unclosed"`}},
		{"zero body cap", func(c *Config) { c.BodyMaxSizeMB = 0 }, []string{"BODY_MAX_SIZE_MB"}},
		{"zero html cap", func(c *Config) { c.HTMLMaxSizeMB = 0 }, []string{"HTML_MAX_SIZE_MB"}},
		{"zero in-flight budget", func(c *Config) { c.RequestsInFlightMB = 0 }, []string{"REQUESTS_IN_FLIGHT_MB"}},
		{"zero search timeout", func(c *Config) { c.SearchTimeoutSeconds = 0 }, []string{"SEARCH_TIMEOUT_SECONDS"}},
		{"unknown provider", func(c *Config) { c.EmailProvider = "carrier-pigeon" }, []string{"EMAIL_PROVIDER", "carrier-pigeon"}},
		{"smtp without host", func(c *Config) { c.EmailProvider = "smtp" }, []string{"SMTP_HOST"}},
		{"mailgun without key and domain", func(c *Config) { c.EmailProvider = "mailgun" }, []string{"MAILGUN_API_KEY", "MAILGUN_DOMAIN"}},
		{"sendgrid without key", func(c *Config) { c.EmailProvider = "sendgrid" }, []string{"SENDGRID_API_KEY"}},
		{"resend without key", func(c *Config) { c.EmailProvider = "resend" }, []string{"RESEND_API_KEY"}},
		{"ses without keys", func(c *Config) { c.EmailProvider = "ses" }, []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}},
		{"production without api key", func(c *Config) {
			c.Environment, c.EmailProvider, c.SMTPHost = "production", "smtp", "mx"
		}, []string{"API_KEY"}},
		{"staging with demo", func(c *Config) { c.Environment, c.APIKey = "staging", "k" }, []string{"EMAIL_PROVIDER", "demo"}},
		{"unknown environment", func(c *Config) { c.Environment = "prod" }, []string{"ENVIRONMENT"}},
		{"postgres without url", func(c *Config) { c.DBDriver = "postgres" }, []string{"DATABASE_URL"}},
		{"unknown driver", func(c *Config) { c.DBDriver = "mysql" }, []string{"DB_DRIVER"}},
		{"bad log level", func(c *Config) { c.LogLevel = "loud" }, []string{"LOG_LEVEL"}},
		{"bad port", func(c *Config) { c.Port = 70000 }, []string{"PORT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want an error naming %v", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"defaults", func(*Config) {}},
		{"production with smtp and key", func(c *Config) {
			c.Environment, c.APIKey, c.EmailProvider, c.SMTPHost = "production", "k", "smtp", "mx"
		}},
		{"postgres with url", func(c *Config) { c.DBDriver, c.DatabaseURL = "postgres", "postgres://x" }},
		{"valid patterns", func(c *Config) { c.OutboundDomainAllowlist = `(.*\.)?acme\.com, example\.org` }},
		{"zero limits mean unlimited", func(c *Config) { c.SendRateLimitPerMinute, c.SendRateLimitPerHour = 0, 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestLoadDefaultsDotenvAndPrecedence(t *testing.T) {
	dir := t.TempDir()
	dotenv := filepath.Join(dir, ".env")
	body := "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=7\nEMAIL_DOMAIN=Mail.Example.com\nPORT=9000\n"
	if err := os.WriteFile(dotenv, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PORT", "8123") // the environment wins over .env
	t.Setenv("EMAIL_PROVIDER", "IMAP-SMTP")
	unsetenv(t, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE", "EMAIL_DOMAIN", "DB_DRIVER", "SMTP_PORT",
		"SMTP_USE_TLS", "HOST", "AWS_REGION")

	c, err := Load(dotenv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.SendRateLimitPerMinute != 7 {
		t.Errorf("per-minute = %d, want 7 from .env", c.SendRateLimitPerMinute)
	}
	if c.Port != 8123 {
		t.Errorf("PORT = %d, want 8123 from the environment", c.Port)
	}
	if c.EmailDomain != "mail.example.com" {
		t.Errorf("EMAIL_DOMAIN = %q, want lower-cased", c.EmailDomain)
	}
	if c.EmailProvider != "smtp" {
		t.Errorf("EMAIL_PROVIDER = %q, want imap-smtp mapped to smtp", c.EmailProvider)
	}
	if c.DBDriver != "sqlite" || c.SMTPPort != 587 || !c.SMTPUseTLS || c.Host != "0.0.0.0" || c.AWSRegion != "us-east-1" {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestLoadNamesUnparsableVariable(t *testing.T) {
	t.Setenv("GLOBAL_SEND_RATE_LIMIT_PER_HOUR", "lots")
	_, err := Load("")
	if err == nil || !strings.Contains(err.Error(), "GLOBAL_SEND_RATE_LIMIT_PER_HOUR") {
		t.Fatalf("Load() = %v, want an error naming GLOBAL_SEND_RATE_LIMIT_PER_HOUR", err)
	}
}

func TestDatabaseURLForms(t *testing.T) {
	tests := []struct{ url, sqlite, postgres string }{
		{"", DefaultSQLitePath, ""},
		{"sqlite+aiosqlite:///./nornweave.db", "./nornweave.db", "sqlite:///./nornweave.db"},
		{"/var/lib/nw.db", "/var/lib/nw.db", "/var/lib/nw.db"},
		{"postgresql+asyncpg://u:p@db/nw", "postgresql+asyncpg://u:p@db/nw", "postgresql://u:p@db/nw"},
	}
	for _, tt := range tests {
		c := Config{DatabaseURL: tt.url}
		if got := c.SQLitePath(); got != tt.sqlite {
			t.Errorf("SQLitePath(%q) = %q, want %q", tt.url, got, tt.sqlite)
		}
		if got := c.PostgresURL(); got != tt.postgres {
			t.Errorf("PostgresURL(%q) = %q, want %q", tt.url, got, tt.postgres)
		}
	}
}

// unsetenv removes variables for the duration of the test, so that the
// machine's own environment cannot change what Load sees.
func unsetenv(t *testing.T, keys ...string) {
	t.Helper()
	for _, k := range keys {
		t.Setenv(k, "") // registers the restore
		os.Unsetenv(k)
	}
}
