// Package imaptest serves an in-memory IMAP mailbox (go-imap's
// imapmemserver) on loopback, and reads and fills it as a test's own
// client: the bounce mailbox of providers/bounce's poller and of the
// end-to-end tests.
package imaptest

import (
	"bytes"
	"crypto/tls"
	"io"
	"log"
	"net"
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
)

// The one user of a Start server.
const (
	User     = "bounces"
	Password = "s3cret"
)

// Start serves an in-memory mailbox (INBOX only) on loopback, in
// clear unless tlsConfig is given (then STARTTLS, or implicit TLS if
// implicit).
func Start(t testing.TB, caps imap.CapSet, tlsConfig *tls.Config, implicit bool) string {
	t.Helper()
	mem := imapmemserver.New()
	user := imapmemserver.NewUser(User, Password)
	if err := user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(user)
	opts := &imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps:         caps,
		InsecureAuth: tlsConfig == nil,
		Logger:       log.New(io.Discard, "", 0),
	}
	if !implicit {
		opts.TLSConfig = tlsConfig
	}
	srv := imapserver.New(opts)
	var (
		ln  net.Listener
		err error
	)
	if implicit {
		ln, err = tls.Listen("tcp", "127.0.0.1:0", tlsConfig)
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		<-done // nil, or "server closed" if Close came first: neither matters
	})
	return ln.Addr().String()
}

// Mailbox is the test's own view of the server, beside the code's under
// test.
type Mailbox struct {
	t testing.TB
	c *imapclient.Client
}

// Open logs in to the server at addr as User.
func Open(t testing.TB, addr string) *Mailbox {
	t.Helper()
	c, err := imapclient.DialInsecure(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Login(User, Password).Wait(); err != nil {
		t.Fatal(err)
	}
	return &Mailbox{t: t, c: c}
}

// Add appends raw (LF or CRLF) to INBOX with flags.
func (m *Mailbox) Add(raw []byte, flags ...imap.Flag) {
	m.t.Helper()
	raw = bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
	cmd := m.c.Append("INBOX", int64(len(raw)), &imap.AppendOptions{Flags: flags})
	if _, err := cmd.Write(raw); err != nil {
		m.t.Fatal(err)
	}
	if err := cmd.Close(); err != nil {
		m.t.Fatal(err)
	}
	if _, err := cmd.Wait(); err != nil {
		m.t.Fatal(err)
	}
}

// Messages lists mailbox name's messages by Message-ID, with their flags.
func (m *Mailbox) Messages(name string) map[string][]imap.Flag {
	m.t.Helper()
	sel, err := m.c.Select(name, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		m.t.Fatalf("select %s: %v", name, err)
	}
	out := map[string][]imap.Flag{}
	if sel.NumMessages == 0 {
		return out
	}
	var all imap.SeqSet
	all.AddRange(1, 0) // 1:*
	msgs, err := m.c.Fetch(all, &imap.FetchOptions{Envelope: true, Flags: true}).Collect()
	if err != nil {
		m.t.Fatal(err)
	}
	for _, msg := range msgs {
		out[msg.Envelope.MessageID] = msg.Flags
	}
	return out
}
