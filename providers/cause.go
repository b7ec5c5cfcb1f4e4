package providers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// Causes of a failed send, as Cause names them: the log's "cause" field,
// and a metric label. The list is closed: Cause returns nothing else.
const (
	// CauseConnectionRefused: nothing listens at the server's address.
	CauseConnectionRefused = "connection_refused"
	// CauseDNS: the server's host name does not resolve.
	CauseDNS = "dns"
	// CauseTimeout: the server did not answer in time (the attempt's
	// deadline, SMTP_TIMEOUT or PROVIDER_TIMEOUT).
	CauseTimeout = "timeout"
	// CauseTLS: the TLS handshake failed on its merits (an untrusted or
	// misnamed certificate, no STARTTLS offered when it is required).
	CauseTLS = "tls"
	// CauseCredentials: the credentials are missing, wrong or lack a
	// permission (SMTP AUTH refused, HTTP 401 or 403, no AWS credentials).
	CauseCredentials = "credentials"
	// CauseSenderNotVerified: the provider has not verified the sender's
	// address or domain (SendGrid's Sender Identity, Resend's and
	// Mailgun's domains, SES's identities).
	CauseSenderNotVerified = "sender_not_verified"
	// CauseRejected: the server answered and refused the message (an SMTP
	// 5xx reply, an HTTP 4xx about the message or its recipients).
	CauseRejected = "rejected"
	// CauseProviderUnavailable: the provider is down, busy or rate
	// limiting: HTTP 429 or 5xx (after any retries), SES throttling, an
	// SMTP 4xx reply.
	CauseProviderUnavailable = "provider_unavailable"
	// CauseConnection: the connection failed or was lost otherwise (reset,
	// closed mid-session).
	CauseConnection = "connection"
	// CauseNoFreeConnection: every connection stayed busy until the wait
	// for one ended (SMTP_MAX_CONNECTIONS, PROVIDER_MAX_CONCURRENCY).
	CauseNoFreeConnection = "no_free_connection"
	// CauseInvalidMessage: the message was refused before anything was
	// sent, as it cannot be written (a line break in a header, a content
	// type with parameters, an SDK's own validation).
	CauseInvalidMessage = "invalid_message"
	// CauseShuttingDown: the provider was closed, the server is stopping.
	CauseShuttingDown = "shutting_down"
	// CauseUnknown: anything else (a provider that panicked, an answer
	// that could not be read).
	CauseUnknown = "unknown"
)

// Causes is the closed list of what Cause returns, for a metric's label
// set and the README's table.
var Causes = []string{
	CauseConnectionRefused, CauseDNS, CauseTimeout, CauseTLS, CauseCredentials, CauseSenderNotVerified,
	CauseRejected, CauseProviderUnavailable, CauseConnection, CauseNoFreeConnection, CauseInvalidMessage,
	CauseShuttingDown, CauseUnknown,
}

// Cause sorts a failed send by what went wrong, for an operator reading the
// log: one of Causes, never "" for a non-nil err. A provider's own errors
// carry their cause, set where the failing step is known; other errors
// are sorted by what they wrap.
func Cause(err error) string {
	if err == nil {
		return ""
	}
	var se *SendError
	if errors.As(err, &se) && se.cause != "" {
		return se.cause
	}
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrProviderClosed) {
		return CauseShuttingDown
	}
	if c := netCause(err); c != "" {
		return c
	}
	if se != nil {
		// A SendError made elsewhere (NewSendError): its code is all
		// there is to go by.
		switch se.Code {
		case 0:
			return CauseUnknown
		case 401, 403, 530, 534, 535, 538:
			return CauseCredentials
		case 429:
			return CauseProviderUnavailable
		}
		return CauseRejected
	}
	return CauseUnknown
}

// netCause is the cause of a failure to talk to the server, or "" when err
// is not one.
func netCause(err error) string {
	var (
		dns       *net.DNSError
		recordErr tls.RecordHeaderError
		alert     tls.AlertError
		verify    *tls.CertificateVerificationError
		invalid   x509.CertificateInvalidError
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		ne        net.Error
	)
	switch {
	case errors.As(err, &dns):
		return CauseDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return CauseConnectionRefused
	case errors.As(err, &recordErr), errors.As(err, &alert), errors.As(err, &verify), errors.As(err, &invalid),
		errors.As(err, &unknownCA), errors.As(err, &hostname):
		return CauseTLS
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return CauseTimeout
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return CauseConnection
	}
	return ""
}

// senderNotVerified reports a refusal whose text says the provider has not
// verified the sender or its domain, in the words each provider documents:
// SendGrid "does not match a verified Sender Identity", Resend "The
// example.com domain is not verified" or "please verify a domain", Mailgun
// "Domain example.com is not allowed to send", Amazon SES "Email address
// is not verified" (also, in the SES sandbox, for a recipient) and its
// MailFromDomainNotVerified error.
func senderNotVerified(text string) bool {
	t := strings.ToLower(text)
	for _, s := range []string{"not verified", "verified sender identity", "verify a domain",
		"is not allowed to send", "domainnotverified"} {
		if strings.Contains(t, s) {
			return true
		}
	}
	return false
}

// DescribeCause words a cause for a log message: "connection refused". An
// unlisted cause is worded as CauseUnknown.
func DescribeCause(cause string) string {
	switch cause {
	case CauseConnectionRefused:
		return "connection refused"
	case CauseDNS:
		return "host name not found (DNS)"
	case CauseTimeout:
		return "no answer in time"
	case CauseTLS:
		return "TLS failed"
	case CauseCredentials:
		return "credentials missing, wrong or without permission"
	case CauseSenderNotVerified:
		return "sender or its domain not verified with the provider"
	case CauseRejected:
		return "refused by the server"
	case CauseProviderUnavailable:
		return "provider unavailable or rate limiting"
	case CauseConnection:
		return "connection failed"
	case CauseNoFreeConnection:
		return "no free connection in time"
	case CauseInvalidMessage:
		return "message cannot be sent as it is"
	case CauseShuttingDown:
		return "server shutting down"
	}
	return "unexpected failure"
}
