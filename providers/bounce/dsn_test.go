package bounce_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/providers/bounce"
)

// now is the clock of the attribution tests: after every fixture's dates.
var now = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseDSNFixtures(t *testing.T) {
	tests := []struct {
		file                              string
		messageID, reportingMTA           string
		final, original, action, status   string
		diagnosticPrefix                  string
		originalReturnPath, originalMsgID string
		envelope                          int
		arrival                           string
	}{
		{
			file: "postfix-hard.eml", messageID: "20240514091205.4VfZ1w2Abcz9vQp@mail.example.com",
			reportingMTA: "dns; mail.example.com", final: " nobody@example.org", original: "nobody@example.org",
			action: "failed", status: "5.1.1",
			diagnosticPrefix:   "550 5.1.1 <nobody@example.org>: Recipient address rejected: User unknown in virtual mailbox table",
			originalReturnPath: "<bounces+aginlir4jz5y7gqbencwpcnlzvkn3lfe4lefeq2yyylpjnzg@example.com>",
			originalMsgID:      "0190d5a2-3c4e-7b8f-9a01-23456789abcd@example.com",
			envelope:           4, arrival: "2024-05-14T09:12:03Z",
		},
		{
			file: "exim-hard.eml", messageID: "E1s7Abc-000123-Ab@mx1.example.com",
			reportingMTA: "dns; mx1.example.com", final: "jsmith@example.net",
			action: "failed", status: "5.0.0",
			diagnosticPrefix:   "550 5.1.1 <jsmith@example.net>: Recipient address rejected: User unknown",
			originalReturnPath: "<bounces+aginlir4jz5y7gqbencwpcnlz3nlrb4abzx6ebz4bcl77hku@example.com>",
			originalMsgID:      "0190d5a2-3c4e-7b8f-9a01-23456789abce@example.com",
			envelope:           3,
		},
		{
			file: "gmail-hard.eml", messageID: "6645dc13.050a0220.3b2c1.0001.GMR@mx.google.com",
			reportingMTA: "dns; googlemail.com", final: " no.such.user@gmail.com",
			action: "failed", status: "5.1.1",
			diagnosticPrefix:   "550-5.1.1 The email account that you tried to reach does not exist. Please try",
			originalReturnPath: "<bounces+aginlir4jz5y7gqbencwpcnlz63xpz5vqinyvg4oklbhlm3s@example.com>",
			originalMsgID:      "0190d5a2-3c4e-7b8f-9a01-23456789abcf@example.com",
			envelope:           3, arrival: "2024-05-16T10:22:10Z",
		},
		{
			file: "microsoft-hard.eml", messageID: "b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e@AM0PR01MB1234.eurprd01.prod.exchangelabs.com",
			reportingMTA: "dns;AM0PR01MB1234.eurprd01.prod.exchangelabs.com", final: "Ann.Other@contoso.com",
			action: "failed", status: "5.1.10",
			diagnosticPrefix:   "550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup",
			originalReturnPath: "bounces+aginlir4jz5y7gqbencwpcnl2bn2fy6kfvjliaehavswfdp4@example.com",
			originalMsgID:      "0190d5a2-3c4e-7b8f-9a01-23456789abd0@example.com",
			envelope:           3, arrival: "2024-05-17T08:15:41Z",
		},
		{
			file: "postfix-delayed.eml", messageID: "20240520100007.4Vh0Zp3Lq2z9vQr@mail.example.com",
			reportingMTA: "dns; mail.example.com", final: " slow@greylist.example", original: "slow@greylist.example",
			action: "delayed", status: "4.7.1",
			diagnosticPrefix:   "450 4.7.1 <slow@greylist.example>: Recipient address rejected: Greylisted, see http://postgrey",
			originalReturnPath: "<bounces+aginlir4jz5y7gqbencwpcnl2kvnhiy4rd6mivjajgtfc6yx@example.com>",
			originalMsgID:      "0190d5a2-3c4e-7b8f-9a01-23456789abd2@example.com",
			envelope:           4, arrival: "2024-05-20T06:00:01Z",
		},
		{
			file: "rfc3464-example.eml", messageID: "199407072116.RAA14128@CS.UTK.EDU",
			reportingMTA: "dns; cs.utk.edu", final: "louisl@larry.slip.umd.edu", original: "louisl@larry.slip.umd.edu",
			action: "failed", status: "4.0.0", diagnosticPrefix: "426 connection timed out",
			envelope: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw := fixture(t, tt.file)
			// The same report whichever line ends it was stored with.
			variants := map[string][]byte{
				"LF":   bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")),
				"CRLF": bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n")),
			}
			for ending, raw := range variants {
				r, err := bounce.ParseDSN(raw)
				if err != nil {
					t.Fatalf("%s: ParseDSN: %v", ending, err)
				}
				if r.MessageID != tt.messageID || r.ReportingMTA != tt.reportingMTA {
					t.Errorf("%s: message id %q, reporting MTA %q; want %q, %q", ending, r.MessageID, r.ReportingMTA, tt.messageID, tt.reportingMTA)
				}
				if len(r.Recipients) != 1 {
					t.Fatalf("%s: %d recipient groups, want 1", ending, len(r.Recipients))
				}
				rs := r.Recipients[0]
				if rs.FinalRecipient != strings.TrimSpace(tt.final) || rs.OriginalRecipient != tt.original ||
					rs.Action != tt.action || rs.Status != tt.status {
					t.Errorf("%s: got %+v", ending, rs)
				}
				if !strings.HasPrefix(rs.Diagnostic, tt.diagnosticPrefix) || strings.ContainsAny(rs.Diagnostic, "\r\n\t") {
					t.Errorf("%s: diagnostic %q, want it to start %q, on one line", ending, rs.Diagnostic, tt.diagnosticPrefix)
				}
				if r.Original.ReturnPath != tt.originalReturnPath || r.Original.MessageID != tt.originalMsgID {
					t.Errorf("%s: original %+v", ending, r.Original)
				}
				if len(r.Envelope) != tt.envelope {
					t.Errorf("%s: envelope %q, want %d addresses", ending, r.Envelope, tt.envelope)
				}
				if tt.arrival != "" && r.ArrivalDate.UTC().Format(time.RFC3339) != tt.arrival {
					t.Errorf("%s: arrival %v, want %s", ending, r.ArrivalDate, tt.arrival)
				}
			}
		})
	}
}

