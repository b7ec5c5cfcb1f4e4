package api

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// capture is a Sender that keeps the request it was given.
type capture struct{ req *skuld.SendRequest }

func (c *capture) Send(_ context.Context, req skuld.SendRequest) (skuld.Result, error) {
	c.req = &req
	return skuld.Result{Message: &store.Message{ID: "m", Status: store.StatusSent}}, nil
}

func (c *capture) Cancel(context.Context, string) (*store.Message, error) {
	return nil, store.ErrNotHeld
}

func (c *capture) Reschedule(context.Context, string, time.Time) (*store.Message, error) {
	return nil, store.ErrNotHeld
}

// FuzzDecodeSend checks request decoding: no body makes the server fail
// (5xx), and whatever reaches the send pipeline is clean: valid UTF-8, no
// NUL, a one-line subject, canonical and unique recipients, safe
// attachment types.
func FuzzDecodeSend(f *testing.F) {
	for _, s := range []string{
		validSend,
		`{"inbox_id":"i","to":["a@b.test"],"to":["x@evil.test"],"subject":"s","body":""}`,
		`{"inbox_id":"i","to":["a@b.test"],"subject":"s","body":""} {"x":1}`,
		`{"inbox_id":"i","to":["g: a@b.test;"],"subject":"s","body":""}`,
		`{"inbox_id":"i","to":["a@b.test","A@B.TEST"],"cc":["a@b.test"],"subject":"s","body":"","extra":1}`,
		`{"inbox_id":"i","to":["a@b.test"],"subject":"\ud800","body":"\u0000"}`,
		"{\"inbox_id\":\"i\",\"to\":[\"a@b.test\"],\"subject\":\"\xff\",\"body\":\"\"}",
		`{"inbox_id":"i","to":["a@b.test"],"subject":"s","body":"","attachments":[{"filename":"a","content_type":"text/plain; x=1","content_base64":"aGk="}]}`,
		`{"inbox_id":"i","to":["a@b.test"],"subject":"s","body":"","attachments":[{"filename":"a","content_type":"image/png","content_base64":"aGk=","disposition":"inline","content_id":"a@b"}]}`,
		`[]`, `null`, `{"to":{"a":1}}`, `{"inbox_id":"i","to":["a@ｅｖｉｌ.com (x)"],"subject":"s","body":""}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		c := &capture{}
		h := New(Options{Store: fakeStore{}, Sender: c, Throttle: memThrottle(0, 0),
			AttachmentMaxSize: 1 << 20, AttachmentMaxTotalSize: 1 << 20, AttachmentMaxCount: 3})
		req := localRequest("POST", "/v1/messages", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if c.req == nil {
			return
		}
		r := *c.req
		for _, s := range []string{r.InboxID, r.Subject, r.Body, r.HTML, r.ReplyToThreadID} {
			if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
				t.Fatalf("field %q reached the pipeline with invalid UTF-8 or a NUL", s)
			}
		}
		if strings.ContainsAny(r.Subject, "\r\n") {
			t.Fatalf("subject %q has a line break", r.Subject)
		}
		seen := map[string]bool{}
		for _, list := range [][]address.Address{r.To, r.Cc, r.Bcc} {
			for _, a := range list {
				if seen[a.Key()] {
					t.Fatalf("recipient %q twice", a.AddrSpec())
				}
				seen[a.Key()] = true
				if back, err := address.Parse(a.String()); err != nil || back.AddrSpec() != a.AddrSpec() {
					t.Fatalf("recipient %q is not canonical: %v %v", a.String(), back, err)
				}
			}
		}
		if len(seen) > maxRecipients || len(r.To) == 0 {
			t.Fatalf("%d recipients, %d in to", len(seen), len(r.To))
		}
		for _, at := range r.Attachments {
			if !safeContentType(at.ContentType) || (at.ContentID != "" && !validContentID(at.ContentID)) {
				t.Fatalf("attachment %+v passed", at)
			}
		}
	})
}

func (c *capture) CloseInbox(context.Context, string) (func(), error) { return func() {}, nil }
