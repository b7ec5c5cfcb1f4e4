package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/providers"
)

// startAttrs are the fields of the start-up line: what an operator needs to
// see that the server runs as configured. No password, key or user name.
func (a *App) startAttrs(addr string) []any {
	c := a.cfg
	perMinute, perHour := a.limiter.Limits()
	attrs := []any{
		slog.String("version", a.version), slog.String("addr", addr),
		slog.String("db_driver", c.DBDriver), slog.String("database", DescribeDatabase(c)),
		slog.String("provider", c.EmailProvider),
	}
	if c.EmailProvider == "smtp" {
		attrs = append(attrs, slog.String("smtp_host", c.SMTPHost), slog.Int("smtp_port", c.SMTPPort),
			slog.Bool("smtp_tls", c.SMTPUseTLS))
	}
	return append(attrs,
		slog.String("email_domain", a.cfg.EmailDomain),
		slog.Int("limit_per_minute", perMinute), slog.Int("limit_per_hour", perHour),
		slog.Bool("api_key", c.APIKey != ""), slog.Bool("metrics_api_key", c.MetricsAPIKey != ""),
		slog.String("environment", c.Environment))
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

// CheckProvider proves the provider can be reached without sending
// anything: SMTP connects, secures and authenticates, and says goodbye.
// The hosted APIs offer no call free of side effects that every key may
// make, so for them it only builds the client; what says which was done.
func CheckProvider(ctx context.Context, cfg config.Config, logger *slog.Logger) (what string, err error) {
	p, err := newProvider(ctx, cfg, logger)
	if err != nil {
		return "provider " + cfg.EmailProvider, err
	}
	defer p.Close()
	switch sp := p.(type) {
	case *providers.SMTP:
		what = fmt.Sprintf("provider smtp %s:%d (connected, TLS %t, auth %t)", cfg.SMTPHost, cfg.SMTPPort,
			cfg.SMTPUseTLS, cfg.SMTPUsername != "")
		if err := sp.Check(ctx); err != nil {
			return fmt.Sprintf("provider smtp %s:%d", cfg.SMTPHost, cfg.SMTPPort), err
		}
		return what, nil
	case demoProvider:
		return "provider demo (sends nothing)", nil
	}
	return "provider " + cfg.EmailProvider + " (configured; not contacted: no side-effect-free check)", nil
}
