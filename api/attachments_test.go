package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/store"
)

// attStore is fakeStore with one attachment, "att", whose content it
// counts the reads of.
type attStore struct {
	fakeStore
	att     store.Attachment
	content []byte
	reads   atomic.Int32
}

func (s *attStore) Attachment(_ context.Context, id string) (*store.Attachment, error) {
	if id != s.att.ID {
		return nil, store.ErrNotFound
	}
	a := s.att
	return &a, nil
}

func (s *attStore) AttachmentContent(_ context.Context, id string) ([]byte, error) {
	s.reads.Add(1)
	if id != s.att.ID || s.content == nil {
		return nil, store.ErrNotFound
	}
	return s.content, nil
}

func newAttStore(contentType, filename string, content []byte) *attStore {
	hash := "h"
	return &attStore{content: content, att: store.Attachment{ID: "att", MessageID: "m", Filename: filename,
		ContentType: contentType, Disposition: "attachment", Size: len(content), ContentHash: &hash,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
}

func newAttAPI(st Store) *Server {
	return New(Options{Store: st, Throttle: memThrottle(0, 0), AttachmentMaxSize: 1 << 20,
		AttachmentMaxTotalSize: 1 << 20, AttachmentMaxCount: 2})
}

func TestAttachmentContentAnswers(t *testing.T) {
	content := []byte("\x00\x01binary\xff\r\n")
	tests := []struct {
		name, contentType, filename, query string
		wantType, wantDisposition          string
		wantBody                           string
	}{
		{"raw", "application/pdf", "invoice.pdf", "", "application/pdf", `attachment; filename="invoice.pdf"`, string(content)},
		{"raw, named binary", "image/png", "a.png", "?format=binary", "image/png", `attachment; filename="a.png"`, string(content)},
		{"base64", "application/pdf", `Rechnung "März".pdf`, "?format=base64", "application/json", "",
			`{"content":"` + base64.StdEncoding.EncodeToString(content) +
				`","content_type":"application/pdf","filename":"Rechnung \"März\".pdf"}` + "\n"},
		{"a type we would not accept is served as bytes", "text/html; charset=utf-8", "x.html", "",
			"application/octet-stream", `attachment; filename="x.html"`, string(content)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serve(newAttAPI(newAttStore(tt.contentType, tt.filename, content)), "GET",
				"/v1/attachments/att/content"+tt.query, "")
			if rec.Code != http.StatusOK {
				t.Fatalf("got %d %s, want 200", rec.Code, rec.Body)
			}
			h := rec.Header()
			if h.Get("Content-Type") != tt.wantType || h.Get("Content-Disposition") != tt.wantDisposition {
				t.Errorf("got Content-Type %q, Content-Disposition %q; want %q, %q", h.Get("Content-Type"),
					h.Get("Content-Disposition"), tt.wantType, tt.wantDisposition)
			}
			if rec.Body.String() != tt.wantBody || h.Get("Content-Length") != itoa(len(tt.wantBody)) {
				t.Errorf("got body %q (Content-Length %s), want %q", rec.Body, h.Get("Content-Length"), tt.wantBody)
			}
			if tt.wantDisposition != "" && !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
				t.Errorf("raw content served without a sandboxing CSP: %q", h.Get("Content-Security-Policy"))
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestAttachmentErrors(t *testing.T) {
	old := newAttStore("text/plain", "old.txt", nil)
	old.att.ContentHash = nil // sent before contents were kept
	tests := []struct {
		name   string
		st     Store
		path   string
		status int
		want   string
	}{
		{"unknown id", newAttStore("text/plain", "a", []byte("a")), "/v1/attachments/nope", 404, `"Attachment nope not found"`},
		{"unknown id, content", newAttStore("text/plain", "a", []byte("a")), "/v1/attachments/nope/content", 404, `"Attachment nope not found"`},
		{"no content kept", old, "/v1/attachments/att/content", 404, `no stored content`},
		{"unknown format", newAttStore("text/plain", "a", []byte("a")), "/v1/attachments/att/content?format=hex", 422,
			`{"loc":["query","format"],"msg":"Input should be 'binary' or 'base64'","type":"literal_error"}`},
		{"no filter", newAttStore("text/plain", "a", []byte("a")), "/v1/attachments", 422, `"loc":["query","message_id"]`},
		{"two filters", newAttStore("text/plain", "a", []byte("a")), "/v1/attachments?message_id=m&inbox_id=i", 422,
			`"loc":["query","inbox_id"],"msg":"Only one filter is allowed: message_id, thread_id or inbox_id (got message_id and inbox_id)"`},
		{"limit too large", newAttStore("text/plain", "a", []byte("a")), "/v1/attachments?inbox_id=i&limit=501", 422, `"loc":["query","limit"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serve(newAttAPI(tt.st), "GET", tt.path, "")
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("got %d %s, want %d containing %s", rec.Code, rec.Body, tt.status, tt.want)
			}
		})
	}
}

func TestAttachmentQueryValidate(t *testing.T) {
	tests := []struct {
		name string
		q    AttachmentQuery
		loc  string // "" = valid
	}{
		{"message", AttachmentQuery{MessageID: "m"}, ""},
		{"thread with a page", AttachmentQuery{ThreadID: "t", Limit: 500, Offset: 9}, ""},
		{"inbox, default page", AttachmentQuery{InboxID: "i"}, ""},
		{"none", AttachmentQuery{}, "message_id"},
		{"thread and inbox", AttachmentQuery{ThreadID: "t", InboxID: "i"}, "inbox_id"},
		{"all three", AttachmentQuery{MessageID: "m", ThreadID: "t", InboxID: "i"}, "thread_id"},
		{"negative limit", AttachmentQuery{InboxID: "i", Limit: -1}, "limit"},
		{"limit over 500", AttachmentQuery{InboxID: "i", Limit: 501}, "limit"},
		{"negative offset", AttachmentQuery{InboxID: "i", Offset: -1}, "offset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.q.Validate()
			var ve *ValidationError
			switch {
			case tt.loc == "" && err != nil:
				t.Errorf("got %v, want valid", err)
			case tt.loc != "" && (!errors.As(err, &ve) || ve.Errors[0].Loc[1] != tt.loc):
				t.Errorf("got %v, want a 422 at query.%s", err, tt.loc)
			}
		})
	}
}

func TestContentDisposition(t *testing.T) {
	tests := []struct{ name, want string }{
		{"report.pdf", `attachment; filename="report.pdf"`},
		{"a b;c=d.txt", `attachment; filename="a b;c=d.txt"`},
		{`say "hi".txt`, `attachment; filename="say _hi_.txt"; filename*=UTF-8''say%20%22hi%22.txt`},
		{"März 100%.pdf", `attachment; filename="M_rz 100_.pdf"; filename*=UTF-8''M%C3%A4rz%20100%25.pdf`},
		{`../../etc/passwd`, `attachment; filename=".._.._etc_passwd"`},
		{`C:\x\y.exe`, `attachment; filename="C:_x_y.exe"`},
		{"tab\there\x7f", `attachment; filename="tab_here_"; filename*=UTF-8''tab%09here%7F`},
	}
	for _, tt := range tests {
		if got := contentDisposition(tt.name); got != tt.want {
			t.Errorf("contentDisposition(%q)\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// A download holds its content in memory as a send holds its request: it
// takes its size from the in-flight budget, and waits while the budget is
// spent, before it reads the content.
func TestAttachmentDownloadTakesFromTheInFlightBudget(t *testing.T) {
	st := newAttStore("application/octet-stream", "big.bin", make([]byte, 1<<20))
	srv := newAttAPI(st)
	budget := srv.api.RequestsInFlight
	if !srv.api.inflight.TryAcquire(budget) {
		t.Fatal("the budget is taken before the test")
	}
	ctx, cancel := context.WithCancel(context.Background())
	req := localRequest("GET", "/v1/attachments/att/content", nil).WithContext(ctx)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { srv.ServeHTTP(rec, req); close(done) }()
	// The download waits; a small one would not. Nothing to wait for but
	// its answer once its client gives up.
	if small := serve(newAttAPI(newAttStore("text/plain", "s.txt", []byte("s"))), "GET", "/v1/attachments/att/content", ""); small.Code != 200 {
		t.Errorf("a small download got %d, want 200 without waiting", small.Code)
	}
	cancel()
	<-done
	if rec.Code != statusClientClosedRequest || st.reads.Load() != 0 {
		t.Errorf("got %d with %d content reads, want 499 and the content never read while the budget was spent",
			rec.Code, st.reads.Load())
	}
	srv.api.inflight.Release(budget)
	if rec := serve(srv, "GET", "/v1/attachments/att/content", ""); rec.Code != 200 || rec.Body.Len() != 1<<20 {
		t.Errorf("with the budget free: got %d with %d bytes, want 200 with the 1 MiB", rec.Code, rec.Body.Len())
	}
	if srv.api.inflight.TryAcquire(budget) {
		srv.api.inflight.Release(budget)
	} else {
		t.Error("the download did not give its bytes back to the budget")
	}
}

// What MCP tools will call: the listing and the content as functions of a
// context, answering what the routes answer.
func TestAttachmentFunctionsWithoutEchoContext(t *testing.T) {
	content := []byte("\x00content\xff")
	st := newAttStore("application/pdf", "März.pdf", content)
	srv := newAttAPI(st)
	ctx := context.Background()
	f, err := srv.api.OpenAttachment(ctx, "att")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want, _ := MarshalNoEscape(f.Base64())
	if rec := serve(srv, "GET", "/v1/attachments/att/content?format=base64", ""); strings.TrimSpace(rec.Body.String()) != want {
		t.Errorf("route answered %s, the function %s", rec.Body, want)
	}
	if _, err := srv.api.OpenAttachment(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "Attachment nope not found") {
		t.Errorf("OpenAttachment(unknown) = %v, want its 404", err)
	}
	var ve *ValidationError
	if _, err := srv.api.Attachments(ctx, AttachmentQuery{}); !errors.As(err, &ve) {
		t.Errorf("attachments(no filter) = %v, want the 422", err)
	}
}
