package providers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/wneessen/go-mail"
)

// The SMTP provider's failures, worded for the user who asked for the
// send. A message says what went wrong but never where: Go's network
// errors name both ends ("read tcp 10.0.0.5:51234->10.0.0.9:587: i/o
// timeout"), and the relay's address is for the operator's log (Err keeps
// it), not for the API client.

// connectError reports a failure to reach the server, to greet it or to
// finish the TLS handshake of implicit TLS.
func connectError(err error) *SendError {
	code := replyCode(err)
	se := &SendError{
		Code:      code,
		Temporary: code == 0 || code/100 == 4,
		Err:       err,
		msg:       "smtp: cannot connect to the SMTP server: " + smtpReason(err),
		cause:     replyCause(err),
	}
	if code == 0 && tlsRefused(err) {
		// A certificate that does not verify stays so on a retry.
		se.Temporary = false
	}
	return se
}

// replyCause is the cause of a failed step: the server's reply when it
// gave one, else what happened to the connection.
func replyCause(err error) string {
	code := replyCode(err)
	switch {
	case code == 0:
		if c := netCause(err); c != "" {
			return c
		}
		return CauseConnection
	case code == 530 || code == 534 || code == 535 || code == 538:
		return CauseCredentials // authentication required, too weak, refused
	case code/100 == 4:
		return CauseProviderUnavailable // the server defers: try later
	case senderNotVerified(err.Error()):
		return CauseSenderNotVerified
	}
	return CauseRejected
}

// setupError reports a failed STARTTLS or AUTH step; what is the start of
// the sentence, e.g. "authentication failed", and cause what the step's
// refusal means. A connection that broke or timed out during the step is
// not a refusal: it is temporary and its cause is the network's.
func setupError(what, cause string, err error) *SendError {
	code := replyCode(err)
	se := &SendError{
		cause:     cause,
		Code:      code,
		Temporary: code/100 == 4,
		Err:       err,
		msg:       fmt.Sprintf("smtp: %s: %s", what, smtpReason(err)),
	}
	if code == 0 && brokenConnection(err) {
		se.Temporary, se.cause = true, replyCause(err)
	}
	return se
}

// deliveryError words a failed go-mail transaction by the step that
// failed. netErr is what broke the connection, if that is what happened:
// go-mail's own error carries it only as text, addresses included.
func deliveryError(err, netErr error) *SendError {
	var se *mail.SendError
	if !errors.As(err, &se) {
		return &SendError{Temporary: true, Err: errors.Join(err, netErr), cause: replyCause(errors.Join(netErr, err)),
			msg: "smtp: send failed: " + smtpReason(errors.Join(netErr, err))}
	}
	code := se.ErrorCode()
	if code != 0 {
		what := "send failed"
		switch se.Reason {
		case mail.ErrSMTPMailFrom:
			what = "sender rejected"
		case mail.ErrSMTPRcptTo:
			what = "recipient rejected"
		case mail.ErrSMTPData, mail.ErrSMTPDataClose:
			what = "message rejected"
		}
		detail := sendErrorDetail(se)
		out := &SendError{Code: code, Temporary: code/100 == 4, Err: err,
			msg: fmt.Sprintf("smtp: %s: %s", what, detail), cause: CauseRejected}
		switch {
		case code == 530 || code == 534 || code == 535 || code == 538:
			out.cause = CauseCredentials
		case code/100 == 4:
			out.cause = CauseProviderUnavailable
		case senderNotVerified(detail):
			out.cause = CauseSenderNotVerified
		}
		return out
	}

	// No reply: the connection broke, or the attempt's time ran out.
	reason, cause := "connection lost", CauseConnection
	if netErr != nil {
		reason, cause = smtpReason(netErr), replyCause(netErr)
	}
	out := &SendError{Temporary: true, Err: errors.Join(err, netErr), cause: cause}
	switch se.Reason {
	case mail.ErrConnCheck:
		out.msg = "smtp: the connection was lost before the transaction: " + reason
	case mail.ErrSMTPMailFrom:
		out.msg = "smtp: no answer to MAIL FROM: " + reason
	case mail.ErrSMTPRcptTo:
		out.msg = "smtp: no answer to RCPT TO: " + reason
	case mail.ErrSMTPData:
		out.msg = "smtp: no answer to DATA: " + reason
	case mail.ErrWriteContent:
		// The final "." was not sent: the server must not deliver a
		// message it did not see the end of.
		out.msg = "smtp: the connection failed while the message was sent, before its end: " + reason
	case mail.ErrSMTPDataClose:
		// The final "." may have reached the server, which may have
		// queued the message: its fate is unknown, and retrying could
		// deliver it twice.
		out.Temporary, out.Unknown = false, true
		out.msg = "smtp: no answer after the message was sent, it may have been delivered: " + reason
	default:
		out.Temporary = false
		out.msg = "smtp: send failed: " + reason
	}
	return out
}

// smtpReason words why a step failed: the server's reply when it gave one,
// else what happened to the connection, never its addresses.
func smtpReason(err error) string {
	var (
		te       *textproto.Error
		dns      *net.DNSError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		authErr  x509.UnknownAuthorityError
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alert    tls.AlertError
		op       *net.OpError
	)
	switch {
	case errors.As(err, &te):
		return readable(te.Error())
	case errors.As(err, &dns):
		return "the SMTP server's host name does not resolve"
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by the server"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE):
		return "connection closed by the server"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "the SMTP server is unreachable"
	case errors.As(err, &hostname):
		return "TLS: the server's certificate is not valid for the configured host name"
	case errors.As(err, &invalid):
		return "TLS: the server's certificate is invalid or expired"
	case errors.As(err, &authErr), errors.As(err, &verify):
		return "TLS: the server's certificate is not trusted (signed by an unknown authority)"
	case errors.As(err, &record):
		return "TLS: the server does not speak TLS on this port"
	case errors.As(err, &alert):
		return "TLS: the server refused the handshake (" + alert.Error() + ")"
	case errors.Is(err, net.ErrClosed):
		return "connection closed"
	case errors.As(err, &op):
		return "connection failed"
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return "connection failed"
	}
	// A library's own sentence ("smtp: server doesn't support AUTH"),
	// which names nothing.
	return readable(err.Error())
}

// tlsRefused reports a TLS handshake that failed on its merits (the
// certificate, the protocol), not because the connection broke.
func tlsRefused(err error) bool {
	var (
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		authErr  x509.UnknownAuthorityError
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alert    tls.AlertError
	)
	return errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &authErr) ||
		errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &alert)
}

// brokenConnection reports a connection that timed out, was reset or was
// closed: nothing the server decided.
func brokenConnection(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || isTimeout(err) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// redact removes the relay's configured host and address from a message
// that quotes the server (a reply such as "421 mx.example.com closing"):
// the user-facing message never names the relay, whatever it says.
func (p *SMTP) redact(err error) error {
	var se *SendError
	if !errors.As(err, &se) || p.host == "" {
		return err
	}
	for _, s := range []string{p.addr, p.host} {
		se.msg = strings.ReplaceAll(se.msg, s, "[the SMTP server]")
	}
	return err
}

// sendErrorDetail is go-mail's message for a server reply, without its
// step description (we give our own) and without the Message-ID it
// appends, which the caller already knows.
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
