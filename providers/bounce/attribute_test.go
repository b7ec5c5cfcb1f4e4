package bounce_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/providers/bounce"
	"github.com/nornweave/nornweave/providers/webhook"
)

func TestAttributeFixtures(t *testing.T) {
	v := newVERP(t)
	tests := []struct {
		file, messageID, recipient, status string
		typ, bounceType                    string
		occurred                           string
	}{
		{"postfix-hard.eml", "0190d5a2-3c4e-7b8f-9a01-23456789abcd", "nobody@example.org", "5.1.1",
			webhook.Bounced, webhook.Hard, "2024-05-14T09:12:03Z"}, // no Last-Attempt-Date: the arrival
		{"exim-hard.eml", "0190d5a2-3c4e-7b8f-9a01-23456789abce", "jsmith@example.net", "5.0.0",
			webhook.Bounced, webhook.Hard, "2024-05-15T09:01:45Z"}, // no dates in the report: the Date header
		{"gmail-hard.eml", "0190d5a2-3c4e-7b8f-9a01-23456789abcf", "no.such.user@gmail.com", "5.1.1",
			webhook.Bounced, webhook.Hard, "2024-05-16T10:22:11Z"}, // Last-Attempt-Date
		{"microsoft-hard.eml", "0190d5a2-3c4e-7b8f-9a01-23456789abd0", "ann.other@contoso.com", "5.1.10",
			webhook.Bounced, webhook.Hard, "2024-05-17T08:15:41Z"},
		{"postfix-delayed.eml", "0190d5a2-3c4e-7b8f-9a01-23456789abd2", "slow@greylist.example", "4.7.1",
			webhook.Delayed, "", "2024-05-20T06:00:01Z"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw := fixture(t, tt.file)
			got, err := v.Attribute(raw, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("%d bounces, want 1: %+v", len(got), got)
			}
			b, e := got[0], got[0].Event
			if b.MessageID != tt.messageID || e.Recipient != tt.recipient || e.SMTPStatus != tt.status ||
				e.Type != tt.typ || e.BounceType != tt.bounceType || e.ProviderMessageID != "" {
				t.Errorf("got %+v", b)
			}
			if at := e.OccurredAt.Format(time.RFC3339); at != tt.occurred {
				t.Errorf("occurred at %s, want %s", at, tt.occurred)
			}
			if e.Diagnostic == "" || !strings.HasPrefix(e.ID, "dsn/") || !strings.HasSuffix(e.ID, "/"+tt.recipient) {
				t.Errorf("diagnostic %q, id %q", e.Diagnostic, e.ID)
			}
			// Read twice, the same event: a replay is recognised by its ID.
			again, err := v.Attribute(raw, now.Add(time.Hour))
			if err != nil || len(again) != 1 || again[0] != got[0] {
				t.Errorf("second read %+v, %v; want %+v", again, err, got)
			}
		})
	}
}

// The rules, table by table: what each Action and Status become.
func TestAttributeRules(t *testing.T) {
	v := newVERP(t)
	rp := returnPath(t, v, msgID, rcpt)
	group := func(action, status string) string {
		return "Reporting-MTA: dns; mx.example.org\n\nFinal-Recipient: rfc822; " + rcpt + "\nAction: " + action +
			"\nStatus: " + status + "\nDiagnostic-Code: smtp; " + status + " something\n"
	}
	tests := []struct {
		name, status    string
		typ, bounceType string
		wantErr         error
	}{
		{"failed 5.x.x is a hard bounce", group("failed", "5.1.1"), webhook.Bounced, webhook.Hard, nil},
		{"failed 5.2.2 (mailbox full, permanent) is a hard bounce", group("failed", "5.2.2"), webhook.Bounced, webhook.Hard, nil},
		{"failed 4.x.x is a delay, not a bounce", group("failed", "4.2.2"), webhook.Delayed, "", nil},
		{"delayed is a delay", group("delayed", "4.4.1"), webhook.Delayed, "", nil},
		{"delayed with a 5.x.x status is still a delay", group("delayed", "5.0.0"), webhook.Delayed, "", nil},
		{"delivered", group("delivered", "2.0.0"), webhook.Delivered, "", nil},
		{"relayed says nothing", group("relayed", "2.0.0"), "", "", bounce.ErrUnattributed},
		{"expanded says nothing", group("expanded", "2.0.0"), "", "", bounce.ErrUnattributed},
		{"failed without a status says nothing", group("failed", "bogus"), "", "", bounce.ErrUnattributed},
		{"another recipient is not ours", strings.ReplaceAll(group("failed", "5.1.1"), rcpt, "other@example.org"), "", "", bounce.ErrUnattributed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Attribute(dsn(rp, tt.status), now)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %+v, %v; want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Event.Type != tt.typ || got[0].Event.BounceType != tt.bounceType {
				t.Fatalf("got %+v, want %s/%s", got, tt.typ, tt.bounceType)
			}
		})
	}
}

