package providers

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/internal/testkit/providertest"
)

func TestResendRequest(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	if _, err := NewResend(ResendConfig{APIKey: "k", APIBase: "api.resend.com"}); err == nil {
		t.Error("NewResend with a base without scheme = nil error")
	}
}

// TestResendReplyToIsOneString records a limit of resend-go: its reply_to
// is a single string, so several reply-to addresses travel as one
// RFC 5322 list in it.
func TestResendReplyToIsOneString(t *testing.T) {
	t.Parallel()
	m := fullMessage()
	m.ReplyTo = address.MustParseList("a@acme.test", "B <b@acme.test>")
	if got := resendRequest(m).ReplyTo; got != `a@acme.test, "B" <b@acme.test>` {
		t.Errorf("reply_to = %q", got)
	}
}

// TestResendSendsTheMessagesIdempotencyKey: Resend takes an
// Idempotency-Key and answers a repeat of it with the first answer instead
// of a second email, so every attempt of one message carries the same key,
// and another message another.
func TestResendSendsTheMessagesIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "resend")
	f.Respond(func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			f.Reject(503, "busy", "Retry-After", "1")(w, r, n)
			return
		}
		f.Accept(w, n)
	})
	p := newProvider(t, "resend", f.URL, HTTPConfig{})
	m := fullMessage()
	_, err := p.Send(context.Background(), m)
	if se := mustSendError(t, err); !se.Temporary {
		t.Fatalf("first attempt: got %v, want a temporary failure", err)
	}
	id, err := p.Send(context.Background(), m)
	if err != nil {
		t.Fatalf("second attempt: %v", err)
	}
	other := fullMessage()
	other.MessageID = "<m-2@acme.test>"
	if _, err := p.Send(context.Background(), other); err != nil {
		t.Fatalf("other message: %v", err)
	}
	// Were the first message sent again, Resend would answer with the
	// email it already sent.
	if again, err := p.Send(context.Background(), m); err != nil || again != id {
		t.Errorf("the same message again = %q, %v; want the first answer %q", again, err, id)
	}

	reqs := f.Requests()
	if len(reqs) != 4 {
		t.Fatalf("fake received %d requests, want 4", len(reqs))
	}
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Header.Get("Idempotency-Key")
	}
	if keys[0] != m.MessageID || keys[1] != keys[0] {
		t.Errorf("got keys %q and %q for two attempts of one message, want %q both times", keys[0], keys[1], m.MessageID)
	}
	if keys[2] != other.MessageID {
		t.Errorf("got key %q for another message, want %q", keys[2], other.MessageID)
	}
}

func TestResendIdempotencyKey(t *testing.T) {
	t.Parallel()
	long := "<" + strings.Repeat("a", 300) + "@acme.test>"
	tests := []struct {
		name, messageID string
		wantLen         int // 0: the Message-ID itself
	}{
		{"the Message-ID", "<m-1@acme.test>", 0},
		{"256 characters fit", "<" + strings.Repeat("b", 243) + "@acme.test>", 0},
		{"longer than Resend's 256: its SHA-256", long, 64},
		{"no Message-ID: no key", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resendIdempotencyKey(tt.messageID)
			switch {
			case tt.wantLen == 0 && got != tt.messageID:
				t.Errorf("got key %q, want %q", got, tt.messageID)
			case tt.wantLen != 0 && (len(got) != tt.wantLen || got != resendIdempotencyKey(tt.messageID)):
				t.Errorf("got key %q (%d characters), want a stable one of %d", got, len(got), tt.wantLen)
			}
		})
	}
}

// TestResendIdempotencyConflictIsUnknown: a 409 about the key means a
// request with it was taken (or is being processed): that message may
// have gone out, so it counts and is not retried.
func TestResendIdempotencyConflictIsUnknown(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "resend")
	f.Respond(f.Reject(409, "Same idempotency key used while original request is still in progress"))
	p := newProvider(t, "resend", f.URL, HTTPConfig{})
	_, err := p.Send(context.Background(), fullMessage())
	if se := mustSendError(t, err); !se.Unknown || se.Temporary {
		t.Errorf("got %+v (%q), want unknown", se, se)
	}
}
