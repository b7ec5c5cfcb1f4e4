package providers

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/address"
)

// FuzzBuildMIME checks that no field of a message can inject a header: the
// encoded message's top-level header and every MIME part's header hold only
// the fields we write, and the envelope is exactly the canonical recipient.
// No line may pass 998 octets either; FuzzMIMELineLength tries the lengths
// where that happens.
func FuzzBuildMIME(f *testing.F) {
	f.Add("Hello", "Support", "a@x.test", "body", "a.txt", "text/plain", "cid1@x")
	f.Add("s\r\nX-Evil: 1", "n", "a@x.test", "b", "f", "text/plain", "")
	f.Add("s", "n\r\nX-Evil: 1", "a@x.test", "b", "f", "text/plain", "")
	f.Add("s", "n", "a@x.test", "b", "f\r\nX-Evil: 1", "text/plain", "")
	f.Add("s", "n", "a@x.test", "b", "f", "text/plain\r\nX-Evil: 1", "")
	f.Add("s", "n", "a@x.test", "b", "f", "text/plain; name=\"x\"; X-Evil=1", "")
	f.Add("s", "n", "a@x.test", "b", "f", "image/png", "a\"\r\nX-Evil: 1")
	f.Add("Grüße\u2028X-Evil: 1", "Jörg", "Ann <a@bücher.example>", "\r\nX-Evil: 1\r\n", "ü.txt", "text/plain", "")
	f.Add("=?utf-8?q?X-Evil:_1?=", "=?utf-8?q?a=0D=0AX-Evil:_1?=", "a@x.test", "b", "f", "text/plain", "c@x")
	p, err := NewSMTP(SMTPConfig{Host: "mx.test"})
	if err != nil {
		f.Fatal(err)
	}
	allowedTop := []string{"Content-Type", "Date", "From", "Message-Id", "Mime-Version", "Subject", "To", "Cc",
		"Reply-To", "In-Reply-To", "References", "Content-Transfer-Encoding"}
	f.Fuzz(func(t *testing.T, subject, fromName, to, text, filename, contentType, contentID string) {
		rcpt, err := address.Parse(to)
		if err != nil || address.CheckName(fromName) != nil {
			return // the API refuses these before a provider sees them
		}
		m := Message{MessageID: "<m@acme.test>", Date: time.Unix(1_700_000_000, 0), From: "support@acme.test",
			FromName: fromName, To: []address.Address{rcpt}, Subject: subject, Text: text, HTML: "<p>" + text + "</p>",
			Attachments: []Attachment{{Filename: filename, ContentType: contentType, Content: []byte("hi"),
				Inline: contentID != "", ContentID: contentID}}}
		msg, err := p.buildMsg(m)
		if err != nil {
			return // refused: nothing is sent
		}
		var buf bytes.Buffer
		if _, err := msg.WriteTo(&buf); err != nil {
			return
		}
		if long := longLines(buf.Bytes(), maxLineOctets); len(long) > 0 {
			t.Fatalf("lines over 998 octets: %v", long)
		}
		parsed, err := mail.ReadMessage(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("message does not parse: %v\n%s", err, buf.Bytes())
		}
		for k := range parsed.Header {
			if !slices.Contains(allowedTop, k) {
				t.Fatalf("unexpected top-level header %q:\n%s", k, buf.Bytes())
			}
		}
		if err := checkParts(textproto.MIMEHeader(parsed.Header), parsed.Body); err != nil {
			t.Fatalf("%v:\n%s", err, buf.Bytes())
		}
		if got := parsed.Header["To"]; len(got) != 1 || !strings.Contains(got[0], rcpt.AddrSpec()) {
			t.Fatalf("To = %q, want one header naming %q", got, rcpt.AddrSpec())
		}
		env, err := msg.GetRecipients()
		// go-mail writes each as "RCPT TO:<addr-spec>".
		if err != nil || !slices.Equal(env, []string{"<" + rcpt.AddrSpec() + ">"}) {
			t.Fatalf("envelope = %v, %v; want [<%s>]", env, err, rcpt.AddrSpec())
		}
	})
}

// partHeaders are the only fields a MIME part of ours carries.
var partHeaders = []string{"Content-Type", "Content-Transfer-Encoding", "Content-Disposition", "Content-Id"}

// checkParts walks the MIME tree below a header: every part's header may
// hold only partHeaders, and no value may keep a line break. An injected
// field ("X-Evil: 1" on a line of its own) shows up as an unknown key.
func checkParts(h textproto.MIMEHeader, body io.Reader) error {
	for k, vs := range h {
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n") {
				return fmt.Errorf("header %s = %q carries a line break", k, v)
			}
		}
	}
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		return nil
	}
	mr := multipart.NewReader(body, params["boundary"])
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("multipart: %v", err)
		}
		for k := range part.Header {
			if !slices.Contains(partHeaders, k) {
				return fmt.Errorf("unexpected part header %q", k)
			}
		}
		if err := checkParts(part.Header, part); err != nil {
			return err
		}
	}
}
