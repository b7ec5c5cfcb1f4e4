// Package throttle is NornWeave's send throttle: in any 60 s at most the
// per-minute limit of sends, in any 3600 s at most the per-hour limit,
// globally and per inbox, under any concurrency and across restarts,
// crashes and several servers.
//
// GlobalRateLimiter is the limiter itself, in the style of x/time/rate:
// time is passed in, Reserve and Commit do not allocate, and the promise is
// in its doc comment. Throttle is the narrow interface the send pipeline
// uses: Reserve a send with its lease, then Commit or Release its Ticket;
// State; Close. Its implementations are Memory (one server, over a
// GlobalRateLimiter) and shared.Throttle (several servers, package shared,
// over a Driver that keeps the state in PostgreSQL, package pgthrottle, or
// Redis, package redisthrottle); FailOpen wraps a shared one for
// THROTTLE_FAIL=open. Every implementation runs the conformance suite in
// throttletest. Tally is the limiter's evaluation of one scope, exported
// for the shared throttle to read a backend's raw state with.
//
// A Window (Scope and Span) is named by its String alone, wherever it
// appears: "per-minute", "per-hour", "inbox-per-minute", "inbox-per-hour".
package throttle
