package providers

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/internal/providertest"
)

func TestResendRequest(t *testing.T) {
	f := providertest.Start(t, "resend")
	p := newProvider(t, "resend", f.URL+"/", HTTPConfig{})
	id, err := p.Send(context.Background(), fullMessage())
	if err != nil || id != f.ID(1) {
		t.Fatalf("Send = %q, %v; want %q", id, err, f.ID(1))
	}
	r := f.Requests()[0]
	if r.Method != "POST" || r.Path != "/emails" {
		t.Errorf("request %s %s, want POST /emails", r.Method, r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testAPIKey {
		t.Errorf("Authorization = %q", got)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	var got any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	// resend-go sends attachment content as an array of bytes ("a
	// buffer" in Resend's documentation), inline parts with content_id.
	bytesOf := func(s string) []any {
		out := []any{}
		for _, b := range []byte(s) {
			out = append(out, float64(b))
		}
		return out
	}
	want := map[string]any{
		"from":     "\"Acme Support\" <support@acme.test>",
		"to":       []any{`"Ann" <ann@customer.test>`},
		"cc":       []any{"cc@customer.test"},
		"bcc":      []any{"audit@acme.test"},
		"reply_to": "help@acme.test",
		"subject":  "Your order — Grüße",
		"text":     "Hello **Ann**",
		"html":     `<p>Hello <strong>Ann</strong> <img src="cid:logo@acme.test"></p>`,
		"headers": map[string]any{"Message-ID": "<m-1@acme.test>", "In-Reply-To": "<parent@acme.test>",
			"References": "<root@acme.test> <parent@acme.test>"},
		"attachments": []any{
			map[string]any{"content": bytesOf("%PDF-1.4 report"), "filename": "report.pdf", "content_type": "application/pdf"},
			map[string]any{"content": bytesOf("\x89PNG logo"), "filename": "logo.png", "content_type": "image/png", "content_id": "logo@acme.test"},
		},
	}
	if !reflect.DeepEqual(got, any(want)) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("body =\n%s\nwant\n%s", g, w)
	}
}

func TestResendRejectsABadBase(t *testing.T) {
	if _, err := NewResend(ResendConfig{APIKey: "k", APIBase: "api.resend.com"}); err == nil {
		t.Error("NewResend with a base without scheme = nil error")
	}
}

// TestResendReplyToIsOneString records a limit of resend-go: its reply_to
// is a single string, so several reply-to addresses travel as one
// RFC 5322 list in it.
func TestResendReplyToIsOneString(t *testing.T) {
	m := fullMessage()
	m.ReplyTo = address.MustParseList("a@acme.test", "B <b@acme.test>")
	if got := resendRequest(m).ReplyTo; got != `a@acme.test, "B" <b@acme.test>` {
		t.Errorf("reply_to = %q", got)
	}
}
