package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	smithylog "github.com/aws/smithy-go/logging"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/throttle/pgthrottle"
	"github.com/nornweave/nornweave/skuld/throttle/redisthrottle"
)

// CheckStatus is a check's verdict.
type CheckStatus int

// The verdicts: a warning does not fail `nornweave check`.
const (
	CheckOK CheckStatus = iota
	CheckWarn
	CheckFail
)

// String is the verdict as the report prints it: "ok", "WARN", "FAIL".
func (s CheckStatus) String() string {
	switch s {
	case CheckOK:
		return "ok"
	case CheckWarn:
		return "WARN"
	}
	return "FAIL"
}

// CheckResult is what one check found: Detail says what was checked and
// how ("sqlite ./data/nornweave.db"), Err why it failed or warns.
type CheckResult struct {
	Status CheckStatus
	Detail string
	Err    error
}

// Check is one named check of `nornweave check`. None sends mail or
// changes data: a check may connect, resolve, handshake and read.
type Check struct {
	Name string
	Run  func(ctx context.Context) CheckResult
}

// checkTimeout bounds each check, so that a black-holed host fails the
// check instead of hanging the command.
const checkTimeout = 15 * time.Second

// Checks lists, in the order they run, the checks of a valid cfg. logger
// receives what the parts built for a check log; the command discards it,
// since the report says what matters.
func Checks(cfg config.Config, logger *slog.Logger) []Check {
	checks := []Check{
		{Name: "database", Run: func(ctx context.Context) CheckResult { return checkDatabase(ctx, cfg, logger) }},
		{Name: "throttle", Run: func(ctx context.Context) CheckResult { return checkThrottle(ctx, cfg) }},
		{Name: "provider", Run: func(ctx context.Context) CheckResult { return checkProvider(ctx, cfg, logger) }},
	}
	if cfg.EmailProvider == "ses" {
		checks = append(checks, Check{Name: "credentials", Run: func(ctx context.Context) CheckResult {
			return checkSESCredentials(ctx, cfg)
		}})
	}
	if cfg.EmailProvider != "demo" {
		checks = append(checks, Check{Name: "email domain", Run: func(context.Context) CheckResult {
			return checkEmailDomain(cfg)
		}})
	}
	checks = append(checks, Check{Name: "delivery events", Run: func(context.Context) CheckResult {
		return checkDeliveryEvents(cfg)
	}})
	return checks
}

// checkDeliveryEvents reports which providers' webhooks are configured
// (their secrets parse) and whether SMTP bounces are read. It warns when
// the provider mail goes through reports nothing back: its bounces and
// complaints would not suppress anything.
func checkDeliveryEvents(cfg config.Config) CheckResult {
	a := &App{cfg: cfg, clock: clock.NewSystem()}
	w, err := a.webhooks()
	if err != nil {
		return CheckResult{Status: CheckFail, Detail: "webhooks", Err: err}
	}
	parts := make([]string, 0, 5)
	for _, p := range []string{"mailgun", "sendgrid", "resend", "ses"} {
		state := "not configured"
		if w.Configured(p) {
			state = "configured at POST /webhooks/" + p
		}
		parts = append(parts, p+" "+state)
	}
	provider := cfg.EmailProvider // Load has made imap-smtp smtp
	switch {
	case provider == "smtp" && cfg.BounceIMAPURL != "":
		parts = append(parts, "smtp bounces read from "+config.RedactURL(cfg.BounceIMAPURL))
	case provider == "smtp":
		parts = append(parts, "smtp bounces not read")
	}
	detail := strings.Join(parts, "; ")
	switch {
	case provider == "smtp" && cfg.BounceIMAPURL == "":
		missing := "BOUNCE_ADDRESS and BOUNCE_IMAP_URL"
		if cfg.BounceAddress != "" {
			missing = "BOUNCE_IMAP_URL"
		}
		return CheckResult{Status: CheckWarn, Detail: detail, Err: errors.New(
			"bounces of mail sent through SMTP are not read: set " + missing)}
	case provider != "smtp" && provider != "demo" && !w.Configured(provider):
		return CheckResult{Status: CheckWarn, Detail: detail, Err: fmt.Errorf(
			"%s's bounces and complaints are not received: set %s and point its webhook at /webhooks/%s",
			provider, api.WebhookSecret(provider), provider)}
	}
	return CheckResult{Status: CheckOK, Detail: detail}
}

// RunCheck runs c within checkTimeout.
func RunCheck(ctx context.Context, c Check) CheckResult {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return c.Run(ctx)
}

