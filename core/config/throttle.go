package config

import (
	"fmt"
	"net/url"
	"strings"
)

// Throttle is where the send throttle keeps its windows, and what happens
// when that place cannot be reached.
type Throttle struct {
	// ThrottleBackend is memory (one server; the default), postgres (the
	// database DB_DRIVER=postgres already uses) or redis (REDIS_URL).
	ThrottleBackend string `envconfig:"THROTTLE_BACKEND" default:"memory"`
	// ThrottleFail is closed (503 with Retry-After, nothing sent; the
	// default) or open (send, log an ERROR, count it) when a shared
	// backend cannot be reached.
	ThrottleFail string `envconfig:"THROTTLE_FAIL" default:"closed"`
	// RedisURL is the Redis server of THROTTLE_BACKEND=redis.
	RedisURL string `envconfig:"REDIS_URL" default:"redis://127.0.0.1:6379/0"`
	// RedisKeyPrefix prefixes every key the throttle writes, so that
	// several NornWeave deployments can share one Redis.
	RedisKeyPrefix string `envconfig:"REDIS_KEY_PREFIX" default:"nornweave:throttle"`
	// RedisAllowEviction lets a server start on a Redis whose
	// maxmemory-policy may evict keys: every key evicted is throttle state
	// lost, rebuilt from the send record, and the operator accepts that.
	RedisAllowEviction bool `envconfig:"REDIS_ALLOW_EVICTION" default:"false"`
	// ThrottleUnit is what the limits count: message (each send is 1; the
	// default) or recipient (each unique to, cc and bcc address, as SES,
	// Resend and SendGrid count their quotas).
	ThrottleUnit string `envconfig:"THROTTLE_UNIT" default:"message"`
	// SESLimitsFromAccount reads GLOBAL_SEND_RATE_LIMIT_PER_SECOND and
	// _PER_DAY from SES's GetAccount at start and every hour.
	SESLimitsFromAccount bool `envconfig:"SES_LIMITS_FROM_ACCOUNT" default:"false"`
}

func (t *Throttle) normalize() {
	t.ThrottleBackend = strings.ToLower(strings.TrimSpace(t.ThrottleBackend))
	t.ThrottleFail = strings.ToLower(strings.TrimSpace(t.ThrottleFail))
	t.RedisURL = strings.TrimSpace(t.RedisURL)
	t.ThrottleUnit = strings.ToLower(strings.TrimSpace(t.ThrottleUnit))
}

// SharedThrottle reports a throttle that several servers share.
func (t Throttle) SharedThrottle() bool {
	return t.ThrottleBackend == "postgres" || t.ThrottleBackend == "redis"
}

func (c Config) validateThrottle() []error {
	var errs []error
	bad := func(variable, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", variable, fmt.Sprintf(format, args...)))
	}
	switch c.ThrottleBackend {
	case "", "memory":
	case "postgres":
		if c.DBDriver != "postgres" {
			bad("THROTTLE_BACKEND", "postgres needs DB_DRIVER=postgres (SQLite is one server's database; use memory)")
		}
	case "redis":
		u, err := url.Parse(c.RedisURL)
		switch {
		case c.RedisURL == "":
			bad("REDIS_URL", "is required when THROTTLE_BACKEND=redis")
		case err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") || (u.Scheme != "unix" && u.Host == ""):
			bad("REDIS_URL", "must be a redis://host:port/db, rediss:// or unix:// URL")
		}
	default:
		bad("THROTTLE_BACKEND", "unknown backend %q (want memory, postgres or redis)", c.ThrottleBackend)
	}
	if c.RedisAllowEviction && c.ThrottleBackend != "redis" {
		bad("REDIS_ALLOW_EVICTION", "applies to THROTTLE_BACKEND=redis only (THROTTLE_BACKEND is %q)", c.ThrottleBackend)
	}
	switch c.ThrottleFail {
	case "", "closed", "open":
	default:
		bad("THROTTLE_FAIL", "unknown policy %q (want closed or open)", c.ThrottleFail)
	}
	switch c.ThrottleUnit {
	case "", "message", "recipient":
	default:
		bad("THROTTLE_UNIT", "unknown unit %q (want message or recipient)", c.ThrottleUnit)
	}
	if c.SESLimitsFromAccount && c.EmailProvider != "ses" {
		bad("SES_LIMITS_FROM_ACCOUNT", "reads the limits of the SES account EMAIL_PROVIDER=ses sends through (EMAIL_PROVIDER is %q)", c.EmailProvider)
	}
	// Servers sharing a backend must agree on its limits (the throttle
	// identity); each re-reading SES's quota on its own hour would change
	// them under the others, so the shared backends take the limits from
	// the configuration and `nornweave limits set` only.
	if c.SharedThrottle() && c.SESLimitsFromAccount {
		bad("SES_LIMITS_FROM_ACCOUNT", "is for THROTTLE_BACKEND=memory only: servers sharing the %s backend must agree "+
			"on its limits; set them from `nornweave limits from-ses` with `nornweave limits set`", c.ThrottleBackend)
	}
	return errs
}