func TestParseDSNNotADSN(t *testing.T) {
	tests := map[string]string{
		"vacation auto-reply": string(fixture(t, "vacation.eml")),
		"plain text":          "From: a@example.org\nTo: bounces@example.com\nSubject: hi\n\nhello\n",
		"qmail-style bounce": "From: MAILER-DAEMON@example.org\nTo: bounces@example.com\nSubject: failure notice\n\n" +
			"Hi. This is the qmail-send program at example.org.\nI'm afraid I wasn't able to deliver your message.\n\n" +
			"<nobody@example.org>:\nSorry, no mailbox here by that name. (#5.1.1)\n",
		"a read receipt": "Content-Type: multipart/report; report-type=disposition-notification; boundary=b\n\n" +
			"--b\nContent-Type: message/disposition-notification\n\nFinal-Recipient: rfc822; a@example.org\nDisposition: manual-action/MDN-sent-manually; displayed\n\n--b--\n",
		"a report without its status part": "Content-Type: multipart/report; report-type=delivery-status; boundary=b\n\n" +
			"--b\nContent-Type: text/plain\n\nYour message failed.\n--b--\n",
		"no boundary":   "Content-Type: multipart/report; report-type=delivery-status\n\n--b\n",
		"no headers":    "",
		"not a message": "\x00\x01\x02",
	}
	for name, raw := range tests {
		t.Run(name, func(t *testing.T) {
			if r, err := bounce.ParseDSN([]byte(raw)); !errors.Is(err, bounce.ErrNotDSN) {
				t.Fatalf("ParseDSN = %+v, %v; want ErrNotDSN", r, err)
			}
		})
	}
}