func TestAttributeRefuses(t *testing.T) {
	v := newVERP(t)
	rp := returnPath(t, v, msgID, rcpt)
	hard := "Reporting-MTA: dns; x\n\nFinal-Recipient: rfc822; " + rcpt + "\nAction: failed\nStatus: 5.1.1\n"
	tok := strings.TrimSuffix(strings.TrimPrefix(rp, "bounces+"), "@example.com")
	forged := "bounces+" + tok[:20] + strings.ToUpper(tok[20:21]) + "x" + tok[22:] + "@example.com"
	otherMsg := returnPath(t, v, "0190d5a2-3c4e-7b8f-9a01-000000000000", rcpt)

	tests := []struct {
		name string
		raw  []byte
		want error
	}{
		{"vacation auto-reply to a valid token", fixture(t, "vacation.eml"), bounce.ErrNotDSN},
		{"a DSN of somebody else's", fixture(t, "rfc3464-example.eml"), bounce.ErrUnattributed},
		{"a forged token", dsn(forged, hard), bounce.ErrForged},
		{"a forged token beside a valid one", dsn(rp+", "+forged, hard), bounce.ErrForged},
		{"tokens of two messages", dsn(rp+", "+otherMsg, hard), bounce.ErrUnattributed},
		{"no envelope at all", dsn("", hard), bounce.ErrUnattributed},
		{"the bounce address without a token", dsn("bounces@example.com", hard), bounce.ErrUnattributed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := v.Attribute(tt.raw, now); !errors.Is(err, tt.want) {
				t.Fatalf("got %+v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// The RFC 3464 example, sent back to one of our addresses: Action failed
// with 4.0.0 (the server gave up on a temporary failure) is a delay; its
// 1994 dates are not believed, so the event is dated now.
func TestAttributeRFC3464Example(t *testing.T) {
	v := newVERP(t)
	const id = "0190d5a2-3c4e-7b8f-9a01-23456789abd1"
	rp := returnPath(t, v, id, "louisl@larry.slip.umd.edu")
	raw := bytes.Replace(fixture(t, "rfc3464-example.eml"), []byte("<owner-info-mime@cs.utk.edu>"), []byte("<"+rp+">"), 1)
	got, err := v.Attribute(raw, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].MessageID != id || got[0].Event.Type != webhook.Delayed || got[0].Event.SMTPStatus != "4.0.0" ||
		!got[0].Event.OccurredAt.Equal(now) {
		t.Fatalf("got %+v", got)
	}
}

// One report naming the token's recipient and another: only the token's
// recipient has an event. A forwarded recipient counts by its
// Original-Recipient. The token's case does not matter.
func TestAttributeRecipients(t *testing.T) {
	v := newVERP(t)
	rp := returnPath(t, v, msgID, rcpt)
	status := "Reporting-MTA: dns; x\n\n" +
		"Final-Recipient: rfc822; other@example.org\nAction: failed\nStatus: 5.1.1\n\n" +
		"Final-Recipient: rfc822; forwarded@elsewhere.example\nOriginal-Recipient: rfc822; NoBody@EXAMPLE.org\nAction: failed\nStatus: 5.1.1\n"
	got, err := v.Attribute(dsn(strings.ToUpper(rp), status), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Event.Recipient != rcpt || got[0].MessageID != msgID {
		t.Fatalf("got %+v", got)
	}
}

// A token for any recipient of its message (one envelope sender for a
// message to several): every failed group counts, and each bounce says the
// caller must check its recipient against the message's. A token for one
// recipient is not one for any.
func TestAttributeAnyRecipient(t *testing.T) {
	v := newVERP(t)
	rp := returnPath(t, v, msgID, "")
	status := "Reporting-MTA: dns; x\n\n" +
		"Final-Recipient: rfc822; other@example.org\nAction: failed\nStatus: 5.1.1\n\n" +
		"Final-Recipient: rfc822; NoBody@example.org\nAction: delayed\nStatus: 4.4.1\n"
	got, err := v.Attribute(dsn(rp, status), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].AnyRecipient || got[0].Event.Recipient != "other@example.org" || got[0].Event.Type != webhook.Bounced ||
		got[1].Event.Recipient != rcpt || got[1].Event.Type != webhook.Delayed {
		t.Fatalf("got %+v", got)
	}
	tok, err := v.Parse(returnPath(t, v, msgID, rcpt))
	if err != nil || v.AnyRecipient(tok) {
		t.Errorf("a token for %s is one for any recipient (%v)", rcpt, err)
	}
}
