package config

import (
	"strings"
	"testing"
)

func TestValidateThrottle(t *testing.T) {
	base := func() Config {
		c, err := Load("")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // a substring of the error; "" for valid
	}{
		{"default is memory, closed", func(*Config) {}, ""},
		{"postgres on postgres", func(c *Config) {
			c.DBDriver, c.DatabaseURL, c.ThrottleBackend = "postgres", "postgres://x/y", "postgres"
		}, ""},
		{"redis", func(c *Config) { c.ThrottleBackend, c.ThrottleFail = "redis", "open" }, ""},
		{"postgres on sqlite", func(c *Config) { c.ThrottleBackend = "postgres" }, "THROTTLE_BACKEND"},
		{"unknown backend", func(c *Config) { c.ThrottleBackend = "etcd" }, "THROTTLE_BACKEND"},
		{"redis without url", func(c *Config) { c.ThrottleBackend, c.RedisURL = "redis", "" }, "REDIS_URL"},
		{"redis url not redis", func(c *Config) { c.ThrottleBackend, c.RedisURL = "redis", "http://x:6379" }, "REDIS_URL"},
		{"redis url without host", func(c *Config) { c.ThrottleBackend, c.RedisURL = "redis", "redis://" }, "REDIS_URL"},
		{"redis allowing eviction", func(c *Config) { c.ThrottleBackend, c.RedisAllowEviction = "redis", true }, ""},
		{"eviction allowed without redis", func(c *Config) { c.RedisAllowEviction = true }, "REDIS_ALLOW_EVICTION"},
		{"unknown fail policy", func(c *Config) { c.ThrottleFail = "ajar" }, "THROTTLE_FAIL"},
		// The shared backends keep the second and the day as the memory
		// one does; only SES's quota re-read by each server is refused.
		{"second and day on redis", func(c *Config) {
			c.ThrottleBackend, c.SendRateLimitPerSecond, c.SendRateLimitPerDay, c.InboxSendRateLimitPerDay = "redis", 14, 50000, 500
		}, ""},
		{"second and day on postgres", func(c *Config) {
			c.DBDriver, c.DatabaseURL, c.ThrottleBackend = "postgres", "postgres://x/y", "postgres"
			c.SendRateLimitPerSecond, c.SendRateLimitPerDay, c.InboxSendRateLimitPerDay = 14, 50000, 500
		}, ""},
		{"SES limits on redis", func(c *Config) {
			c.ThrottleBackend, c.EmailProvider, c.SESLimitsFromAccount = "redis", "ses", true
		}, "SES_LIMITS_FROM_ACCOUNT: is for THROTTLE_BACKEND=memory only"},
		{"SES limits on postgres", func(c *Config) {
			c.DBDriver, c.DatabaseURL, c.ThrottleBackend = "postgres", "postgres://x/y", "postgres"
			c.EmailProvider, c.SESLimitsFromAccount = "ses", true
		}, "SES_LIMITS_FROM_ACCOUNT: is for THROTTLE_BACKEND=memory only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.change(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