func TestParseDSNBounds(t *testing.T) {
	big := append(fixture(t, "postfix-hard.eml"), bytes.Repeat([]byte("x"), bounce.MaxDSNSize)...)
	if _, err := bounce.ParseDSN(big); !errors.Is(err, bounce.ErrTooLarge) {
		t.Errorf("%d bytes: %v, want ErrTooLarge", len(big), err)
	}

	var groups strings.Builder
	for range bounce.MaxRecipients + 1 {
		groups.WriteString("Final-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.1.1\n\n")
	}
	many := dsn("", "Reporting-MTA: dns; x\n\n"+groups.String())
	if _, err := bounce.ParseDSN(many); !errors.Is(err, bounce.ErrTooLarge) {
		t.Errorf("%d recipient groups: %v, want ErrTooLarge", bounce.MaxRecipients+1, err)
	}

	long := strings.Repeat("é", 2*bounce.MaxDiagnostic)
	r, err := bounce.ParseDSN(dsn("", "Reporting-MTA: dns; x\n\nFinal-Recipient: rfc822; a@example.org\nAction: failed\n"+
		"Status: 5.1.1\nDiagnostic-Code: smtp; 550 "+long+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Recipients[0].Diagnostic; len(d) > bounce.MaxDiagnostic || len(d) < bounce.MaxDiagnostic-1 || !strings.HasPrefix(d, "550 é") {
		t.Errorf("diagnostic of %d bytes, want %d cut on a rune: %.20q", len(d), bounce.MaxDiagnostic, d)
	}
}

// The status part as servers vary it: folded fields, blank lines of white
// space, no per-message block, comments after the status, an address in
// brackets, another address type.
func TestParseDSNFieldForms(t *testing.T) {
	tests := []struct {
		name, status                    string
		final, action, code, diagnostic string
	}{
		{"folded diagnostic", "Reporting-MTA: dns; x\n\nFinal-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.2.2\n" +
			"Diagnostic-Code: smtp; 552-5.2.2 The email account that you tried to reach is over quota\n\t and inactive.\n",
			"a@example.org", "failed", "5.2.2", "552-5.2.2 The email account that you tried to reach is over quota and inactive."},
		{"blank lines of spaces and trailing spaces", "Reporting-MTA: dns; x   \n   \n\t\n  \nFinal-Recipient: rfc822;a@example.org  \nAction: Failed \nStatus: 5.1.1 \n",
			"a@example.org", "failed", "5.1.1", ""},
		{"no per-message block", "Final-Recipient: RFC822; <a@example.org>\nAction: delayed\nStatus: 4.4.7\n",
			"<a@example.org>", "delayed", "4.4.7", ""},
		{"status with a comment", "Reporting-MTA: dns; x\n\nFinal-Recipient: rfc822; a@example.org\nAction: failed (bad mailbox)\nStatus: 5.1.1 (bad destination mailbox address)\n",
			"a@example.org", "failed", "5.1.1", ""},
		{"malformed status", "Reporting-MTA: dns; x\n\nFinal-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 550\n",
			"a@example.org", "failed", "", ""},
		{"an X.400 recipient", "Reporting-MTA: dns; x\n\nFinal-Recipient: x400; /C=US/O=Example/\nAction: failed\nStatus: 5.1.1\n",
			"", "failed", "5.1.1", ""},
		{"diagnostic with no type", "Reporting-MTA: dns; x\n\nFinal-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.0.0\nDiagnostic-Code: mailbox unavailable\n",
			"a@example.org", "failed", "5.0.0", "mailbox unavailable"},
		{"control characters", "Reporting-MTA: dns; x\n\nFinal-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.0.0\nDiagnostic-Code: smtp; 550 \x1b[31mno\x7f such\x00 user\n",
			"a@example.org", "failed", "5.0.0", "550 [31mno such user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, ending := range []string{"\n", "\r\n"} {
				r, err := bounce.ParseDSN(dsn("", strings.ReplaceAll(tt.status, "\n", ending)))
				if err != nil {
					t.Fatalf("%q: %v", ending, err)
				}
				if len(r.Recipients) != 1 {
					t.Fatalf("%q: %d groups, want 1", ending, len(r.Recipients))
				}
				rs := r.Recipients[0]
				if rs.FinalRecipient != tt.final || rs.Action != tt.action || rs.Status != tt.code || rs.Diagnostic != tt.diagnostic {
					t.Errorf("%q: got %+v\nwant final %q, action %q, status %q, diagnostic %q", ending, rs, tt.final, tt.action, tt.code, tt.diagnostic)
				}
			}
		})
	}
}

// A base64 status part, as a few servers send it, reads the same.
func TestParseDSNBase64Status(t *testing.T) {
	raw := "To: x@example.com\nContent-Type: multipart/report; report-type=delivery-status; boundary=b\n\n" +
		"--b\nContent-Type: message/delivery-status\nContent-Transfer-Encoding: base64\n\n" +
		"UmVwb3J0aW5nLU1UQTogZG5zOyB4CgpGaW5hbC1SZWNpcGllbnQ6IHJmYzgyMjsgYUBleGFt\ncGxlLm9yZwpBY3Rpb246IGZhaWxlZApTdGF0dXM6IDUuMS4xCg==\n--b--\n"
	r, err := bounce.ParseDSN([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Recipients) != 1 || r.Recipients[0].Status != "5.1.1" || r.Recipients[0].FinalRecipient != "a@example.org" {
		t.Fatalf("got %+v", r.Recipients)
	}
}

// dsn wraps a delivery-status body into a minimal notification sent to
// envelope (none if empty).
func dsn(envelope, status string) []byte {
	h := "Message-ID: <dsn-1@mx.example.org>\nDate: Fri, 31 May 2024 08:00:00 +0000\n"
	if envelope != "" {
		h += "To: " + envelope + "\n"
	}
	return []byte(h + "MIME-Version: 1.0\nContent-Type: multipart/report; report-type=delivery-status; boundary=\"b\"\n\n" +
		"--b\nContent-Type: text/plain\n\nDelivery failed.\n\n--b\nContent-Type: message/delivery-status\n\n" +
		status + "\n--b--\n")
}
