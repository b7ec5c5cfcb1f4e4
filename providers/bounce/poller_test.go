package bounce_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"maps"
	"math/big"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/nornweave/nornweave/internal/testkit/imaptest"
	"github.com/nornweave/nornweave/providers/bounce"
	"github.com/nornweave/nornweave/providers/webhook"
)

const (
	imapUser = imaptest.User
	imapPass = imaptest.Password
)

// rev2 is a server with MOVE and UIDPLUS (both part of IMAP4rev2); rev1 a
// server with UIDPLUS but no MOVE.
var (
	rev2 = imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIMAP4rev2: {}}
	rev1 = imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapUIDPlus: {}}
)

// recorder is a Handle that keeps what it is given and fails while fail
// is set.
type recorder struct {
	calls [][]bounce.Bounce
	fail  error
}

func (r *recorder) handle(_ context.Context, b []bounce.Bounce) error {
	if r.fail != nil {
		return r.fail
	}
	r.calls = append(r.calls, b)
	return nil
}

func newPoller(t *testing.T, addr string, rec *recorder) *bounce.Poller {
	t.Helper()
	cfg, err := bounce.ParseIMAPURL("imap://" + imapUser + ":" + imapPass + "@" + addr + "/INBOX?starttls=false")
	if err != nil {
		t.Fatal(err)
	}
	return bounce.NewPoller(bounce.PollerOptions{
		IMAP:   cfg,
		VERP:   newVERP(t),
		Handle: rec.handle,
		Now:    func() time.Time { return now },
	})
}

// The messages of the poller tests, by Message-ID.
const (
	hardID      = "20240514091205.4VfZ1w2Abcz9vQp@mail.example.com"
	delayedID   = "20240520100007.4Vh0Zp3Lq2z9vQr@mail.example.com"
	vacationID  = "vacation-8f2c1e@example.org"
	forgedID    = "forged-1@mail.example.com"
	unrelatedID = "unrelated-1@example.org"
	largeID     = "large-1@example.org"
	processed   = bounce.DefaultProcessed
)

func forgedDSN(t *testing.T) []byte {
	raw := fixture(t, "postfix-hard.eml")
	const tok = "aginlir4jz5y7gqbencwpcnlzvkn3lfe4lefeq2yyylpjnzg"
	raw = bytes.ReplaceAll(raw, []byte(tok), []byte(tok[:30]+"x"+tok[31:]))
	return bytes.ReplaceAll(raw, []byte(hardID), []byte(forgedID))
}

func plainMail(id, body string) []byte {
	return []byte("From: Someone <someone@example.org>\nTo: bounces@example.com\nSubject: hello\nMessage-ID: <" + id +
		">\nDate: Fri, 31 May 2024 08:00:00 +0000\n\n" + body + "\n")
}

func TestPoll(t *testing.T) {
	addr := imaptest.Start(t, rev2, nil, false)
	box := imaptest.Open(t, addr)
	box.Add(fixture(t, "postfix-hard.eml"))
	box.Add(fixture(t, "vacation.eml"))
	box.Add(forgedDSN(t))
	box.Add(fixture(t, "postfix-delayed.eml"))
	box.Add(plainMail(unrelatedID, "Are you a real person?"))
	box.Add(plainMail(largeID, strings.Repeat("0123456789abcdef\n", bounce.MaxDSNSize/17+1)))

	rec := &recorder{}
	p := newPoller(t, addr, rec)
	st, err := p.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := bounce.Stats{Messages: 6, Read: 5, Handled: 2, Events: 2, Ignored: 4}
	if st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}

	if len(rec.calls) != 2 || len(rec.calls[0]) != 1 || len(rec.calls[1]) != 1 {
		t.Fatalf("Handle calls %+v, want two of one bounce each", rec.calls)
	}
	hard, delayed := rec.calls[0][0], rec.calls[1][0]
	if hard.MessageID != msgID || hard.Event.Type != webhook.Bounced || hard.Event.BounceType != webhook.Hard ||
		hard.Event.Recipient != rcpt || hard.Event.SMTPStatus != "5.1.1" {
		t.Errorf("hard bounce %+v", hard)
	}
	if delayed.MessageID != "0190d5a2-3c4e-7b8f-9a01-23456789abd2" || delayed.Event.Type != webhook.Delayed ||
		delayed.Event.BounceType != "" || delayed.Event.Recipient != "slow@greylist.example" || delayed.Event.SMTPStatus != "4.7.1" {
		t.Errorf("delay %+v", delayed)
	}

	// What is not ours is where it was, as it was: not moved, not seen.
	inbox := box.Messages("INBOX")
	if got := slices.Sorted(maps.Keys(inbox)); !slices.Equal(got, []string{forgedID, largeID, unrelatedID, vacationID}) {
		t.Errorf("INBOX holds %q", got)
	}
	for id, flags := range inbox {
		if len(flags) != 0 {
			t.Errorf("%s has flags %v, want none", id, flags)
		}
	}
	if got := slices.Sorted(maps.Keys(box.Messages(processed))); !slices.Equal(got, []string{hardID, delayedID}) {
		t.Errorf("%s holds %q", processed, got)
	}

	// A second pass reads nothing again and handles nothing twice.
	st, err = p.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (bounce.Stats{Messages: 4}); st != want {
		t.Errorf("second pass: stats %+v, want %+v", st, want)
	}
	if len(rec.calls) != 2 {
		t.Errorf("second pass: %d Handle calls in all, want 2", len(rec.calls))
	}

	// A new poller (a restart) reads the others again, and leaves them.
	st, err = newPoller(t, addr, rec).Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (bounce.Stats{Messages: 4, Read: 3, Ignored: 4}); st != want || len(rec.calls) != 2 {
		t.Errorf("after a restart: stats %+v, want %+v; %d Handle calls", st, want, len(rec.calls))
	}
}

