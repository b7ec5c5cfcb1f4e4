package config

import (
	"fmt"
	"strings"
	"time"
)

// Hold is how held sends behave (issue 19): scheduled ones, and those
// queued when the throttle is full.
type Hold struct {
	// ScheduleMaxAhead is how far ahead scheduled_at may be. For this and
	// QueueMaxAge, 0 (a Config built in code) means the default.
	ScheduleMaxAhead time.Duration `envconfig:"SCHEDULE_MAX_AHEAD" default:"720h"`
	// SendOnThrottle is what a throttled send gets when its request does
	// not say (on_throttle): reject (429, today's behaviour) or queue
	// (202, sent when its windows have room).
	SendOnThrottle string `envconfig:"SEND_ON_THROTTLE" default:"reject"`
	// QueueMaxAge is how long a held message may wait past its due time
	// (full windows, a provider failing temporarily) before it fails as
	// expired.
	QueueMaxAge time.Duration `envconfig:"QUEUE_MAX_AGE" default:"24h"`
	// HeldPollInterval is how often a server looks for held mail that has
	// become due, with one indexed query: a scheduled send goes out within
	// about this of its time. 0 (a Config built in code) means the default.
	// An idle server makes twenty such queries a second at the default;
	// a longer interval trades lateness for that load.
	HeldPollInterval time.Duration `envconfig:"HELD_POLL_INTERVAL" default:"50ms"`
}

// Bounds of HELD_POLL_INTERVAL: River fetches no more often than every
// 10 ms, and a poll rarer than a minute would make scheduled mail late by
// more than anyone schedules to the minute for.
const (
	MinHeldPollInterval = 10 * time.Millisecond
	MaxHeldPollInterval = time.Minute
)

// MaxQueueMaxAge bounds QUEUE_MAX_AGE. A held message's job is never
// discarded for a provider's failures (the message is put back with its
// next attempt, and the job waits for it), but a job whose dispatch itself
// fails (the database) is retried by River at most 25 times, with a
// backoff of attempt⁴ seconds: the 25th attempt comes at least 18 days
// after the first. The janitor fails a message expired within a second of
// its deadline whatever its job does; 14 days keeps that deadline before
// River could give the job up.
const MaxQueueMaxAge = 14 * 24 * time.Hour

func (h *Hold) normalize() {
	h.SendOnThrottle = strings.ToLower(strings.TrimSpace(h.SendOnThrottle))
}

func (c Config) validateHold() []error {
	var errs []error
	if c.ScheduleMaxAhead < 0 {
		errs = append(errs, fmt.Errorf("SCHEDULE_MAX_AHEAD: must not be negative, got %s", c.ScheduleMaxAhead))
	}
	if c.QueueMaxAge < 0 || c.QueueMaxAge > MaxQueueMaxAge {
		errs = append(errs, fmt.Errorf("QUEUE_MAX_AGE: must be between 0 and %s (14 days: a held message's job is retried "+
			"at most 25 times, about 18 days of backoff in all, and must still be running when the message expires), got %s",
			MaxQueueMaxAge, c.QueueMaxAge))
	}
	if p := c.HeldPollInterval; p != 0 && (p < MinHeldPollInterval || p > MaxHeldPollInterval) {
		errs = append(errs, fmt.Errorf("HELD_POLL_INTERVAL: must be between %s and %s, got %s",
			MinHeldPollInterval, MaxHeldPollInterval, p))
	}
	switch c.SendOnThrottle {
	case "", "reject", "queue":
	default:
		errs = append(errs, fmt.Errorf("SEND_ON_THROTTLE: unknown value %q (want reject or queue)", c.SendOnThrottle))
	}
	return errs
}
