package webhook_test

import (
	"testing"
	"unicode/utf8"

	wh "github.com/nornweave/nornweave/providers/webhook"
)

// The parsers read bodies a provider signed, but a signed body is still
// input: whatever it holds, a parser answers events that can be stored
// (an id, a known type, a message, a recipient, a bounded diagnostic) or
// an error, and never panics.

func checkEvents(t *testing.T, events []wh.Event) {
	t.Helper()
	types := map[string]bool{wh.Delivered: true, wh.Bounced: true, wh.Complained: true, wh.Delayed: true,
		wh.Failed: true, wh.Opened: true, wh.Clicked: true, wh.Suppressed: true}
	for _, e := range events {
		switch {
		case !types[e.Type]:
			t.Fatalf("event type %q", e.Type)
		case e.ID == "" || e.ProviderMessageID == "":
			t.Fatalf("event without its id or message: %+v", e)
		case e.Type == wh.Bounced && e.BounceType != wh.Hard && e.BounceType != wh.Soft:
			t.Fatalf("bounce type %q", e.BounceType)
		case len(e.Diagnostic) > 1000 || !utf8.ValidString(e.Diagnostic):
			t.Fatalf("diagnostic of %d bytes, valid UTF-8 %v", len(e.Diagnostic), utf8.ValidString(e.Diagnostic))
		}
	}
}

func FuzzParseResend(f *testing.F) {
	f.Add([]byte(resendBounced))
	f.Fuzz(func(t *testing.T, body []byte) {
		events, err := wh.ParseResend("id", body)
		if err == nil {
			checkEvents(t, events)
		}
	})
}

func FuzzParseSendGrid(f *testing.F) {
	f.Add([]byte(sendgridBatch))
	f.Fuzz(func(t *testing.T, body []byte) {
		events, err := wh.ParseSendGrid(body)
		if err == nil {
			checkEvents(t, events)
		}
	})
}

func FuzzParseMailgun(f *testing.F) {
	f.Add([]byte(mailgunFailed))
	f.Fuzz(func(t *testing.T, body []byte) {
		events, err := wh.ParseMailgun(body)
		if err == nil {
			checkEvents(t, events)
		}
	})
}

func FuzzParseSES(f *testing.F) {
	f.Add(sesBounce)
	f.Fuzz(func(t *testing.T, message string) {
		events, err := wh.ParseSES("id", message)
		if err == nil {
			checkEvents(t, events)
		}
	})
}
