package providers

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// classify sorts a failed call into exactly one kind of SendError. Only
// what says "not taken" is temporary: a 429 or a 503, a failure before the
// request was written; what may have been taken is unknown: a 2xx without
// a readable id, any other 5xx to a written request, a written request
// with no answer.
func (b *httpBase) classify(a *attempt, err error, detail string) *SendError {
	se := &SendError{Code: a.status, Err: err}
	switch code := a.status; {
	case code/100 == 2:
		// Accepted, but the answer could not be read: it may go out.
		se.Unknown, se.cause = true, CauseUnknown
		se.msg = fmt.Sprintf("%s: accepted (%d) but the answer was unreadable, it may have been delivered", b.name, code)
	case code == http.StatusTooManyRequests:
		se.Temporary, se.cause = true, CauseProviderUnavailable
		se.RetryAfter = parseRetryAfter(a.header.Get("Retry-After"), b.now())
		se.msg = fmt.Sprintf("%s: rate limited by the provider (429)", b.name)
		if se.RetryAfter > 0 {
			se.msg += fmt.Sprintf(", retry after %s", se.RetryAfter)
		}
		se.msg += ": " + detail
	case code == http.StatusServiceUnavailable:
		// 503 says the service did not take the request.
		se.Temporary, se.cause = true, CauseProviderUnavailable
		se.RetryAfter = parseRetryAfter(a.header.Get("Retry-After"), b.now())
		se.msg = fmt.Sprintf("%s: the provider is unavailable (503)", b.name)
		if se.RetryAfter > 0 {
			se.msg += fmt.Sprintf(", retry after %s", se.RetryAfter)
		}
		se.msg += ": " + detail
	case code >= 500 && !a.wrote.Load():
		// Answered before the request was written to its end: a message
		// the provider did not read whole cannot have been taken.
		se.Temporary, se.cause = true, CauseProviderUnavailable
		se.RetryAfter = parseRetryAfter(a.header.Get("Retry-After"), b.now())
		se.msg = fmt.Sprintf("%s: provider error (%d) before the message was sent: %s", b.name, code, detail)
	case code >= 500:
		// Any other 5xx to a whole request may come after the provider
		// took the message: a gateway's 502 or 504 in front of a backend
		// that queued it, a 500 after the queueing. A retry could send it
		// twice, so it counts and is not retried.
		se.Unknown, se.cause = true, CauseProviderUnavailable
		se.msg = fmt.Sprintf("%s: provider error (%d) after the message was sent, it may have been delivered: %s",
			b.name, code, detail)
	case code/100 == 4 && senderNotVerified(detail):
		// Not the key's fault: a 403 (SES: 400) whose text says the
		// sender or its domain is not verified with the provider.
		se.cause = CauseSenderNotVerified
		se.msg = fmt.Sprintf("%s: rejected (%d): %s (verify the sender address or its domain with the provider)",
			b.name, code, detail)
	case code == http.StatusUnauthorized:
		se.cause = CauseCredentials
		se.msg = fmt.Sprintf("%s: rejected (%d): %s (check %s)", b.name, code, detail, b.keyVar)
	case code == http.StatusForbidden:
		se.cause = CauseCredentials
		se.msg = fmt.Sprintf("%s: rejected (%d): %s (check %s and its permissions)", b.name, code, detail, b.keyVar)
	case code != 0:
		se.cause = CauseRejected
		se.msg = fmt.Sprintf("%s: rejected (%d): %s", b.name, code, detail)
	case a.requests.Load() == 0:
		// The SDK refused the message before any request: retrying the
		// same message cannot help.
		se.cause = CauseInvalidMessage
		se.msg = fmt.Sprintf("%s: not sent: %s", b.name, detail)
	case !a.wrote.Load():
		se.Temporary, se.cause = true, transportCause(err)
		se.msg = fmt.Sprintf("%s: could not reach the API: %s", b.name, netReason(err, b.timeout))
	default:
		se.Unknown, se.cause = true, transportCause(err)
		se.msg = fmt.Sprintf("%s: no answer after the message was sent (%s), it may have been delivered",
			b.name, netReason(err, b.timeout))
	}
	return se
}

// transportCause is the cause of a request that got no answer.
func transportCause(err error) string {
	if c := netCause(err); c != "" {
		return c
	}
	return CauseConnection
}

// netReason words a transport failure without the address or URL, which
// the user cannot act on and which may name a private gateway.
func netReason(err error, timeout time.Duration) string {
	var dns *net.DNSError
	var op *net.OpError
	var cert *tls.CertificateVerificationError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "timed out after " + timeout.String()
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &dns):
		return "cannot resolve the API host"
	case errors.As(err, &cert):
		return "TLS certificate not trusted"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by the server"
	case errors.As(err, &op):
		return op.Err.Error()
	}
	return "connection failed"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// parseRetryAfter reads a Retry-After value in seconds or as an HTTP-date;
// 0 when absent, unreadable or in the past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil || !t.After(now) {
		return 0
	}
	return t.Sub(now).Round(time.Second)
}

// apiDetail is the human part of a JSON error answer in the shapes the
// providers use ({"message"}, {"Message"}, {"errors": [{"message"}]},
// {"error"}), else the status text. It is cut short and kept on one line.
func apiDetail(a *attempt) string {
	var body struct {
		Message  string `json:"message"`
		MessageU string `json:"Message"`
		Error    any    `json:"error"`
		Errors   []struct {
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"errors"`
	}
	var parts []string
	if json.Unmarshal(a.body, &body) == nil {
		for _, e := range body.Errors {
			if e.Message != "" {
				parts = append(parts, e.Message)
			}
		}
		if s, ok := body.Error.(string); ok && s != "" {
			parts = append(parts, s)
		}
		for _, s := range []string{body.Message, body.MessageU} {
			if s != "" {
				parts = append(parts, s)
			}
		}
	}
	s := strings.Join(parts, "; ")
	if s == "" {
		if t := strings.TrimSpace(string(a.body)); t != "" && !strings.HasPrefix(t, "<") && len(t) < 200 {
			s = t // a short plain-text answer, not an HTML page
		} else {
			s = http.StatusText(a.status)
		}
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
