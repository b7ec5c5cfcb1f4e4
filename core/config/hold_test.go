package config

import (
	"strings"
	"testing"
	"time"
)

func TestHoldDefaultsAndValidation(t *testing.T) {
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.ScheduleMaxAhead != 30*24*time.Hour || c.SendOnThrottle != "reject" || c.QueueMaxAge != 24*time.Hour ||
		c.HeldPollInterval != 50*time.Millisecond {
		t.Fatalf("defaults %s, %q, %s, %s; want 720h, reject, 24h, 50ms", c.ScheduleMaxAhead, c.SendOnThrottle,
			c.QueueMaxAge, c.HeldPollInterval)
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // a substring of the error; "" for valid
	}{
		{"queue", func(c *Config) { c.SendOnThrottle = "queue" }, ""},
		{"unknown on-throttle", func(c *Config) { c.SendOnThrottle = "later" }, "SEND_ON_THROTTLE"},
		{"negative max ahead", func(c *Config) { c.ScheduleMaxAhead = -time.Hour }, "SCHEDULE_MAX_AHEAD"},
		{"negative max age", func(c *Config) { c.QueueMaxAge = -time.Hour }, "QUEUE_MAX_AGE"},
		{"max age at its bound", func(c *Config) { c.QueueMaxAge = 14 * 24 * time.Hour }, ""},
		{"max age past River's retries", func(c *Config) { c.QueueMaxAge = 30 * 24 * time.Hour }, "QUEUE_MAX_AGE"},
		{"poll of a second", func(c *Config) { c.HeldPollInterval = time.Second }, ""},
		{"poll of the default in code", func(c *Config) { c.HeldPollInterval = 0 }, ""},
		{"poll faster than River fetches", func(c *Config) { c.HeldPollInterval = time.Millisecond }, "HELD_POLL_INTERVAL"},
		{"poll rarer than a minute", func(c *Config) { c.HeldPollInterval = 2 * time.Minute }, "HELD_POLL_INTERVAL"},
		{"webhook retries", func(c *Config) { c.WebhookRetrySchedule = "1s, 10s,1m" }, ""},
		{"webhook retry not a duration", func(c *Config) { c.WebhookRetrySchedule = "1s,soon" }, "WEBHOOK_RETRY_SCHEDULE"},
		{"webhook retry of zero", func(c *Config) { c.WebhookRetrySchedule = "0s" }, "WEBHOOK_RETRY_SCHEDULE"},
		{"twenty webhook retries", func(c *Config) { c.WebhookRetrySchedule = strings.Repeat("1s,", 19) + "1s" }, "WEBHOOK_RETRY_SCHEDULE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := c
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
