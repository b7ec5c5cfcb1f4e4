package providers

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"mime"
	netmail "net/mail"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// These tests talk SMTP to a real in-process server (internal/smtptest).

func newTestSMTP(t *testing.T, s *smtptest.Server, edit func(*SMTPConfig)) *SMTP {
	t.Helper()
	cfg := SMTPConfig{Host: s.Host(), Port: s.Port(), Timeout: 5 * time.Second, HELO: "client.test"}
	if edit != nil {
		edit(&cfg)
	}
	p, err := NewSMTP(cfg)
	if err != nil {
		t.Fatalf("NewSMTP: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func simpleMessage(n int) Message {
	return Message{
		MessageID: fmt.Sprintf("<msg-%d@example.com>", n),
		Date:      time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		From:      "inbox@example.com",
		To:        address.MustParseList("to@example.org"),
		Subject:   fmt.Sprintf("message %d", n),
		Text:      "hello",
		HTML:      "<p>hello</p>",
	}
}

func mustSend(t *testing.T, p *SMTP, m Message) {
	t.Helper()
	id, err := p.Send(context.Background(), m)
	if err != nil {
		t.Fatalf("Send %s: %v", m.MessageID, err)
	}
	if id != m.MessageID {
		t.Fatalf("got provider id %q, want %q", id, m.MessageID)
	}
}

func addresses(t *testing.T, h netmail.Header, key string) []string {
	t.Helper()
	list, err := h.AddressList(key)
	if err != nil {
		t.Fatalf("%s header %q: %v", key, h.Get(key), err)
	}
	var out []string
	for _, a := range list {
		out = append(out, a.Name+" <"+a.Address+">")
	}
	return out
}
func TestSMTPSendMessage(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	p := newTestSMTP(t, s, nil)
	const greeting = "Grüße — ✓"
	m := Message{
		MessageID: "<0d9c3a52-1b7e-4f0a-9a57-5cf0e3c2a1b4@example.com>",
		Date:      time.Date(2025, 3, 1, 12, 30, 15, 0, time.FixedZone("CET", 3600)),
		From:      "inbox@example.com",
		FromName:  "Support Team",
		To:        address.MustParseList("a@example.org", "Bea Ünal <b@example.org>"),
		Cc:        address.MustParseList("c@example.org"),
		Bcc:       address.MustParseList("hidden@example.org"),
		ReplyTo:   address.MustParseList("replies@example.com"),
		Subject:   greeting,
		Text:      greeting + "\nsecond line",
		HTML:      "<p>" + greeting + "</p>",
	}
	mustSend(t, p, m)

	got := s.Messages()
	if len(got) != 1 {
		t.Fatalf("got %d messages, want 1", len(got))
	}
	g := got[0]
	if g.ParseErr != nil {
		t.Fatalf("message does not parse: %v\n%s", g.ParseErr, g.Data)
	}
	wantRcpt := []string{"a@example.org", "b@example.org", "c@example.org", "hidden@example.org"}
	if g.From != m.From || !slices.Equal(g.To, wantRcpt) {
		t.Errorf("got envelope %s → %v, want %s → %v", g.From, g.To, m.From, wantRcpt)
	}

	headers := []struct{ name, got, want string }{
		{"From", strings.Join(addresses(t, g.Header, "From"), ","), "Support Team <inbox@example.com>"},
		{"To", strings.Join(addresses(t, g.Header, "To"), ","), " <a@example.org>,Bea Ünal <b@example.org>"},
		{"Cc", strings.Join(addresses(t, g.Header, "Cc"), ","), " <c@example.org>"},
		{"Reply-To", strings.Join(addresses(t, g.Header, "Reply-To"), ","), " <replies@example.com>"},
		{"Message-Id", g.Header.Get("Message-Id"), m.MessageID},
		{"Bcc", g.Header.Get("Bcc"), ""},
	}
	for _, h := range headers {
		if h.got != h.want {
			t.Errorf("header %s: got %q, want %q", h.name, h.got, h.want)
		}
	}
	var dec mime.WordDecoder
	if subject, err := dec.DecodeHeader(g.Header.Get("Subject")); err != nil || subject != greeting {
		t.Errorf("got Subject %q (%v), want %q", subject, err, greeting)
	}
	if date, err := g.Header.Date(); err != nil || !date.Equal(m.Date) {
		t.Errorf("got Date %v (%v), want %v", date, err, m.Date)
	}
	if mt, _, _ := mime.ParseMediaType(g.Header.Get("Content-Type")); mt != "multipart/alternative" {
		t.Errorf("got Content-Type %q, want multipart/alternative", mt)
	}
	if g.Text != m.Text {
		t.Errorf("got text %q, want %q", g.Text, m.Text)
	}
	if g.HTML != m.HTML {
		t.Errorf("got HTML %q, want %q", g.HTML, m.HTML)
	}
	if len(g.Attachments) != 0 {
		t.Errorf("got %d attachments, want 0", len(g.Attachments))
	}
}

func TestSMTPTextOnly(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	m := simpleMessage(1)
	m.HTML = ""
	mustSend(t, newTestSMTP(t, s, nil), m)

	g := s.Messages()[0]
	if mt, _, _ := mime.ParseMediaType(g.Header.Get("Content-Type")); mt != "text/plain" {
		t.Errorf("got Content-Type %q, want text/plain", mt)
	}
	// A single-part body ends with the line break SMTP's "." line needs.
	if g.Text != m.Text+"\n" || g.HTML != "" {
		t.Errorf("got text %q and HTML %q, want %q and none", g.Text, g.HTML, m.Text)
	}
}

func TestSMTPReplyHeaders(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	m := simpleMessage(1)
	m.InReplyTo = "<parent-5b0e9f8e-8f43-4c54-a3a5-0f1f6b2f9c11@example.com>"
	// Long enough that the header is folded over several lines.
	m.References = []string{
		"<root-1c1b7f2a-6bb0-4c3e-9d55-7a0f0e9f2e33@example.com>",
		"<mid-8e4f5b1c-2d3a-4b6c-8e7f-9a0b1c2d3e4f@example.org>",
		m.InReplyTo,
	}
	mustSend(t, newTestSMTP(t, s, nil), m)

	g := s.Messages()[0]
	if got := g.Header.Get("In-Reply-To"); got != m.InReplyTo {
		t.Errorf("got In-Reply-To %q, want %q", got, m.InReplyTo)
	}
	if got, want := g.Header.Get("References"), strings.Join(m.References, " "); got != want {
		t.Errorf("got References %q, want %q", got, want)
	}
}

func TestSMTPAttachments(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	binary := make([]byte, 300)
	for i := range binary {
		binary[i] = byte(i)
	}
	m := simpleMessage(1)
	m.HTML = `<p>logo: <img src="cid:logo"></p>`
	m.Attachments = []Attachment{
		{Filename: "report.pdf", ContentType: "application/pdf", Content: binary},
		{Filename: "logo.png", ContentType: "image/png", Content: []byte("\x89PNG fake"), Inline: true, ContentID: "logo"},
	}
	mustSend(t, newTestSMTP(t, s, nil), m)

	g := s.Messages()[0]
	if g.Text != m.Text || g.HTML != m.HTML {
		t.Errorf("got text %q and HTML %q, want %q and %q", g.Text, g.HTML, m.Text, m.HTML)
	}
	want := map[string]smtptest.Part{
		"report.pdf": {Filename: "report.pdf", ContentType: "application/pdf", Disposition: "attachment", Content: binary},
		"logo.png":   {Filename: "logo.png", ContentType: "image/png", Disposition: "inline", ContentID: "logo", Content: m.Attachments[1].Content},
	}
	if len(g.Attachments) != len(want) {
		t.Fatalf("got %d attachments, want %d", len(g.Attachments), len(want))
	}
	for _, a := range g.Attachments {
		w, ok := want[a.Filename]
		if !ok {
			t.Errorf("unexpected attachment %q", a.Filename)
			continue
		}
		if a.ContentType != w.ContentType || a.Disposition != w.Disposition || a.ContentID != w.ContentID {
			t.Errorf("%s: got type %q disposition %q cid %q, want %q %q %q", a.Filename,
				a.ContentType, a.Disposition, a.ContentID, w.ContentType, w.Disposition, w.ContentID)
		}
		if !bytes.Equal(a.Content, w.Content) {
			t.Errorf("%s: content differs: got %d bytes, want %d", a.Filename, len(a.Content), len(w.Content))
		}
	}
}

func TestSMTPRejectsLineBreaksInHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*Message)
	}{
		{"subject", func(m *Message) { m.Subject = "hi\r\nBcc: victim@example.org" }},
		{"to", func(m *Message) { m.To = []address.Address{{Local: "a", Domain: "example.org\nX: y"}} }},
		{"from name", func(m *Message) { m.FromName = "x\ry" }},
		{"in-reply-to", func(m *Message) { m.InReplyTo = "<a@b>\r\nX: y" }},
		{"references", func(m *Message) { m.References = []string{"<a@b>", "<c@d>\n"} }},
		{"attachment filename", func(m *Message) {
			m.Attachments = []Attachment{{Filename: "a\r\n.txt", Content: []byte("x")}}
		}},
	}
	s := smtptest.Start(t)
	p := newTestSMTP(t, s, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := simpleMessage(1)
			tt.edit(&m)
			if _, err := p.Send(context.Background(), m); err == nil || !strings.Contains(err.Error(), "line break") {
				t.Errorf("got error %v, want one about a line break", err)
			}
		})
	}
	if got := s.Connections(); got != 0 {
		t.Errorf("got %d connections, want 0: nothing should be dialed for an invalid message", got)
	}
}
func TestSMTPGeneratesMissingMessageID(t *testing.T) {
	t.Parallel()
	s := smtptest.Start(t)
	m := simpleMessage(1)
	m.MessageID = ""
	id, err := newTestSMTP(t, s, nil).Send(context.Background(), m)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := s.Messages()[0].Header.Get("Message-Id"); id == "" || got != id {
		t.Errorf("got provider id %q and header %q, want the same non-empty value", id, got)
	}
}

