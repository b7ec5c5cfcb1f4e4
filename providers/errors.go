package providers

import (
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/wneessen/go-mail"
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
//     same message may be accepted later (SMTP 4xx, a refused or reset
//     connection before the message was handed over, HTTP 429 or 5xx).
//     The pipeline may retry, after RetryAfter if the provider gave one.
//   - Unknown: the message was handed over and no verdict came back (no
//     reply after the end of DATA, a response that never arrived). It may
//     have been delivered: never retried, and counted by the throttle.
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

// connectError reports a failure to reach the server or to greet it. The
// message says what went wrong but not where: the relay's address is for
// the operator's log (Err keeps it), not for the API client.
func connectError(err error) *SendError {
	reason := readable(err.Error())
	var (
		op  *net.OpError
		dns *net.DNSError
	)
	switch {
	case errors.As(err, &dns):
		reason = "the SMTP server's host name does not resolve"
	case errors.As(err, &op) && op.Timeout():
		reason = "timed out"
	case errors.As(err, &op) && op.Op == "dial":
		reason = readable(op.Err.Error()) // "dial tcp HOST:PORT:" would name the relay
	}
	code := replyCode(err)
	return &SendError{
		Code:      code,
		Temporary: code == 0 || code/100 == 4,
		Err:       err,
		msg:       "smtp: cannot connect to the SMTP server: " + reason,
	}
}

// setupError reports a failed STARTTLS or AUTH step; what is the start of
// the sentence, e.g. "authentication failed".
func setupError(what, cause string, err error) *SendError {
	code := replyCode(err)
	return &SendError{
		cause:     cause,
		Code:      code,
		Temporary: code/100 == 4,
		Err:       err,
		msg:       fmt.Sprintf("smtp: %s: %s", what, readable(err.Error())),
	}
}

// deliveryError words a failed go-mail transaction by the step that failed.
func deliveryError(err error) *SendError {
	var se *mail.SendError
	if !errors.As(err, &se) {
		return &SendError{Temporary: true, Err: err, msg: "smtp: send failed: " + readable(err.Error())}
	}
	code := se.ErrorCode()
	replied := code != 0
	what, temporary := "send failed", false
	switch se.Reason {
	case mail.ErrSMTPMailFrom:
		what = pick(replied, "sender rejected", "connection lost")
	case mail.ErrSMTPRcptTo:
		what = pick(replied, "recipient rejected", "connection lost")
	case mail.ErrSMTPData:
		what = pick(replied, "message rejected", "connection lost")
	case mail.ErrSMTPDataClose:
		// Without a reply the final "." may have reached the server, which
		// may have queued the message: say so rather than guess.
		what = pick(replied, "message rejected", "no answer after the message was sent, it may have been delivered")
	case mail.ErrConnCheck, mail.ErrWriteContent:
		what = "connection lost"
	}
	// Without a reply to the final ".", the server may have queued the
	// message: its fate is unknown, and retrying could deliver it twice.
	unknown := se.Reason == mail.ErrSMTPDataClose && !replied
	if replied {
		temporary = code/100 == 4
	} else if what != "send failed" && !unknown {
		temporary = true
	}
	return &SendError{
		Code:      code,
		Temporary: temporary,
		Unknown:   unknown,
		Err:       err,
		msg:       fmt.Sprintf("smtp: %s: %s", what, sendErrorDetail(se)),
	}
}

func pick(cond bool, yes, no string) string {
	if cond {
		return yes
	}
	return no
}

// sendErrorDetail is go-mail's message without its step description (we
// give our own) and without the Message-ID it appends, which the caller
// already knows.
func sendErrorDetail(se *mail.SendError) string {
	s := strings.TrimPrefix(se.Error(), se.Reason.String()+": ")
	if id := se.MessageID(); id != "" {
		s = strings.TrimSuffix(s, ", affected message ID: "+id)
	}
	return readable(s)
}

// readable undoes the quoting that net/textproto (Go 1.26) applies to
// server replies, so `554 "5.7.1 rejected by policy"` reads as the server
// wrote it. The regexp is compiled here, on the error path only.
func readable(s string) string {
	re := regexp.MustCompile(`\b([2-5][0-9][0-9]) ("(?:[^"\\]|\\.)*")`)
	return re.ReplaceAllStringFunc(s, func(m string) string {
		code, quoted, _ := strings.Cut(m, " ")
		text, err := strconv.Unquote(quoted)
		if err != nil {
			return m
		}
		return code + " " + text
	})
}

// replyCode returns the SMTP reply code carried by err, or 0.
func replyCode(err error) int {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

// isCleanRejection reports a reply to MAIL, RCPT or DATA after which the
// session is in a known state and the connection may be kept. 421 is not
// one: the server is closing the connection.
func isCleanRejection(se *mail.SendError) bool {
	switch se.Reason {
	case mail.ErrSMTPMailFrom, mail.ErrSMTPRcptTo, mail.ErrSMTPData, mail.ErrSMTPDataClose:
		return se.ErrorCode() != 0 && se.ErrorCode() != 421
	}
	return false
}

// deadBeforeMail reports that a connection failed before the server took
// anything of the message: the NOOP check failed, or MAIL FROM could not be
// written or was answered "421 closing". Sending the message on a fresh
// connection then cannot deliver it twice.
func deadBeforeMail(err error) bool {
	var se *mail.SendError
	if !errors.As(err, &se) {
		return false
	}
	code := se.ErrorCode()
	return se.Reason == mail.ErrConnCheck || (se.Reason == mail.ErrSMTPMailFrom && (code == 0 || code == 421))
}
