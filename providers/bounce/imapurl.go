package bounce

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Security is how the poller protects its IMAP connection.
type Security int

// The connection's protection: implicit TLS (imaps://), STARTTLS (imap://,
// the default there, required: a server that does not offer it is an
// error, not a reason to send the password in clear), or none
// (imap://...?starttls=false, for a server on the same host or network).
const (
	TLS Security = iota
	StartTLS
	Plain
)

// String names s as the URL spells it.
func (s Security) String() string {
	switch s {
	case TLS:
		return "imaps"
	case StartTLS:
		return "imap+starttls"
	case Plain:
		return "imap"
	}
	return "Security(" + strconv.Itoa(int(s)) + ")"
}

// DefaultProcessed is the mailbox handled bounces are moved to when the
// URL names none. It is flat (no hierarchy delimiter), so it means the
// same on servers that separate levels with '/' and with '.'.
const DefaultProcessed = "NornWeave-Processed"

// IMAPConfig is the bounce mailbox: where the poller logs in, what it
// reads, and where it moves what it handled. ParseIMAPURL makes one from
// BOUNCE_IMAP_URL.
type IMAPConfig struct {
	Security Security
	// Addr is host:port.
	Addr string
	// Host is the server's name, checked against its TLS certificate.
	Host     string
	Username string
	Password string
	// Mailbox is read for bounces: INBOX unless the URL's path names one.
	Mailbox string
	// Processed receives the handled bounces; created if missing.
	Processed string
}

// ParseIMAPURL reads BOUNCE_IMAP_URL:
//
//	imaps://user:password@host[:993][/mailbox][?move_to=folder]
//	imap://user:password@host[:143][/mailbox][?starttls=false][&move_to=folder]
//
// User and password are percent-encoded as in any URL and both are
// required. The mailbox defaults to INBOX and move_to to
// DefaultProcessed. Unknown query parameters are refused, so that a typo
// is an error at start-up rather than a setting silently ignored. Errors
// never quote the URL, which holds the password.
func ParseIMAPURL(raw string) (IMAPConfig, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return IMAPConfig{}, fmt.Errorf("bounce: IMAP URL does not parse") // err would quote the password
	}
	var c IMAPConfig
	port := ""
	switch strings.ToLower(u.Scheme) {
	case "imaps":
		c.Security, port = TLS, "993"
	case "imap":
		c.Security, port = StartTLS, "143"
	default:
		return IMAPConfig{}, fmt.Errorf("bounce: IMAP URL scheme %q: want imap or imaps", u.Scheme)
	}
	if u.Opaque != "" || u.Fragment != "" {
		return IMAPConfig{}, fmt.Errorf("bounce: IMAP URL: want scheme://user:password@host[:port][/mailbox]")
	}
	c.Host = u.Hostname()
	if c.Host == "" {
		return IMAPConfig{}, fmt.Errorf("bounce: IMAP URL has no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return IMAPConfig{}, fmt.Errorf("bounce: IMAP URL port %q", p)
		}
		port = p
	}
	c.Addr = net.JoinHostPort(c.Host, port)
	if u.User == nil || u.User.Username() == "" {
		return IMAPConfig{}, fmt.Errorf("bounce: IMAP URL has no user")
	}
	c.Username = u.User.Username()
	pw, ok := u.User.Password()
	if !ok || pw == "" {
		return IMAPConfig{}, fmt.Errorf("bounce: IMAP URL has no password")
	}
	c.Password = pw

	c.Mailbox = strings.TrimPrefix(u.Path, "/")
	if c.Mailbox == "" {
		c.Mailbox = "INBOX"
	}
	c.Processed = DefaultProcessed
	for k, v := range u.Query() {
		if len(v) != 1 {
			return IMAPConfig{}, fmt.Errorf("bounce: IMAP URL parameter %q given %d times", k, len(v))
		}
		switch k {
		case "move_to":
			c.Processed = v[0]
		case "starttls":
			b, err := strconv.ParseBool(v[0])
			if err != nil || c.Security == TLS {
				return IMAPConfig{}, fmt.Errorf("bounce: IMAP URL starttls=%q: want true or false, and only with imap://", v[0])
			}
			if !b {
				c.Security = Plain
			}
		default:
			return IMAPConfig{}, fmt.Errorf("bounce: IMAP URL parameter %q: want move_to or starttls", k)
		}
	}
	for _, m := range []struct{ what, name string }{{"mailbox", c.Mailbox}, {"move_to", c.Processed}} {
		if err := checkMailbox(m.name); err != nil {
			return IMAPConfig{}, fmt.Errorf("bounce: IMAP URL %s %q: %w", m.what, m.name, err)
		}
	}
	if strings.EqualFold(c.Mailbox, c.Processed) {
		return IMAPConfig{}, fmt.Errorf("bounce: IMAP URL: move_to %q is the mailbox read", c.Processed)
	}
	return c, nil
}

// checkMailbox refuses what would not name one mailbox: LIST wildcards,
// control characters, an empty name.
func checkMailbox(name string) error {
	if name == "" || len(name) > 255 {
		return fmt.Errorf("want 1 to 255 bytes")
	}
	for _, c := range name {
		if c < 0x20 || c == 0x7f || c == '*' || c == '%' {
			return fmt.Errorf("must not contain control characters, '*' or '%%'")
		}
	}
	return nil
}
