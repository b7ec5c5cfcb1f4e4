package providers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/internal/testkit/providertest"
)

func TestSendGridRequest(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "sendgrid")
	p := newProvider(t, "sendgrid", f.URL, HTTPConfig{})
	id, err := p.Send(context.Background(), fullMessage())
	if err != nil || id != f.ID(1) {
		t.Fatalf("Send = %q, %v; want the X-Message-Id %q", id, err, f.ID(1))
	}
	r := f.Requests()[0]
	if r.Method != "POST" || r.Path != "/v3/mail/send" {
		t.Errorf("request %s %s, want POST /v3/mail/send", r.Method, r.Path)
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
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	// The v3 Mail Send body, field by field, as SendGrid documents it.
	want := map[string]any{
		"from":    map[string]any{"name": "Acme Support", "email": "support@acme.test"},
		"subject": "Your order — Grüße",
		"personalizations": []any{map[string]any{
			"to":  []any{map[string]any{"name": "Ann", "email": "ann@customer.test"}},
			"cc":  []any{map[string]any{"email": "cc@customer.test"}},
			"bcc": []any{map[string]any{"email": "audit@acme.test"}},
		}},
		"reply_to": map[string]any{"email": "help@acme.test"},
		"content": []any{
			map[string]any{"type": "text/plain", "value": "Hello **Ann**"},
			map[string]any{"type": "text/html", "value": `<p>Hello <strong>Ann</strong> <img src="cid:logo@acme.test"></p>`},
		},
		"attachments": []any{
			map[string]any{"content": b64("%PDF-1.4 report"), "type": "application/pdf", "filename": "report.pdf", "disposition": "attachment"},
			map[string]any{"content": b64("\x89PNG logo"), "type": "image/png", "filename": "logo.png", "disposition": "inline", "content_id": "logo@acme.test"},
		},
		"headers": map[string]any{"Message-ID": "<m-1@acme.test>", "In-Reply-To": "<parent@acme.test>",
			"References": "<root@acme.test> <parent@acme.test>"},
	}
	if !reflect.DeepEqual(got, any(want)) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("body =\n%s\nwant\n%s", g, w)
	}
}

func TestSendGridSeveralReplyTos(t *testing.T) {
	t.Parallel()
	m := fullMessage()
	m.ReplyTo = address.MustParseList("a@acme.test", "B <b@acme.test>")
	body, err := sendgridBody(m)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ReplyTo     any   `json:"reply_to"`
		ReplyToList []any `json:"reply_to_list"`
	}
	json.Unmarshal(body, &got)
	if got.ReplyTo != nil || len(got.ReplyToList) != 2 {
		t.Errorf("reply_to %v, reply_to_list %v: want the list only", got.ReplyTo, got.ReplyToList)
	}
}
