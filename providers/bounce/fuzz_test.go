package bounce_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/nornweave/nornweave/providers/bounce"
	"github.com/nornweave/nornweave/providers/webhook"
)

// Anyone can send mail to the bounce mailbox, so a notification is
// hostile input. Whatever it holds, ParseDSN answers a bounded report or
// one of its errors, Attribute answers storable events or says why not,
// and neither panics.
func FuzzParseDSN(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.eml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("fixtures: %v, %d files", err, len(files))
	}
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	v := newVERP(f)
	rp := returnPath(f, v, msgID, rcpt)
	f.Add(dsn(rp, "Reporting-MTA: dns; x\n\nFinal-Recipient: rfc822; "+rcpt+"\nAction: failed\nStatus: 5.1.1\n"+
		"Diagnostic-Code: smtp; 550 5.1.1 no such user\n\nFinal-Recipient: rfc822; "+rcpt+"\nAction: delayed\nStatus: 4.4.1\n"))
	f.Add(dsn(rp, "Final-Recipient: rfc822; other@example.org\nOriginal-Recipient: rfc822; "+rcpt+"\nAction: delivered\nStatus: 2.0.0\n"))

	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := bounce.ParseDSN(raw)
		if err != nil {
			if !errors.Is(err, bounce.ErrNotDSN) && !errors.Is(err, bounce.ErrTooLarge) {
				t.Fatalf("ParseDSN error of no kind: %v", err)
			}
		} else {
			checkReport(t, r)
		}

		bounces, err := v.Attribute(raw, now)
		if err != nil {
			if !errors.Is(err, bounce.ErrNotDSN) && !errors.Is(err, bounce.ErrTooLarge) && !errors.Is(err, bounce.ErrUnattributed) {
				t.Fatalf("Attribute error of no kind: %v", err)
			}
			if bounces != nil {
				t.Fatalf("Attribute answered %d bounces with its error", len(bounces))
			}
			return
		}
		checkBounces(t, bounces)
	})
}

func checkReport(t *testing.T, r bounce.Report) {
	t.Helper()
	if len(r.Recipients) > bounce.MaxRecipients || len(r.Envelope) > 16 {
		t.Fatalf("%d recipient groups, %d envelope addresses", len(r.Recipients), len(r.Envelope))
	}
	for _, rs := range r.Recipients {
		if len(rs.Diagnostic) > bounce.MaxDiagnostic || !utf8.ValidString(rs.Diagnostic) {
			t.Fatalf("diagnostic of %d bytes, valid UTF-8 %v", len(rs.Diagnostic), utf8.ValidString(rs.Diagnostic))
		}
		if s := rs.Status; s != "" && (len(s) < 5 || len(s) > 9 || s[1] != '.' || (s[0] != '2' && s[0] != '4' && s[0] != '5')) {
			t.Fatalf("status %q", s)
		}
	}
}

func checkBounces(t *testing.T, bounces []bounce.Bounce) {
	t.Helper()
	if len(bounces) == 0 || len(bounces) > bounce.MaxRecipients {
		t.Fatalf("%d bounces without an error", len(bounces))
	}
	ids := map[string]bool{}
	for _, b := range bounces {
		e := b.Event
		switch {
		case e.Type != webhook.Bounced && e.Type != webhook.Delayed && e.Type != webhook.Delivered:
			t.Fatalf("event type %q", e.Type)
		case (e.Type == webhook.Bounced) != (e.BounceType == webhook.Hard):
			t.Fatalf("%s event with bounce type %q", e.Type, e.BounceType)
		case len(e.Diagnostic) > 1000 || !utf8.ValidString(e.Diagnostic):
			t.Fatalf("diagnostic of %d bytes, valid UTF-8 %v", len(e.Diagnostic), utf8.ValidString(e.Diagnostic))
		case e.ID == "" || ids[e.ID] || e.Recipient == "" || e.OccurredAt.IsZero():
			t.Fatalf("event without a unique id, a recipient or a date: %+v", e)
		case e.Type == webhook.Bounced && e.SMTPStatus == "":
			t.Fatalf("bounce without a status: %+v", e)
		}
		if id, err := uuid.Parse(b.MessageID); err != nil || id.String() != b.MessageID {
			t.Fatalf("message id %q", b.MessageID)
		}
		ids[e.ID] = true
	}
}
