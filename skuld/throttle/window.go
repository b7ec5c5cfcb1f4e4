package throttle

import "time"

// Scope is whose sends a window counts: every send, or one inbox's.
type Scope uint8

// The scopes of a send.
const (
	Global Scope = iota // every send of the deployment
	Inbox               // the sends of one inbox (one sending address)
)

// Span is a window's length.
type Span uint8

// The spans of a scope's windows, shortest first. Each is counted in
// buckets, and a bucket counts until all of it has left the window, so a
// window errs on the side of refusing by at most one bucket width: 10 % of
// the second, 1/60 of the minute and the hour, 1/96 of the day. The widths
// bound the ring each window keeps (span/bucket + 1 live buckets, rounded
// up to a power of two): 16, 64, 64 and 128 of them.
const (
	Second Span = iota // 1 s, counted in 100 ms buckets
	Minute             // 60 s, counted in 1 s buckets
	Hour               // 3600 s, counted in 1 min buckets
	Day                // 24 h, rolling, counted in 15 min buckets
	numSpans
)

// spanOf describes each span: its length, its bucket width and the size of
// the ring that holds its live buckets.
var spanOf = [numSpans]struct {
	length, bucket time.Duration
	ring           int
	name           string
}{
	Second: {time.Second, 100 * time.Millisecond, 16, "per-second"},
	Minute: {time.Minute, time.Second, 64, "per-minute"},
	Hour:   {time.Hour, time.Minute, 64, "per-hour"},
	Day:    {24 * time.Hour, 15 * time.Minute, 128, "per-day"},
}

// Duration is the span's length.
func (s Span) Duration() time.Duration { return spanOf[s].length }

// bucket is the width of the buckets the span is counted in.
func (s Span) bucket() time.Duration { return spanOf[s].bucket }

// Longest is the longest span a window counts, plus its bucket: how far
// back a send can still count, and so how far back a restart must read.
const Longest = 24*time.Hour + 15*time.Minute

// A Window is one of a send's windows. Its String is its only name: the
// error, the headers, the log and the metric labels all use it, so nobody
// parses one.
type Window struct {
	Scope Scope
	Span  Span
}

// The windows. An inbox has no per-second window: the issue that added
// the second (SES's maximum send rate) is about the provider's account.
var (
	GlobalSecond = Window{Global, Second}
	GlobalMinute = Window{Global, Minute}
	GlobalHour   = Window{Global, Hour}
	GlobalDay    = Window{Global, Day}
	InboxMinute  = Window{Inbox, Minute}
	InboxHour    = Window{Inbox, Hour}
	InboxDay     = Window{Inbox, Day}
)

// Windows lists the windows, global before inbox, shortest first: the
// order of a refusal's violations and of the rate-limit headers.
var Windows = [7]Window{GlobalSecond, GlobalMinute, GlobalHour, GlobalDay, InboxMinute, InboxHour, InboxDay}

// String returns "per-second", "per-minute", "per-hour", "per-day",
// "inbox-per-minute", "inbox-per-hour" or "inbox-per-day": a token (no
// space), as a metric label and a structured header field's key need it.
func (w Window) String() string {
	if w.Scope == Inbox {
		return "inbox-" + spanOf[w.Span].name
	}
	return spanOf[w.Span].name
}

// WindowState is one window at one moment. Counts are kept for an
// unlimited window too, so Used and InFlight stay meaningful there;
// Remaining is then 0.
type WindowState struct {
	Window    Window
	Limit     int // 0 = unlimited
	Used      int // committed sends still inside the window
	InFlight  int // reservations not yet committed or released
	Remaining int // max(0, Limit-Used-InFlight)
	// ResetSeconds is the whole seconds, rounded up, until a slot next
	// frees: when the window is full, its Retry-After; otherwise until the
	// oldest counted send leaves, or 0 if none is counted. Sends in flight
	// are assumed to commit at the latest moment they can.
	ResetSeconds int
}

// ScopeState is one scope's windows at one moment. An inbox's PerSecond
// is always unlimited (zero Limit) and is not listed by States.
type ScopeState struct{ PerSecond, PerMinute, PerHour, PerDay WindowState }

// Of returns the state of the window of span sp.
func (p ScopeState) Of(sp Span) WindowState {
	switch sp {
	case Second:
		return p.PerSecond
	case Minute:
		return p.PerMinute
	case Hour:
		return p.PerHour
	}
	return p.PerDay
}

// Snapshot is the windows that apply to a send, at one moment: the global
// ones and, for a send from an inbox, the inbox's.
type Snapshot struct {
	Global ScopeState
	// Inbox is the inbox's windows; zero (Window fields included) when
	// the snapshot is of the global windows only.
	Inbox    ScopeState
	HasInbox bool
}

// States lists the snapshot's windows in the order of Windows, the
// inbox's only if it has them. The minute and the hour are always
// listed; the second and the day only when limited, so that a server
// configured as before answers as before.
func (s Snapshot) States() []WindowState {
	out := make([]WindowState, 0, len(Windows))
	for _, w := range Windows {
		if w.Scope == Inbox && !s.HasInbox {
			continue
		}
		p := s.Global
		if w.Scope == Inbox {
			p = s.Inbox
		}
		st := p.Of(w.Span)
		if (w.Span == Second || w.Span == Day) && st.Limit == 0 {
			continue
		}
		out = append(out, st)
	}
	return out
}
