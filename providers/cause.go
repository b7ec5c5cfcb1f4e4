package providers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"syscall"
)

// Causes of a failed send, as Cause names them in logs and metrics.
const (
	CauseConnectionRefused = "connection_refused"
	CauseDNS               = "dns"
	CauseTimeout           = "timeout"
	CauseTLS               = "tls"
	CauseAuth              = "auth"
	CauseRejected          = "rejected"   // the server answered and refused the message
	CauseConnection        = "connection" // the connection failed or was lost otherwise
	CauseUnknown           = "unknown"
)

// Cause sorts a failed send by what went wrong, for an operator reading the
// log: the server could not be found (dns), was not listening
// (connection_refused), did not answer in time, the TLS handshake or the
// credentials failed, or the server refused the message. It never returns
// "" for a non-nil err.
func Cause(err error) string {
	if err == nil {
		return ""
	}
	var se *SendError
	if errors.As(err, &se) && se.cause != "" {
		return se.cause
	}
	var dns *net.DNSError
	var recordErr tls.RecordHeaderError
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case errors.As(err, &dns):
		return CauseDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return CauseConnectionRefused
	case errors.As(err, &recordErr), errors.As(err, &alert), errors.As(err, &verify),
		errors.As(err, &unknownAuth), errors.As(err, &hostname):
		return CauseTLS
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return CauseTimeout
	}
	if se != nil {
		switch {
		case se.Code == 401 || se.Code == 403 || se.Code == 535 || se.Code == 530:
			return CauseAuth
		case se.Code != 0:
			return CauseRejected
		}
		return CauseConnection
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return CauseConnection
	}
	return CauseUnknown
}

// Check connects to the SMTP server, secures and authenticates the session
// as a send would, and says goodbye, sending no message: nornweave check
// uses it to prove the configuration before the server runs.
func (p *SMTP) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	c, err := p.dial(ctx)
	if err != nil {
		return err
	}
	p.quit(c)
	return nil
}

// DescribeCause words a cause for a log message: "connection refused".
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
	case CauseAuth:
		return "authentication failed"
	case CauseRejected:
		return "refused by the server"
	}
	return "connection failed"
}
