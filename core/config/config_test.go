package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// valid is a configuration that passes Validate; each case breaks one thing.
func valid() Config {
	return Config{DBDriver: "sqlite", EmailProvider: "demo", Environment: "development",
		LogLevel: "info", Port: 8000, SMTPPort: 587, AttachmentMaxSizeMB: 25,
		AttachmentMaxTotalSizeMB: 35, AttachmentMaxCount: 20,
		SendRetryMax: 3, SendRetryDeadline: 30 * time.Second, SendTimeout: time.Minute, SMTPTimeout: 15 * time.Second,
		BodyMaxSizeMB: 1, HTMLMaxSizeMB: 2, RequestsInFlightMB: 64, SearchTimeoutSeconds: 10,
		DatabaseMaxConnections: 20, AdminSessionTTL: 12 * time.Hour}
}

func TestUnauthenticatedServerNeedsConsent(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*Config)
	}{
		{"loopback v4", func(c *Config) { c.Host = "127.0.0.1" }},
		{"loopback v6", func(c *Config) { c.Host = "::1" }},
		{"localhost", func(c *Config) { c.Host = "localhost" }},
		{"with a key", func(c *Config) { c.Host, c.APIKey = "0.0.0.0", "k" }},
		{"explicit consent", func(c *Config) { c.Host, c.AllowUnauthenticated = "0.0.0.0", true }},
		{"demo provider", func(c *Config) { c.Host, c.EmailProvider = "0.0.0.0", "demo" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			c.EmailProvider, c.SMTPHost = "smtp", "mx"
			tt.change(&c)
			if err := c.Validate(); err != nil {
				t.Errorf("Validate: %v, want nil", err)
			}
		})
	}
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
		{"one database connection", func(c *Config) { c.DatabaseMaxConnections = 1 }, []string{"DATABASE_MAX_CONNECTIONS"}},
		{"unknown provider", func(c *Config) { c.EmailProvider = "carrier-pigeon" }, []string{"EMAIL_PROVIDER", "carrier-pigeon"}},
		{"smtp without host", func(c *Config) { c.EmailProvider = "smtp" }, []string{"SMTP_HOST"}},
		{"mailgun without key and domain", func(c *Config) { c.EmailProvider = "mailgun" }, []string{"MAILGUN_API_KEY", "MAILGUN_DOMAIN"}},
		{"sendgrid without key", func(c *Config) { c.EmailProvider = "sendgrid" }, []string{"SENDGRID_API_KEY"}},
		{"resend without key", func(c *Config) { c.EmailProvider = "resend" }, []string{"RESEND_API_KEY"}},
		{"ses with a key id but no secret", func(c *Config) { c.EmailProvider, c.AWSAccessKeyID = "ses", "AKID" }, []string{"AWS_SECRET_ACCESS_KEY"}},
		{"ses with a secret but no key id", func(c *Config) { c.EmailProvider, c.AWSSecretAccessKey = "ses", "s" }, []string{"AWS_ACCESS_KEY_ID"}},
		{"mailgun base not a URL", func(c *Config) { c.MailgunAPIBase = "api.eu.mailgun.net" }, []string{"MAILGUN_API_BASE"}},
		{"sendgrid base not http", func(c *Config) { c.SendgridAPIBase = "ftp://x" }, []string{"SENDGRID_API_BASE"}},
		{"resend base not a URL", func(c *Config) { c.ResendAPIBase = "::" }, []string{"RESEND_API_BASE"}},
		{"ses endpoint not a URL", func(c *Config) { c.SESEndpoint = "localhost:4566" }, []string{"SES_ENDPOINT"}},
		{"negative provider timeout", func(c *Config) { c.ProviderTimeout = -1 }, []string{"PROVIDER_TIMEOUT"}},
		{"negative provider concurrency", func(c *Config) { c.ProviderMaxConcurrency = -1 }, []string{"PROVIDER_MAX_CONCURRENCY"}},
		{"huge smtp pool", func(c *Config) { c.SMTPMaxConnections = 5000 }, []string{"SMTP_MAX_CONNECTIONS"}},
		{"production without api key", func(c *Config) {
			c.Environment, c.EmailProvider, c.SMTPHost = "production", "smtp", "mx"
		}, []string{"API_KEY"}},
		{"staging with demo", func(c *Config) { c.Environment, c.APIKey = "staging", "k" }, []string{"EMAIL_PROVIDER", "demo"}},
		{"unknown environment", func(c *Config) { c.Environment = "prod" }, []string{"ENVIRONMENT"}},
		{"negative auth failure limit", func(c *Config) { c.AuthFailureLimit = -1 }, []string{"AUTH_FAILURE_LIMIT"}},
		{"zero admin session ttl", func(c *Config) { c.AdminSessionTTL = 0 }, []string{"ADMIN_SESSION_TTL"}},
		{"real provider, no key, all interfaces", func(c *Config) {
			c.EmailProvider, c.SMTPHost, c.Host = "smtp", "mx", "0.0.0.0"
		}, []string{"ALLOW_UNAUTHENTICATED", "API_KEY", `HOST="0.0.0.0"`}},
		{"real provider, no key, LAN address", func(c *Config) {
			c.EmailProvider, c.SMTPHost, c.Host = "smtp", "mx", "192.168.1.5"
		}, []string{"ALLOW_UNAUTHENTICATED"}},
		{"postgres without url", func(c *Config) { c.DBDriver = "postgres" }, []string{"DATABASE_URL"}},
		{"unknown driver", func(c *Config) { c.DBDriver = "mysql" }, []string{"DB_DRIVER"}},
		{"bad log level", func(c *Config) { c.LogLevel = "loud" }, []string{"LOG_LEVEL"}},
		{"bad port", func(c *Config) { c.Port = 70000 }, []string{"PORT"}},
		{"negative inbox per-minute", func(c *Config) { c.InboxSendRateLimitPerMinute = -1 }, []string{"INBOX_SEND_RATE_LIMIT_PER_MINUTE"}},
		{"negative inbox per-hour", func(c *Config) { c.InboxSendRateLimitPerHour = -1 }, []string{"INBOX_SEND_RATE_LIMIT_PER_HOUR"}},
		{"negative retries", func(c *Config) { c.SendRetryMax = -1 }, []string{"SEND_RETRY_MAX"}},
		{"zero retry deadline", func(c *Config) { c.SendRetryDeadline = 0 }, []string{"SEND_RETRY_DEADLINE"}},
		{"zero smtp timeout", func(c *Config) { c.SMTPTimeout = 0 }, []string{"SMTP_TIMEOUT"}},
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
		{"ses without keys uses the default chain", func(c *Config) { c.EmailProvider, c.APIKey = "ses", "k" }},
		{"hosted provider overrides", func(c *Config) {
			c.EmailProvider, c.MailgunAPIKey, c.MailgunDomain, c.Host = "mailgun", "k", "mg.acme.test", "127.0.0.1"
			c.MailgunAPIBase, c.SESEndpoint = "https://api.eu.mailgun.net", "http://127.0.0.1:4566"
		}},
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

