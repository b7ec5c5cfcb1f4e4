package throttle

import "time"

// The limiter's tests mostly speak of the global windows: these helpers
// keep them short.

// newLimiter returns a limiter with global limits and no inbox defaults.
func newLimiter(perMinute, perHour int) *GlobalRateLimiter {
	return NewGlobalRateLimiter(Limits{PerMinute: perMinute, PerHour: perHour}, Limits{})
}

// reserve admits a send with no inbox.
func (l *GlobalRateLimiter) reserve(now, lease time.Duration) (Reservation, error) {
	return l.Reserve(now, lease, "", Override{})
}

// state reports the global windows.
func (l *GlobalRateLimiter) state(now time.Duration) ScopeState {
	return l.State(now, "", Override{}).Global
}

// inboxState reports an inbox's windows.
func (l *GlobalRateLimiter) inboxState(now time.Duration, inbox string, o Override) ScopeState {
	return l.State(now, inbox, o).Inbox
}

// setInboxDefaults keeps the global limits and sets the inbox defaults.
func (l *GlobalRateLimiter) setInboxDefaults(perMinute, perHour int) {
	g, _ := l.Limits()
	l.SetLimits(g, Limits{PerMinute: perMinute, PerHour: perHour})
}

// names returns the windows' names.
func names(ws []Window) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}