// A Handle error leaves the message in the mailbox, unseen, for the next
// pass, which handles it.
func TestPollHandleError(t *testing.T) {
	addr := imaptest.Start(t, rev2, nil, false)
	box := imaptest.Open(t, addr)
	box.Add(fixture(t, "postfix-hard.eml"))

	errDB := errors.New("database is down")
	rec := &recorder{fail: errDB}
	p := newPoller(t, addr, rec)
	st, err := p.Poll(context.Background())
	if !errors.Is(err, errDB) {
		t.Fatalf("Poll: %v, want the Handle error", err)
	}
	if want := (bounce.Stats{Messages: 1, Read: 1, Failed: 1}); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	if flags, ok := box.Messages("INBOX")[hardID]; !ok || len(flags) != 0 {
		t.Fatalf("after the failure: in INBOX %v, flags %v", ok, flags)
	}

	rec.fail = nil
	st, err = p.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (bounce.Stats{Messages: 1, Read: 1, Handled: 1, Events: 1}); st != want || len(rec.calls) != 1 {
		t.Errorf("stats %+v, want %+v; %d Handle calls", st, want, len(rec.calls))
	}
	if n := len(box.Messages("INBOX")); n != 0 {
		t.Errorf("INBOX holds %d messages, want 0", n)
	}
}

// Without MOVE the poller copies, flags and expunges by UID only those it
// handled: a message someone else flagged \Deleted is not expunged with
// them.
func TestPollWithoutMove(t *testing.T) {
	addr := imaptest.Start(t, rev1, nil, false)
	box := imaptest.Open(t, addr)
	box.Add(fixture(t, "postfix-hard.eml"))
	box.Add(plainMail(unrelatedID, "to be deleted by its reader"), imap.FlagDeleted)
	box.Add(fixture(t, "exim-hard.eml"))

	rec := &recorder{}
	st, err := newPoller(t, addr, rec).Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (bounce.Stats{Messages: 2, Read: 2, Handled: 2, Events: 2}); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	inbox := box.Messages("INBOX")
	if len(inbox) != 1 || !slices.Contains(inbox[unrelatedID], imap.FlagDeleted) {
		t.Errorf("INBOX holds %v, want only %s, still flagged deleted", inbox, unrelatedID)
	}
	if n := len(box.Messages(processed)); n != 2 {
		t.Errorf("%s holds %d messages, want 2", processed, n)
	}
}

func TestPollLoginFails(t *testing.T) {
	addr := imaptest.Start(t, rev2, nil, false)
	cfg, err := bounce.ParseIMAPURL("imap://" + imapUser + ":wrong@" + addr + "/?starttls=false")
	if err != nil {
		t.Fatal(err)
	}
	p := bounce.NewPoller(bounce.PollerOptions{IMAP: cfg, VERP: newVERP(t), Handle: (&recorder{}).handle})
	if _, err := p.Poll(context.Background()); err == nil || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("Poll: %v, want a login error without the password", err)
	}
}

// The poller speaks TLS and STARTTLS, checking the server's certificate,
// and does not fall back to clear text when STARTTLS is not offered.
func TestPollTLS(t *testing.T) {
	serverTLS, clientTLS := testCertificate(t)
	for _, tt := range []struct {
		name     string
		scheme   string
		server   *tls.Config
		implicit bool
		ok       bool
	}{
		{"imaps", "imaps", serverTLS, true, true},
		{"starttls", "imap", serverTLS, false, true},
		{"starttls not offered", "imap", nil, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := imaptest.Start(t, rev2, tt.server, tt.implicit)
			cfg, err := bounce.ParseIMAPURL(tt.scheme + "://" + imapUser + ":" + imapPass + "@" + addr)
			if err != nil {
				t.Fatal(err)
			}
			p := bounce.NewPoller(bounce.PollerOptions{IMAP: cfg, TLSConfig: clientTLS, VERP: newVERP(t), Handle: (&recorder{}).handle})
			st, err := p.Poll(context.Background())
			if tt.ok && (err != nil || st != bounce.Stats{}) {
				t.Fatalf("Poll = %+v, %v; want an empty pass", st, err)
			}
			if !tt.ok && err == nil {
				t.Fatal("Poll succeeded without TLS")
			}
		})
	}
}

// Run polls until its context is done and then returns.
func TestRun(t *testing.T) {
	addr := imaptest.Start(t, rev2, nil, false)
	imaptest.Open(t, addr).Add(fixture(t, "postfix-hard.eml"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls int
	cfg, err := bounce.ParseIMAPURL("imap://" + imapUser + ":" + imapPass + "@" + addr + "/?starttls=false")
	if err != nil {
		t.Fatal(err)
	}
	p := bounce.NewPoller(bounce.PollerOptions{IMAP: cfg, VERP: newVERP(t), Handle: func(context.Context, []bounce.Bounce) error {
		calls++
		cancel() // the first pass ends the run; the hour never passes
		return nil
	}})
	p.Run(ctx, time.Hour)
	if calls != 1 {
		t.Fatalf("%d Handle calls, want 1", calls)
	}
}

// A cancelled context ends a pass with its error.
func TestPollCancelled(t *testing.T) {
	addr := imaptest.Start(t, rev2, nil, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := newPoller(t, addr, &recorder{}).Poll(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Poll: %v, want context.Canceled", err)
	}
}

// testCertificate makes a self-signed certificate for 127.0.0.1: the
// server's configuration, and a client's that trusts only it.
func testCertificate(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "imap test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: roots}
}
