package app

import (
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strings"

	"github.com/nornweave/nornweave/core/config"
)

// startAttrs are the fields of the start-up line: what an operator needs to
// see that the server runs as configured. No password, key or user name:
// URLs are shown as scheme, host and path only. addr is the listener's.
func (a *App) startAttrs(addr string) []any {
	c := a.cfg
	perMinute, perHour := c.SendRateLimitPerMinute, c.SendRateLimitPerHour
	attrs := []any{
		slog.String("version", a.version), slog.String("addr", ListenAddr(c.Host, addr)),
		slog.String("db_driver", c.DBDriver), slog.String("database", DescribeDatabase(c)),
		slog.String("provider", c.EmailProvider),
	}
	switch c.EmailProvider {
	case "smtp":
		attrs = append(attrs, slog.String("smtp_host", c.SMTPHost), slog.Int("smtp_port", c.SMTPPort),
			slog.Bool("smtp_tls", c.SMTPUseTLS))
		if c.BounceAddress != "" {
			attrs = append(attrs, slog.String("bounce_address", c.BounceAddress),
				slog.String("bounce_mailbox", MaskURL(c.BounceIMAPURL)))
		}
	case "mailgun", "sendgrid", "resend", "ses":
		attrs = append(attrs, slog.String("api_base", MaskURL(APIBase(c))))
		if c.EmailProvider == "ses" {
			attrs = append(attrs, slog.String("aws_region", c.AWSRegion))
		}
	}
	attrs = append(attrs,
		slog.String("email_domain", a.cfg.EmailDomain),
		slog.Int("limit_per_minute", perMinute), slog.Int("limit_per_hour", perHour),
		slog.Int("inbox_limit_per_minute", c.InboxSendRateLimitPerMinute),
		slog.Int("inbox_limit_per_hour", c.InboxSendRateLimitPerHour),
		slog.String("throttle_backend", orDefault(c.ThrottleBackend, "memory")),
		slog.String("throttle_unit", a.unit.String()))
	// The second and the day, newer, only when set: a server configured
	// as before logs as before.
	for _, v := range []struct {
		key string
		n   int
	}{{"limit_per_second", c.SendRateLimitPerSecond}, {"limit_per_day", c.SendRateLimitPerDay},
		{"inbox_limit_per_day", c.InboxSendRateLimitPerDay}} {
		if v.n != 0 {
			attrs = append(attrs, slog.Int(v.key, v.n))
		}
	}
	if c.SESLimitsFromAccount {
		attrs = append(attrs, slog.Bool("ses_limits_from_account", true))
	}
	if c.SharedThrottle() {
		attrs = append(attrs, slog.String("throttle_fail", orDefault(c.ThrottleFail, "closed")))
	}
	if c.ThrottleBackend == "redis" {
		attrs = append(attrs, slog.String("redis", MaskURL(c.RedisURL)), slog.String("redis_key_prefix", c.RedisKeyPrefix))
	}
	var hooks []string
	for _, p := range []string{"mailgun", "sendgrid", "resend", "ses"} {
		if a.hooks.Configured(p) {
			hooks = append(hooks, p)
		}
	}
	return append(attrs,
		slog.Any("webhooks", append([]string{}, hooks...)),
		slog.Any("domain_allowlist", list(c.OutboundDomainAllowlist)),
		slog.Any("domain_blocklist", list(c.OutboundDomainBlocklist)),
		slog.Any("cors_origins", list(c.CORSOrigins)),
		slog.Bool("api_key", c.APIKey != ""), slog.Bool("metrics_api_key", c.MetricsAPIKey != ""),
		slog.String("environment", c.Environment))
}

// list is a comma-separated variable as a JSON list: [] when empty, never
// null, so that a reader sees "none" rather than "unknown".
func list(s string) []string {
	if l := config.SplitList(s); l != nil {
		return l
	}
	return []string{}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ListenAddr is the address the server listens on, as an operator means
// it: HOST's own words when the socket is bound to every interface (Go
// binds 0.0.0.0 dual-stack and reports "[::]"), else the socket's address,
// whose port is the real one when PORT=0.
func ListenAddr(host, bound string) string {
	h, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip, err := netip.ParseAddr(h); err == nil && ip.IsUnspecified() {
		if hip, err := netip.ParseAddr(host); err == nil && hip.IsUnspecified() {
			h = host
		}
	}
	return net.JoinHostPort(h, port)
}

// MaskURL shows a URL without what may be a secret: scheme, host, port and
// path only; a user, a password or a query (a token) is replaced by "…".
// A value that does not parse as a URL is shown as "(not a URL)".
func MaskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(not a URL)"
	}
	masked := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	s := masked.String()
	if u.User != nil {
		s = strings.Replace(s, "://", "://…@", 1)
	}
	if u.RawQuery != "" {
		s += "?…"
	}
	return s
}

// DescribeDatabase names the database without its credentials: the SQLite
// file, or the PostgreSQL host, port and database name.
func DescribeDatabase(c config.Config) string {
	if c.DBDriver != "postgres" {
		return c.SQLitePath()
	}
	dsn := c.PostgresURL()
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		host := u.Host
		if host == "" {
			host = u.Query().Get("host")
		}
		return host + u.Path
	}
	// The keyword form: keep host, port and dbname only.
	var parts []string
	for _, f := range strings.Fields(dsn) {
		k, _, _ := strings.Cut(f, "=")
		if k == "host" || k == "port" || k == "dbname" {
			parts = append(parts, f)
		}
	}
	return strings.Join(parts, " ")
}