// checkDatabase opens the database and reports its pending migrations. A
// SQLite file that does not exist yet is reported, not created: a check
// leaves no ./data behind.
func checkDatabase(ctx context.Context, cfg config.Config, logger *slog.Logger) CheckResult {
	detail := cfg.DBDriver + " " + DescribeDatabase(cfg)
	if cfg.DBDriver == "sqlite" {
		if _, err := os.Stat(cfg.SQLitePath()); errors.Is(err, fs.ErrNotExist) {
			return CheckResult{Detail: detail + " (does not exist yet; serve or migrate creates it)"}
		}
	}
	st, err := OpenStore(ctx, cfg, logger)
	if err != nil {
		return CheckResult{Status: CheckFail, Detail: detail, Err: err}
	}
	defer st.Close()
	// Pending migrations are normal before the first start, which applies
	// them; a schema newer than this binary is an error.
	pending, err := st.PendingMigrations(ctx)
	if err != nil {
		return CheckResult{Status: CheckFail, Detail: detail, Err: err}
	}
	if len(pending) > 0 {
		detail += fmt.Sprintf(" (%d migrations pending; serve or migrate applies them)", len(pending))
	}
	return CheckResult{Detail: detail}
}

// checkThrottle asks a shared throttle backend for an answer, as a send
// would (a ping: nothing is written), and a Redis for its eviction policy.
// The in-memory throttle has nothing to reach.
func checkThrottle(ctx context.Context, cfg config.Config) CheckResult {
	detail := fmt.Sprintf("%s (THROTTLE_FAIL=%s)", cfg.ThrottleBackend, cfg.ThrottleFail)
	switch cfg.ThrottleBackend {
	case "postgres":
		detail = "postgres " + DescribeDatabase(cfg) + " " + detail[len("postgres "):]
		pool, err := pgthrottle.OpenPool(ctx, cfg.PostgresURL(), 1)
		if err == nil {
			err = pool.Ping(ctx)
			pool.Close()
		}
		return checkResult(detail, err)
	case "redis":
		detail = "redis " + redisTarget(cfg.RedisURL) + " prefix " + cfg.RedisKeyPrefix + " " + detail[len("redis "):]
		rdb, err := redisthrottle.NewClient(cfg.RedisURL)
		if err != nil {
			return checkResult(detail, err)
		}
		defer rdb.Close()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return checkResult(detail, err)
		}
		// What the server refuses at start: a Redis that may evict.
		r := checkEviction(ctx, rdb, cfg.RedisAllowEviction)
		r.Detail = detail + ", " + r.Detail
		return r
	}
	return CheckResult{Detail: "memory (this server's own)"}
}

func checkResult(detail string, err error) CheckResult {
	if err != nil {
		return CheckResult{Status: CheckFail, Detail: detail, Err: err}
	}
	return CheckResult{Detail: detail}
}

// checkProvider proves the provider can be reached without sending
// anything: SMTP connects, secures, authenticates and says goodbye; for a
// hosted API, whose calls free of side effects not every key may make, the
// API base is resolved, connected to and (https) TLS-handshaken.
func checkProvider(ctx context.Context, cfg config.Config, logger *slog.Logger) CheckResult {
	switch cfg.EmailProvider {
	case "demo":
		return CheckResult{Detail: "demo (sends nothing)"}
	case "smtp":
		addr := fmt.Sprintf("%s:%d", cfg.SMTPHost, cfg.SMTPPort)
		p, err := newProvider(ctx, cfg, logger)
		if err != nil {
			return CheckResult{Status: CheckFail, Detail: "smtp " + addr, Err: err}
		}
		defer p.Close()
		sp, ok := p.(*providers.SMTP)
		if !ok {
			return CheckResult{Status: CheckFail, Detail: "smtp " + addr, Err: fmt.Errorf("unexpected provider %T", p)}
		}
		if err := sp.Check(ctx); err != nil {
			return CheckResult{Status: CheckFail, Detail: "smtp " + addr, Err: err}
		}
		return CheckResult{Detail: fmt.Sprintf("smtp %s (connected, TLS %t, auth %t)", addr, cfg.SMTPUseTLS,
			cfg.SMTPUsername != "")}
	}
	base := APIBase(cfg)
	detail := cfg.EmailProvider + " " + base
	how, err := reach(ctx, base, nil, http.ProxyFromEnvironment)
	if err != nil {
		return CheckResult{Status: CheckFail, Detail: detail, Err: err}
	}
	return CheckResult{Detail: detail + " (" + how + "; nothing sent: the key is first used by a send)"}
}

// APIBase is the base URL a hosted provider is called at: its override
// variable, or the provider's default.
func APIBase(cfg config.Config) string {
	pick := func(override, def string) string {
		if override != "" {
			return override
		}
		return def
	}
	switch cfg.EmailProvider {
	case "mailgun":
		return pick(cfg.MailgunAPIBase, providers.DefaultMailgunAPIBase)
	case "sendgrid":
		return pick(cfg.SendgridAPIBase, providers.DefaultSendGridAPIBase)
	case "resend":
		return pick(cfg.ResendAPIBase, providers.DefaultResendAPIBase)
	case "ses":
		region := pick(cfg.AWSRegion, providers.DefaultAWSRegion)
		return pick(cfg.SESEndpoint, "https://email."+region+".amazonaws.com")
	}
	return ""
}

