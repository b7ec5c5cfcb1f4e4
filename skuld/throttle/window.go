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

// The spans of the two windows each scope has.
const (
	Minute Span = iota // 60 s, counted in 1 s buckets
	Hour               // 3600 s, counted in 1 min buckets
)

// Duration is the span's length.
func (s Span) Duration() time.Duration {
	if s == Hour {
		return time.Hour
	}
	return time.Minute
}

// bucket is the width of the buckets the span is counted in.
func (s Span) bucket() time.Duration {
	if s == Hour {
		return time.Minute
	}
	return time.Second
}

// A Window is one of a send's four windows. Its String is its only name:
// the error, the headers, the log and the metric labels all use it, so
// nobody parses one.
type Window struct {
	Scope Scope
	Span  Span
}

// The four windows.
var (
	GlobalMinute = Window{Global, Minute}
	GlobalHour   = Window{Global, Hour}
	InboxMinute  = Window{Inbox, Minute}
	InboxHour    = Window{Inbox, Hour}
)

// Windows lists the four windows, global before inbox, minute before hour:
// the order of a refusal's violations and of the rate-limit headers.
var Windows = [4]Window{GlobalMinute, GlobalHour, InboxMinute, InboxHour}

// String returns "per-minute", "per-hour", "inbox-per-minute" or
// "inbox-per-hour": a token (no space), as a metric label and a structured
// header field's key need it.
func (w Window) String() string {
	s := "per-minute"
	if w.Span == Hour {
		s = "per-hour"
	}
	if w.Scope == Inbox {
		return "inbox-" + s
	}
	return s
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

// Pair is one scope's two windows.
type Pair struct{ PerMinute, PerHour WindowState }

// Snapshot is the windows that apply to a send, at one moment: the global
// ones and, for a send from an inbox, the inbox's.
type Snapshot struct {
	Global Pair
	// Inbox is the inbox's windows; zero (Window fields included) when
	// the snapshot is of the global windows only.
	Inbox    Pair
	HasInbox bool
}

// States lists the snapshot's windows in the order of Windows, the
// inbox's only if it has them.
func (s Snapshot) States() []WindowState {
	out := []WindowState{s.Global.PerMinute, s.Global.PerHour}
	if s.HasInbox {
		out = append(out, s.Inbox.PerMinute, s.Inbox.PerHour)
	}
	return out
}
