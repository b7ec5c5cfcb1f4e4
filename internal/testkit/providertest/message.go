package providertest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// Sent is a message as the fake saw it, whatever the provider's format.
type Sent struct {
	// Envelope is every recipient, Bcc included.
	Envelope []string
	// Headers are the message's headers by canonical name: from the MIME
	// for Mailgun and SES, from the JSON ("headers", "from", ...) otherwise.
	Headers map[string]string
	// MIME is the decoded message for the raw-MIME providers.
	MIME *smtptest.Message
	// JSON is the decoded body for the JSON providers.
	JSON map[string]any
}

// Message decodes the ith request (from 0) as a sent message.
func (f *Fake) Message(tb testing.TB, i int) Sent {
	tb.Helper()
	reqs := f.Requests()
	if i >= len(reqs) {
		tb.Fatalf("fake %s received %d requests, want at least %d", f.Kind, len(reqs), i+1)
	}
	r := reqs[i]
	s := Sent{Headers: map[string]string{}}
	switch f.Kind {
	case "mailgun":
		_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil {
			tb.Fatalf("mailgun request Content-Type %q: %v", r.Header.Get("Content-Type"), err)
		}
		form, err := multipart.NewReader(bytes.NewReader(r.Body), params["boundary"]).ReadForm(32 << 20)
		if err != nil {
			tb.Fatalf("mailgun request is not multipart/form-data: %v", err)
		}
		s.Envelope = form.Value["to"]
		if len(form.File["message"]) != 1 {
			tb.Fatalf("mailgun request has %d message files, want 1", len(form.File["message"]))
		}
		fh, _ := form.File["message"][0].Open()
		raw, _ := io.ReadAll(fh)
		s.setMIME(raw)
	case "ses":
		var in struct {
			Destination struct{ ToAddresses, CcAddresses, BccAddresses []string }
			Content     struct{ Raw struct{ Data string } }
		}
		if err := json.Unmarshal(r.Body, &in); err != nil {
			tb.Fatalf("ses request body: %v", err)
		}
		d := in.Destination
		s.Envelope = append(append(append([]string{}, d.ToAddresses...), d.CcAddresses...), d.BccAddresses...)
		raw, err := base64.StdEncoding.DecodeString(in.Content.Raw.Data)
		if err != nil {
			tb.Fatalf("ses Content.Raw.Data is not base64: %v", err)
		}
		s.setMIME(raw)
	default:
		if err := json.Unmarshal(r.Body, &s.JSON); err != nil {
			tb.Fatalf("%s request body: %v", f.Kind, err)
		}
		if h, ok := s.JSON["headers"].(map[string]any); ok {
			for k, v := range h {
				s.Headers[http.CanonicalHeaderKey(k)], _ = v.(string)
			}
		}
	}
	return s
}

func (s *Sent) setMIME(raw []byte) {
	m := smtptest.Parse(raw)
	s.MIME = &m
	for k, v := range m.Header {
		s.Headers[k] = strings.Join(v, ", ")
	}
}