func TestValidateListsEveryProblemAtOnce(t *testing.T) {
	c := valid()
	c.Port, c.Host, c.EmailProvider = 70000, "not a host", "smtp"
	c.DBDriver, c.DatabaseURL = "postgres", "mysql://db/x"
	c.OutboundDomainBlocklist = "ok\\.com, (bad"
	c.LogFormat = "xml"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want every problem")
	}
	for _, w := range []string{"PORT:", "HOST:", "SMTP_HOST: is required when EMAIL_PROVIDER=smtp",
		`DATABASE_URL: scheme "mysql"`, `OUTBOUND_DOMAIN_BLOCKLIST: invalid pattern "(bad": missing closing )`,
		`LOG_FORMAT: unknown format "xml"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Validate() = %q, want it to contain %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "(?i)") {
		t.Errorf("Validate() = %q shows the wrapped pattern, want it as written", err)
	}
}

func TestLoadListsEveryUnparsableVariable(t *testing.T) {
	t.Setenv("PORT", "eighty")
	t.Setenv("SMTP_USE_TLS", "maybe")
	t.Setenv("SMTP_TIMEOUT", "15")
	c, err := Load("")
	if err == nil {
		t.Fatal("Load() = nil, want errors")
	}
	for _, w := range []string{`PORT: cannot parse "eighty" as an integer`, `SMTP_USE_TLS: cannot parse "maybe" as a boolean`,
		`SMTP_TIMEOUT: cannot parse "15" as a duration`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Load() = %q, want it to contain %q", err, w)
		}
	}
	if c.Port != 8000 || c.SMTPTimeout != 15*time.Second {
		t.Errorf("bad values did not fall back to their defaults: port %d, smtp timeout %s", c.Port, c.SMTPTimeout)
	}
}

func TestLoadWithOverridesWinOverTheEnvironment(t *testing.T) {
	t.Setenv("PORT", "8123")
	c, err := LoadWith("", map[string]string{"PORT": "9000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 9000 {
		t.Errorf("PORT = %d, want 9000 from the override", c.Port)
	}
}

// declaredVars reads every envconfig tag from this package's source, an
// oracle independent of the reflection Vars uses: a variable in a nested
// or embedded struct is found here whatever Vars does.
func declaredVars(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	tag := regexp.MustCompile(`envconfig:"([A-Z0-9_]+)"`)
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tag.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// varsLack names the declared variables that vars lacks.
func varsLack(declared []string, vars []Var) []string {
	have := map[string]bool{}
	for _, v := range vars {
		have[v.Name] = true
	}
	var missing []string
	for _, d := range declared {
		if !have[d] {
			missing = append(missing, d)
		}
	}
	return missing
}

// Vars is where the flags, --help and .env.example's test get their list:
// it must hold every variable Config declares, nested structs included
// (the Throttle struct's four were once missing from all three).
func TestVarsCoverEveryField(t *testing.T) {
	declared := declaredVars(t)
	for _, w := range []string{"PORT", "THROTTLE_BACKEND", "THROTTLE_FAIL", "REDIS_URL", "REDIS_KEY_PREFIX"} {
		if !slices.Contains(declared, w) {
			t.Fatalf("the source scan found no %s: the oracle is broken", w)
		}
	}
	vars := Vars()
	if missing := varsLack(declared, vars); len(missing) > 0 {
		t.Errorf("Vars() lacks %v", missing)
	}
	if len(vars) != len(declared) {
		t.Errorf("Vars() has %d variables, the source declares %d", len(vars), len(declared))
	}
	seen := map[string]bool{}
	for _, v := range vars {
		if seen[v.Flag()] {
			t.Errorf("flag %s twice", v.Flag())
		}
		seen[v.Flag()] = true
	}
	// The check itself must see a variable that is missing.
	if missing := varsLack(declared, slices.DeleteFunc(slices.Clone(vars), func(v Var) bool {
		return v.Name == "REDIS_KEY_PREFIX"
	})); !slices.Equal(missing, []string{"REDIS_KEY_PREFIX"}) {
		t.Errorf("with REDIS_KEY_PREFIX dropped, varsLack = %v, want [REDIS_KEY_PREFIX]", missing)
	}
}

// varsOf walks nested and embedded structs at any depth, as envconfig does.
func TestVarsOfWalksNestedStructs(t *testing.T) {
	type inner struct {
		Deep bool `envconfig:"DEEP" default:"true"`
	}
	type middle struct {
		inner
		Mid string `envconfig:"MID"`
	}
	type outer struct {
		Top   int `envconfig:"TOP" default:"1"`
		Named middle
		Plain string // no tag, not a struct: not a variable
	}
	var got []string
	for _, v := range varsOf(reflect.TypeFor[outer]()) {
		got = append(got, fmt.Sprintf("%s=%s/%t", v.Name, v.Default, v.Bool))
	}
	if want := []string{"TOP=1/false", "DEEP=true/true", "MID=/false"}; !slices.Equal(got, want) {
		t.Errorf("varsOf = %v, want %v", got, want)
	}
}

// envExampleLacks names the variables example does not list as
// "#NAME=default".
func envExampleLacks(example string, vars []Var) []string {
	var missing []string
	for _, v := range vars {
		if !strings.Contains(example, "#"+v.Name+"="+v.Default+"\n") {
			missing = append(missing, v.Name)
		}
	}
	return missing
}

// .env.example lists every variable with its default, so it cannot fall
// behind the Config struct; and the check fails when a line goes.
func TestEnvExampleListsEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../../.env.example")
	if err != nil {
		t.Fatal(err)
	}
	example := string(b)
	if missing := envExampleLacks(example, Vars()); len(missing) > 0 {
		t.Errorf(".env.example lacks %v (each as #NAME=default)", missing)
	}
	for _, name := range []string{"THROTTLE_BACKEND", "REDIS_KEY_PREFIX"} {
		line := regexp.MustCompile(`(?m)^#` + name + `=.*\n`)
		if !line.MatchString(example) {
			t.Fatalf(".env.example has no #%s= line", name)
		}
		cut := line.ReplaceAllString(example, "")
		if missing := envExampleLacks(cut, Vars()); !slices.Equal(missing, []string{name}) {
			t.Errorf("with #%s removed, envExampleLacks = %v, want [%s]", name, missing, name)
		}
	}
}

func TestEmptyVariableMeansItsDefault(t *testing.T) {
	t.Setenv("PORT", "")
	t.Setenv("SMTP_USE_TLS", " ")
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 8000 || !c.SMTPUseTLS {
		t.Errorf("PORT=%d SMTP_USE_TLS=%t, want the defaults 8000 and true", c.Port, c.SMTPUseTLS)
	}
	if got := (Config{Host: "::1", Port: 80}).Addr(); got != "[::1]:80" {
		t.Errorf("Addr() = %q, want [::1]:80", got)
	}
}
