package providers

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nornweave/nornweave/core/address"
)

// RFC 5322 §2.1.1: a line MUST be no more than 998 octets and SHOULD be
// no more than 78, CRLF excluded.
const (
	maxLineOctets  = 998
	wantLineOctets = 78
)

// longLines returns the lines of raw longer than limit octets.
func longLines(raw []byte, limit int) []string {
	var out []string
	for _, l := range strings.Split(string(raw), "\r\n") {
		if len(l) > limit {
			out = append(out, fmt.Sprintf("%d octets: %.60q…", len(l), l))
		}
	}
	return out
}

// headerLines returns the raw lines of every header in raw, the
// message's and each part's, as sent (folded): the bodies are go-mail's
// base64 and quoted-printable, the headers are held to 78 octets.
func headerLines(raw []byte) []string {
	var boundaries []string
	for _, m := range regexp.MustCompile(`boundary="?([^";\r\n]+)`).FindAllSubmatch(raw, -1) {
		boundaries = append(boundaries, "--"+string(m[1]))
	}
	var out []string
	inHeader := true
	for _, l := range strings.Split(string(raw), "\r\n") {
		switch {
		case inHeader && l == "":
			inHeader = false
		case inHeader:
			out = append(out, l)
		case slices.ContainsFunc(boundaries, func(b string) bool { return l == b }):
			inHeader = true
		}
	}
	return out
}

func TestMIMEHeaderLinesStayShort(t *testing.T) {
	t.Parallel()
	nonASCII := strings.Repeat("Grüße aus Köln — ✓ ", 60)
	tests := []struct {
		name             string
		subject          string
		filename         string
		wantShortHeaders bool // every header line within 78 octets
	}{
		{"maximum subject, ASCII words", strings.TrimSpace(strings.Repeat("word ", 200))[:998], "a.txt", true},
		{"maximum subject, one ASCII word", strings.Repeat("x", 998), "a.txt", true},
		{"maximum subject, non-ASCII", string([]rune(nonASCII)[:998]), "a.txt", true},
		{"subject with a literal encoded word", "=?utf-8?q?not_encoded?= " + strings.Repeat("y", 300), "a.txt", true},
		{"long non-ASCII filename", "s", strings.Repeat("Prüfbericht-Übersicht ", 11) + ".pdf", true},
		{"long ASCII filename", "s", strings.Repeat("quarterly-report-", 15) + ".pdf", true},
		{"filename with quotes and slashes", "s", `a "b" c/d\e.txt`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := simpleMessage(1)
			m.Subject = tt.subject
			m.Attachments = []Attachment{{Filename: tt.filename, ContentType: "application/pdf", Content: []byte("%PDF")},
				{Filename: tt.filename, Content: []byte("x"), Inline: true, ContentID: "c1@x.test"}}
			raw, err := encodeMIME(m, time.Now)
			if err != nil {
				t.Fatalf("encodeMIME: %v", err)
			}
			for _, l := range longLines(raw, maxLineOctets) {
				t.Errorf("line over 998 octets: %s", l)
			}
			if tt.wantShortHeaders {
				for _, l := range longLines([]byte(strings.Join(headerLines(raw), "\r\n")), wantLineOctets) {
					t.Errorf("header line over 78 octets: %s", l)
				}
			}
			checkRoundTrip(t, raw, m)
		})
	}
}

// checkRoundTrip parses raw back with net/mail and mime/multipart and
// checks that the subject and every filename read as they were sent.
func checkRoundTrip(t *testing.T, raw []byte, m Message) {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("message does not parse: %v", err)
	}
	var dec mime.WordDecoder
	if got, err := dec.DecodeHeader(msg.Header.Get("Subject")); err != nil || got != m.Subject {
		t.Errorf("got Subject %q (%v), want %q", got, err, m.Subject)
	}
	var names []string
	var walk func(ct string, body io.Reader)
	walk = func(ct string, body io.Reader) {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil {
			t.Errorf("Content-Type %q: %v", ct, err)
			return
		}
		if !strings.HasPrefix(mt, "multipart/") {
			return
		}
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Errorf("multipart: %v", err)
				return
			}
			if d := p.Header.Get("Content-Disposition"); d != "" {
				_, dp, err := mime.ParseMediaType(d)
				if err != nil {
					t.Errorf("Content-Disposition %q: %v", d, err)
				}
				_, cp, err := mime.ParseMediaType(p.Header.Get("Content-Type"))
				if err != nil {
					t.Errorf("part Content-Type %q: %v", p.Header.Get("Content-Type"), err)
				}
				if dp["filename"] != cp["name"] {
					t.Errorf("got filename %q and name %q, want the same", dp["filename"], cp["name"])
				}
				names = append(names, dp["filename"])
			}
			walk(p.Header.Get("Content-Type"), p)
		}
	}
	walk(msg.Header.Get("Content-Type"), msg.Body)
	if len(names) != len(m.Attachments) {
		t.Fatalf("got %d attachments, want %d", len(names), len(m.Attachments))
	}
	for i, a := range m.Attachments {
		if want := safeFilename(a.Filename); names[i] != want {
			t.Errorf("attachment %d: got filename %q, want %q", i, names[i], want)
		}
	}
}

