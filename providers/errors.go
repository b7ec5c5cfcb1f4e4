package providers

import (
	"errors"
	"strings"
	"time"
)

// ErrClosed is returned by Send after Close.
var ErrClosed = errors.New("smtp: provider is closed")

// SendError is a failed delivery attempt, from any provider. Its message is
// a sentence the user who asked for the send can act on ("smtp: recipient
// rejected: 550 5.1.1 ..."); it never contains a password or an API key.
//
// It sorts the failure for the send pipeline's retry rules into exactly one
// of three kinds:
//   - Temporary: the provider certainly did not take the message, and the
//     same message may be accepted later (SMTP 4xx, a refused, reset or
//     timed-out connection before the message was handed over, HTTP 429 or
//     503, a request that was never written).
//     The pipeline may retry, after RetryAfter if the provider gave one.
//   - Unknown: the message was handed over and no verdict came back (no
//     reply after the end of DATA, a response that never arrived, an HTTP
//     5xx other than 503 to a request that was written). It may have been
//     delivered: never retried, and counted by the throttle.
//   - neither: permanent (SMTP 5xx, HTTP 4xx, bad credentials, a TLS
//     mismatch). Not retried; the throttle slot is given back.
type SendError struct {
	// Code is the server's SMTP reply code or the HTTP status, or 0 when
	// the server did not answer (unreachable, connection lost).
	Code int
	// Temporary reports a failure after which the message was certainly
	// not taken and may be accepted later.
	Temporary bool
	// Unknown reports that the message may have been delivered.
	Unknown bool
	// RetryAfter is the provider's own hint (an HTTP Retry-After header),
	// or 0 when it gave none.
	RetryAfter time.Duration
	// Err is the underlying error, for errors.Is and errors.As.
	Err error

	msg   string
	cause string // set where the step that failed says it (TLS, AUTH); see Cause
}

// NewSendError returns a SendError with the given user-facing message; the
// caller sets the kind and the code.
func NewSendError(msg string, err error) *SendError {
	return &SendError{Err: err, msg: msg}
}

// Error implements error.
func (e *SendError) Error() string { return e.msg }

// Unwrap returns Err.
func (e *SendError) Unwrap() error { return e.Err }

// invalidMessage refuses a message that provider cannot write, before
// anything is sent: retrying it cannot help.
func invalidMessage(provider string, err error) *SendError {
	return &SendError{Err: err, cause: CauseInvalidMessage,
		msg: provider + ": not sent: " + strings.TrimPrefix(err.Error(), "smtp: ")}
}