// reach resolves the host of rawURL, connects to it and, for https, makes
// a TLS handshake (verified against roots; nil: the system's), then hangs
// up; it says what it did ("DNS 2 addresses, TCP 203.0.113.7:443, TLS
// 1.3"). When proxy names one for the URL (the providers honour
// HTTPS_PROXY: http.ProxyFromEnvironment), it reaches the proxy instead,
// and says so. Each error names the step that failed.
func reach(ctx context.Context, rawURL string, roots *x509.CertPool,
	proxy func(*http.Request) (*url.URL, error)) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("%q is not a URL", rawURL)
	}
	secure := u.Scheme == "https"
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[bool]string{true: "443", false: "80"}[secure]
	}
	via := ""
	if p, err := proxy(&http.Request{URL: u}); err == nil && p != nil {
		host, port, secure = p.Hostname(), p.Port(), false
		if port == "" {
			port = "80"
		}
		via = "via proxy " + p.Host + ": "
	}
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return "", fmt.Errorf("%sDNS: %w", via, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return "", fmt.Errorf("%sTCP: %w", via, err)
	}
	defer conn.Close()
	n := fmt.Sprintf("%d addresses", len(addrs))
	if len(addrs) == 1 {
		n = "1 address"
	}
	how := fmt.Sprintf("%sDNS %s, TCP %s", via, n, conn.RemoteAddr())
	if via != "" {
		return how + ", TLS to the API not checked through the proxy", nil
	}
	if !secure {
		return how + ", no TLS (http)", nil
	}
	tc := tls.Client(conn, &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		return "", fmt.Errorf("TLS: %w", err)
	}
	return how + ", TLS " + strings.TrimPrefix(tls.VersionName(tc.ConnectionState().Version), "TLS "), nil
}

// checkSESCredentials says where SES's credentials come from and, for the
// default chain, fetches them (from a file, an endpoint or the instance
// metadata: no AWS API call, nothing sent).
func checkSESCredentials(ctx context.Context, cfg config.Config) CheckResult {
	if cfg.AWSAccessKeyID != "" {
		return CheckResult{Detail: "ses: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"}
	}
	detail := "ses: no AWS_ACCESS_KEY_ID, so the AWS default credential chain"
	// The SDK's own logger writes plain lines to stderr (falling back to
	// IMDSv1, …): the check's line says what matters.
	ac, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.AWSRegion),
		awsconfig.WithLogger(smithylog.Nop{}))
	if err != nil {
		return CheckResult{Status: CheckFail, Detail: detail, Err: err}
	}
	if ps, ok := ac.Credentials.(interface{ ProviderSources() []aws.CredentialSource }); ok {
		if where := credentialSources(ps.ProviderSources()); where != "" {
			detail += ": " + where
		}
	}
	if _, err := ac.Credentials.Retrieve(ctx); err != nil {
		return CheckResult{Status: CheckFail, Detail: detail, Err: fmt.Errorf("no credentials: %w", err)}
	}
	return CheckResult{Detail: detail + " (retrieved)"}
}

// credentialSources words the chain's sources for an operator.
func credentialSources(srcs []aws.CredentialSource) string {
	profile := os.Getenv("AWS_PROFILE")
	if profile == "" {
		profile = "default"
	}
	words := map[aws.CredentialSource]string{
		aws.CredentialSourceEnvVars:              "the environment",
		aws.CredentialSourceEnvVarsSTSWebIDToken: "a web identity token (AWS_WEB_IDENTITY_TOKEN_FILE)",
		aws.CredentialSourceProfile:              "the shared credentials file, profile " + profile,
		aws.CredentialSourceProfileSourceProfile: "a source profile",
		aws.CredentialSourceProfileNamedProvider: "the profile's credential_source",
		aws.CredentialSourceProfileSTSWebIDToken: "the profile's web identity token",
		aws.CredentialSourceSSO:                  "IAM Identity Center (SSO), profile " + profile,
		aws.CredentialSourceSSOLegacy:            "IAM Identity Center (legacy SSO), profile " + profile,
		aws.CredentialSourceProcess:              "the profile's credential_process",
		aws.CredentialSourceHTTP:                 "the container credentials endpoint (ECS, EKS Pod Identity)",
		aws.CredentialSourceIMDS:                 "the EC2 instance role (instance metadata), the chain's last resort",
		aws.CredentialSourceLogin:                "an aws login session, profile " + profile,
		aws.CredentialSourceSTSAssumeRole:        "an assumed role",
	}
	var out []string
	for _, s := range srcs {
		if w, ok := words[s]; ok && (len(out) == 0 || out[len(out)-1] != w) {
			out = append(out, w)
		}
	}
	return strings.Join(out, ", then ")
}

// checkEmailDomain warns when a real provider has no EMAIL_DOMAIN: every
// POST /v1/inboxes is a 422 until it is set.
func checkEmailDomain(cfg config.Config) CheckResult {
	if cfg.EmailDomain != "" {
		return CheckResult{Detail: cfg.EmailDomain}
	}
	return CheckResult{Status: CheckWarn, Detail: "not set",
		Err: fmt.Errorf("POST /v1/inboxes answers 422 until EMAIL_DOMAIN names the domain %s sends from",
			cfg.EmailProvider)}
}