// FuzzMIMELineLength builds the MIME of messages whose subject, sender and
// recipient names, attachment name and body are fuzzed and repeated up to
// 64 times (a mutator seldom grows a seed to the lengths where lines
// break), within what the API accepts: any subject and file name, an inbox
// name of at most 255 characters, a recipient that address.Parse takes.
// No line may pass 998 octets, and the message must parse back with
// net/mail and mime/multipart to the same subject, names and file name.
// FuzzBuildMIME checks the same messages for injected headers.
func FuzzMIMELineLength(f *testing.F) {
	f.Add("Hello", "Support", "Ann", "report.pdf", "body", uint8(0))
	f.Add("x", "y", "z", "f", "b", uint8(255))
	f.Add("Grüße — ✓ ", "Jörg Müller", "Bea Ünal", "Prüfbericht-Übersicht ", "Grüße\n", uint8(40))
	f.Add("=?utf-8?q?a?=", "\"quoted\"", "O'Brien, Ann", `a"b/c\d:e`, ".\r\n.", uint8(9))
	f.Add("word ", "名前", "名前", "ファイル", "本文", uint8(63))
	f.Fuzz(func(t *testing.T, subject, fromName, toName, filename, text string, repeat uint8) {
		// Long enough to need several lines, short enough to keep the
		// fuzzer fast: a megabyte subject would test nothing more.
		n := int(repeat)%64 + 1
		subject, filename = clip(strings.Repeat(subject, n), 4000), clip(strings.Repeat(filename, n), 2000)
		text = clip(strings.Repeat(text, n), 4000)
		fromName, toName = clip(strings.Repeat(fromName, n), 2000), clip(strings.Repeat(toName, n), 2000)
		if len([]rune(fromName)) > 255 || address.CheckName(fromName) != nil {
			return // the API refuses such an inbox name
		}
		rcpt, err := address.Parse((&mail.Address{Name: toName, Address: "to@customer.test"}).String())
		if err != nil {
			return // the API refuses such a recipient
		}
		m := Message{MessageID: "<m@acme.test>", Date: time.Unix(1_700_000_000, 0), From: "support@acme.test",
			FromName: fromName, To: []address.Address{rcpt}, Subject: subject, Text: text,
			Attachments: []Attachment{{Filename: filename, ContentType: "application/pdf", Content: []byte("%PDF")}}}
		raw, err := encodeMIME(m, time.Now)
		if err != nil {
			return // refused (a control character): nothing is sent
		}
		if long := longLines(raw, maxLineOctets); len(long) > 0 {
			t.Fatalf("lines over 998 octets: %v", long)
		}
		checkRoundTrip(t, raw, m)
		msg, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []struct {
			key  string
			want address.Address
		}{{"From", address.Address{Name: fromName, Local: "support", Domain: "acme.test"}}, {"To", rcpt}} {
			// go-mail folds an address header at any space, inside a
			// quoted name too, and a reader unfolds the blanks around a
			// break into one: a name's run of blanks may read shorter.
			list, err := msg.Header.AddressList(h.key)
			if err != nil || len(list) != 1 || list[0].Address != h.want.AddrSpec() ||
				strings.Join(strings.Fields(list[0].Name), " ") != strings.Join(strings.Fields(h.want.Name), " ") {
				t.Errorf("%s %q reads as %v (%v), want %q <%s>", h.key, msg.Header.Get(h.key), list, err, h.want.Name, h.want.AddrSpec())
			}
		}
	})
}

// clip cuts s to at most n bytes, at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