func TestNewSMTP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                    string
		cfg                     SMTPConfig
		wantErr                 bool
		wantAddr                string
		wantStartTLS, wantSMTPS bool
	}{
		{"defaults", SMTPConfig{Host: "mail.example.com", UseTLS: true}, false, "mail.example.com:587", true, false},
		{"port 465 is implicit TLS", SMTPConfig{Host: "h", Port: 465, UseTLS: true}, false, "h:465", false, true},
		{"forced implicit TLS", SMTPConfig{Host: "h", Port: 2465, ImplicitTLS: true}, false, "h:2465", false, true},
		{"plain", SMTPConfig{Host: "h", Port: 25}, false, "h:25", false, false},
		{"IPv6 literal", SMTPConfig{Host: "::1", Port: 25}, false, "[::1]:25", false, false},
		{"bracketed IPv6 literal", SMTPConfig{Host: "[::1]", Port: 25}, false, "[::1]:25", false, false},
		{"no host", SMTPConfig{}, true, "", false, false},
		{"host with a space", SMTPConfig{Host: "a b"}, true, "", false, false},
		{"port too big", SMTPConfig{Host: "h", Port: 70000}, true, "", false, false},
		{"negative port", SMTPConfig{Host: "h", Port: -1}, true, "", false, false},
		{"negative MaxConns", SMTPConfig{Host: "h", MaxConns: -1}, true, "", false, false},
		{"password without username", SMTPConfig{Host: "h", Password: "x"}, true, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Logger = slog.New(slog.DiscardHandler)
			p, err := NewSMTP(tt.cfg)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got no error, want one")
				}
				return
			}
			if err != nil {
				t.Fatalf("NewSMTP: %v", err)
			}
			defer p.Close()
			if p.addr != tt.wantAddr || p.startTLS != tt.wantStartTLS || p.implicitTLS != tt.wantSMTPS {
				t.Errorf("got addr %s starttls %v implicit %v, want %s %v %v",
					p.addr, p.startTLS, p.implicitTLS, tt.wantAddr, tt.wantStartTLS, tt.wantSMTPS)
			}
			if p.Name() != "smtp" {
				t.Errorf("got Name %q, want smtp", p.Name())
			}
		})
	}
}
