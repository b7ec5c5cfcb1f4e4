package providers

import (
	"context"
	"encoding/base64"
	"mime"
	"slices"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/internal/testkit/providertest"
)

func TestMailgunRequest(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "mailgun")
	p := newProvider(t, "mailgun", f.URL, HTTPConfig{})
	id, err := p.Send(context.Background(), fullMessage())
	if err != nil || id != f.ID(1) {
		t.Fatalf("Send = %q, %v; want %q", id, err, f.ID(1))
	}
	r := f.Requests()[0]
	if r.Method != "POST" || r.Path != "/v3/mg.acme.test/messages.mime" {
		t.Errorf("request %s %s, want POST /v3/mg.acme.test/messages.mime", r.Method, r.Path)
	}
	if got, want := r.Header.Get("Authorization"), "Basic "+base64.StdEncoding.EncodeToString([]byte("api:"+testAPIKey)); got != want {
		t.Errorf("Authorization = %q, want %q", got, want)
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "multipart/form-data" {
		t.Errorf("Content-Type = %q, want multipart/form-data", r.Header.Get("Content-Type"))
	}
	sent := f.Message(t, 0)
	// The MIME endpoint's "to" is the envelope: Bcc is there, and only there.
	if want := []string{"ann@customer.test", "cc@customer.test", "audit@acme.test"}; !slices.Equal(sent.Envelope, want) {
		t.Errorf("to fields = %v, want %v", sent.Envelope, want)
	}
	checkMIME(t, sent)
}

// checkMIME checks that the raw MIME a provider handed over carries the
// whole of fullMessage.
func checkMIME(t *testing.T, sent providertest.Sent) {
	t.Helper()
	m := sent.MIME
	if m.ParseErr != nil {
		t.Fatalf("MIME does not parse: %v\n%s", m.ParseErr, m.Data)
	}
	for header, want := range map[string]string{
		"From": "support@acme.test", "To": "ann@customer.test", "Cc": "cc@customer.test",
		"Reply-To": "help@acme.test", "Message-Id": "<m-1@acme.test>", "In-Reply-To": "<parent@acme.test>",
		"References": "<root@acme.test> <parent@acme.test>", "Date": "1 Mar 2026",
	} {
		if got := m.Header.Get(header); !strings.Contains(got, want) {
			t.Errorf("header %s = %q, want it to contain %q", header, got, want)
		}
	}
	if !strings.Contains(m.Header.Get("From"), "Acme Support") {
		t.Errorf("From = %q, want the display name", m.Header.Get("From"))
	}
	if bcc := m.Header.Get("Bcc"); bcc != "" || strings.Contains(string(m.Data), "audit@acme.test") {
		t.Errorf("the Bcc recipient is visible in the MIME (Bcc header %q)", bcc)
	}
	if subject, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject")); subject != "Your order — Grüße" {
		t.Errorf("Subject = %q", subject)
	}
	if m.Text != "Hello **Ann**" || !strings.Contains(m.HTML, "<strong>Ann</strong>") {
		t.Errorf("text %q, html %q", m.Text, m.HTML)
	}
	if len(m.Attachments) != 2 {
		t.Fatalf("got %d attachments, want 2: %+v", len(m.Attachments), m.Attachments)
	}
	for _, a := range m.Attachments {
		switch a.Filename {
		case "report.pdf":
			if a.Disposition != "attachment" || a.ContentType != "application/pdf" || string(a.Content) != "%PDF-1.4 report" {
				t.Errorf("report.pdf = %+v", a)
			}
		case "logo.png":
			if a.Disposition != "inline" || a.ContentID != "logo@acme.test" || string(a.Content) != "\x89PNG logo" {
				t.Errorf("logo.png = %+v, want inline with its Content-ID", a)
			}
		default:
			t.Errorf("unexpected attachment %+v", a)
		}
	}
}

func TestMailgunAPIBase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                            "https://api.mailgun.net/v3",
		"https://api.eu.mailgun.net":  "https://api.eu.mailgun.net/v3",
		"https://api.eu.mailgun.net/": "https://api.eu.mailgun.net/v3",
		"https://gw.internal/mg/v3/":  "https://gw.internal/mg/v3",
	} {
		if got := mailgunAPIBase(in); got != want {
			t.Errorf("mailgunAPIBase(%q) = %q, want %q", in, got, want)
		}
	}
}
