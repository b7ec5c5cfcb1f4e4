package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/config"
)

// file is an attachment as a client sends it, and what it should read
// back as.
type file struct {
	name, contentType string
	content           []byte
	cid               string // inline when set
}

func (f file) json() map[string]any {
	m := map[string]any{"filename": f.name, "content_type": f.contentType,
		"content_base64": base64.StdEncoding.EncodeToString(f.content)}
	if f.cid != "" {
		m["disposition"], m["content_id"] = "inline", f.cid
	}
	return m
}

// sendFiles sends a message with files from inbox (in thread, if given)
// and returns its id and thread.
func (s *server) sendFiles(t *testing.T, inbox, thread string, files ...file) (id, threadID string) {
	t.Helper()
	atts := make([]map[string]any, len(files))
	for i, f := range files {
		atts[i] = f.json()
	}
	req := map[string]any{"inbox_id": inbox, "to": []string{"ann@customer.test"}, "subject": "Files",
		"body": "See attached.", "attachments": atts}
	if thread != "" {
		req["reply_to_thread_id"] = thread
	}
	r := s.do(t, "POST", "/v1/messages", req, key...)
	mustStatus(t, r, http.StatusCreated)
	m := r.JSON(t)
	if m["status"] != "sent" {
		t.Fatalf("send: %s", r.Body)
	}
	return m["id"].(string), m["thread_id"].(string)
}

// key is the API key of the attachment tests' servers, as headers.
var key = []string{"X-API-Key", "k"}

// listed is the filenames of a list of attachment descriptions, and their ids.
func listed(t *testing.T, r response) (names, ids []string) {
	t.Helper()
	var l struct {
		Items []map[string]any `json:"items"`
		Count int              `json:"count"`
	}
	if err := json.Unmarshal(r.Body, &l); err != nil {
		t.Fatalf("list %s: %v", r.Body, err)
	}
	if l.Count != len(l.Items) {
		t.Errorf("count %d for %d items", l.Count, len(l.Items))
	}
	for _, it := range l.Items {
		names = append(names, it["filename"].(string))
		ids = append(ids, it["id"].(string))
	}
	return names, ids
}

// Sent attachments are kept: listed by message, thread and inbox, described,
// and served back byte for byte, raw and in base64, on both databases.
func TestAttachmentsServedAsSent(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.APIKey = "k" })
		inbox := s.createInbox(t, "support", key...)
		other := s.createInbox(t, "sales", key...)

		every := make([]byte, 3<<20) // 3 MiB: more than a page, every byte value
		for i := range every {
			every[i] = byte(i * 7)
		}
		files := map[string]file{
			"every":  {"data.bin", "application/octet-stream", every, ""},
			"text":   {"Grüße \"ü\" 100%.txt", "text/plain", []byte("héllo\r\nworld\n"), ""},
			"inline": {"logo.png", "image/png", []byte("\x89PNG\r\n\x1a\n\x00\x00"), "logo@acme"},
			"reply":  {"reply.pdf", "application/pdf", []byte("%PDF-1.7\n"), ""},
			"second": {"second.csv", "text/csv", []byte("a,b\n1,2\n"), ""},
			"other":  {"other.txt", "text/plain", []byte("other inbox"), ""},
		}
		m1, thread := s.sendFiles(t, inbox, "", files["every"], files["text"], files["inline"])
		m2, _ := s.sendFiles(t, inbox, thread, files["reply"])
		s.sendFiles(t, inbox, "", files["second"])
		s.sendFiles(t, other, "", files["other"])

		// What went out is what is kept.
		s.SMTP.WaitForCount(t, 4)
		out := map[string][]byte{}
		for _, p := range s.SMTP.Messages()[0].Attachments {
			out[p.Filename] = p.Content
		}
		if len(out) != 3 || !bytes.Equal(out["data.bin"], every) || !bytes.Equal(out["logo.png"], files["inline"].content) {
			t.Fatalf("the SMTP server got %d attachments, want the 3 sent", len(out))
		}

		for _, tt := range []struct {
			filter string
			want   []string
		}{
			{"message_id=" + m1, []string{"data.bin", files["text"].name, "logo.png"}},
			{"thread_id=" + thread, []string{"data.bin", files["text"].name, "logo.png", "reply.pdf"}},
			{"inbox_id=" + inbox, []string{"second.csv", "reply.pdf", "data.bin", files["text"].name, "logo.png"}},
			{"inbox_id=" + inbox + "&limit=2&offset=1", []string{"reply.pdf", "data.bin"}},
			{"message_id=" + m2, []string{"reply.pdf"}},
		} {
			r := s.do(t, "GET", "/v1/attachments?"+tt.filter, nil, key...)
			mustStatus(t, r, http.StatusOK)
			if names, _ := listed(t, r); !slices.Equal(names, tt.want) {
				t.Errorf("GET /v1/attachments?%s: %q, want %q", tt.filter, names, tt.want)
			}
		}

		// The message lists its attachments' descriptions, never their content.
		r := s.do(t, "GET", "/v1/messages/"+m1, nil, key...)
		mustStatus(t, r, http.StatusOK)
		var msg struct {
			Attachments []map[string]any `json:"attachments"`
		}
		if err := json.Unmarshal(r.Body, &msg); err != nil || len(msg.Attachments) != 3 {
			t.Fatalf("GET /v1/messages/%s attachments = %v (%v), want 3", m1, msg.Attachments, err)
		}
		if len(r.Body) > 64<<10 {
			t.Errorf("GET /v1/messages/{id} is %d bytes: the content came with it", len(r.Body))
		}
		for i, f := range []file{files["every"], files["text"], files["inline"]} {
			a := msg.Attachments[i]
			if a["filename"] != f.name || a["content_type"] != f.contentType || a["size"] != float64(len(f.content)) ||
				a["message_id"] != m1 {
				t.Errorf("attachment %d = %v, want %s (%s, %d bytes)", i, a, f.name, f.contentType, len(f.content))
			}
			s.checkAttachment(t, a["id"].(string), f)
		}
		if a := msg.Attachments[2]; a["disposition"] != "inline" || a["content_id"] != "logo@acme" {
			t.Errorf("inline attachment = %v", a)
		}

		// Deleting the inbox takes its attachments with it.
		mustStatus(t, s.do(t, "DELETE", "/v1/inboxes/"+inbox, nil, key...), http.StatusNoContent)
		id := msg.Attachments[0]["id"].(string)
		mustStatus(t, s.do(t, "GET", "/v1/attachments/"+id, nil, key...), http.StatusNotFound)
		mustStatus(t, s.do(t, "GET", "/v1/attachments/"+id+"/content", nil, key...), http.StatusNotFound)
		r = s.do(t, "GET", "/v1/attachments?inbox_id="+other, nil, key...)
		if names, _ := listed(t, r); !slices.Equal(names, []string{"other.txt"}) {
			t.Errorf("the other inbox's attachments after the delete: %q, want [other.txt]", names)
		}
	})
}

// checkAttachment reads an attachment's description and content (raw and
// base64) and compares them with what was sent.
func (s *server) checkAttachment(t *testing.T, id string, f file) {
	t.Helper()
	sum := sha256.Sum256(f.content)
	r := s.do(t, "GET", "/v1/attachments/"+id, nil, key...)
	mustStatus(t, r, http.StatusOK)
	d := r.JSON(t)
	if d["id"] != id || d["filename"] != f.name || d["size"] != float64(len(f.content)) ||
		d["content_hash"] != hex.EncodeToString(sum[:]) || d["storage_backend"] != "database" ||
		d["download_url"] != "/v1/attachments/"+id+"/content" {
		t.Errorf("GET /v1/attachments/%s = %v", id, d)
	}

	raw := s.do(t, "GET", "/v1/attachments/"+id+"/content", nil, key...)
	mustStatus(t, raw, http.StatusOK)
	if !bytes.Equal(raw.Body, f.content) {
		t.Errorf("%s: raw content is %d bytes, want the %d sent, identical", f.name, len(raw.Body), len(f.content))
	}
	if ct := raw.Header.Get("Content-Type"); ct != f.contentType {
		t.Errorf("%s: Content-Type %q, want %q", f.name, ct, f.contentType)
	}
	cd := raw.Header.Get("Content-Disposition")
	if !strings.HasPrefix(cd, "attachment; filename=\"") ||
		(strings.ContainsFunc(f.name, func(r rune) bool { return r > 0x7e || r == '"' || r == '%' }) &&
			!strings.Contains(cd, "filename*=UTF-8''"+strings.ReplaceAll(url.PathEscape(f.name), "%21", "!"))) {
		t.Errorf("%s: Content-Disposition %q", f.name, cd)
	}

	b64 := s.do(t, "GET", "/v1/attachments/"+id+"/content?format=base64", nil, key...)
	mustStatus(t, b64, http.StatusOK)
	var body map[string]string
	if err := json.Unmarshal(b64.Body, &body); err != nil {
		t.Fatal(err)
	}
	content, err := base64.StdEncoding.DecodeString(body["content"])
	if err != nil || !bytes.Equal(content, f.content) || body["content_type"] != f.contentType || body["filename"] != f.name {
		t.Errorf("%s: base64 answer decodes to %d bytes (%v), type %q, name %q; want the %d sent",
			f.name, len(content), err, body["content_type"], body["filename"], len(f.content))
	}
}

// Unknown ids of any shape are 404 (never 400 or 500: bytes that are not
// UTF-8 would be a PostgreSQL error), filters are exactly one, and every
// route needs the key.
func TestAttachmentRefusals(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.APIKey = "k" })
		inbox := s.createInbox(t, "support", key...)
		msg, thread := s.sendFiles(t, inbox, "", file{"a.txt", "text/plain", []byte("a"), ""})
		_, ids := listed(t, s.do(t, "GET", "/v1/attachments?message_id="+msg, nil, key...))
		if len(ids) != 1 {
			t.Fatalf("the message lists %d attachments, want 1", len(ids))
		}
		id := ids[0]

		tests := []struct {
			name, path string
			status     int
			want       string
		}{
			{"unknown attachment", "/v1/attachments/nonexistent-attachment-id", 404, `"Attachment nonexistent-attachment-id not found"`},
			{"unknown content", "/v1/attachments/nonexistent-attachment-id/content", 404, `"code":"not_found"`},
			{"a UUID that is not one", "/v1/attachments/6f1c2a9e-3b7d-4c55-9a0e-2d8f4b1c7e90", 404, `"code":"not_found"`},
			{"not UTF-8", "/v1/attachments/%FF%FE", 422, `{"loc":["path"],"msg":"Input is not valid UTF-8"`},
			{"not UTF-8, content", "/v1/attachments/a%80b/content?format=base64", 422, `{"loc":["path"],"msg":"Input is not valid UTF-8"`},
			{"percent-encoded slash", "/v1/attachments/a%2Fb", 404, `"code":"not_found"`},
			{"unknown message", "/v1/attachments?message_id=nope", 404, `"Message nope not found"`},
			{"unknown thread", "/v1/attachments?thread_id=nope", 404, `"Thread nope not found"`},
			{"unknown inbox", "/v1/attachments?inbox_id=nope", 404, `"Inbox nope not found"`},
			{"message not UTF-8", "/v1/attachments?message_id=%FF", 422, `{"loc":["query","message_id"],"msg":"Input is not valid UTF-8"`},
			{"thread not UTF-8", "/v1/attachments?thread_id=%C3%28", 422, `{"loc":["query","thread_id"],"msg":"Input is not valid UTF-8"`},
			{"inbox not UTF-8", "/v1/attachments?inbox_id=%ED%A0%80", 422, `{"loc":["query","inbox_id"],"msg":"Input is not valid UTF-8"`},
			{"message by id not UTF-8", "/v1/messages/%FF", 422, `{"loc":["path"],"msg":"Input is not valid UTF-8"`},
			{"no filter", "/v1/attachments", 422,
				`{"loc":["query","message_id"],"msg":"Exactly one filter is required: message_id, thread_id or inbox_id","type":"missing"}`},
			{"empty filters", "/v1/attachments?message_id=&inbox_id=", 422, `"loc":["query","message_id"]`},
			{"two filters", "/v1/attachments?message_id=" + msg + "&thread_id=" + thread, 422, `"loc":["query","thread_id"]`},
			{"three filters", "/v1/attachments?message_id=" + msg + "&thread_id=" + thread + "&inbox_id=" + inbox, 422,
				`(got message_id and thread_id and inbox_id)`},
			{"bad limit", "/v1/attachments?inbox_id=" + inbox + "&limit=0", 422, `"loc":["query","limit"]`},
			{"bad format", "/v1/attachments/" + id + "/content?format=raw", 422, `"loc":["query","format"]`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := s.do(t, "GET", tt.path, nil, key...)
				mustStatus(t, r, tt.status)
				if !strings.Contains(string(r.Body), tt.want) {
					t.Errorf("body = %s, want it to contain %s", r.Body, tt.want)
				}
			})
		}
		for _, path := range []string{"/v1/attachments?message_id=" + msg, "/v1/attachments/" + id,
			"/v1/attachments/" + id + "/content", "/v1/attachments/" + id + "/content?format=base64"} {
			mustStatus(t, s.do(t, "GET", path, nil), http.StatusUnauthorized)
			mustStatus(t, s.do(t, "GET", path, nil, "X-API-Key", "wrong"), http.StatusUnauthorized)
			mustStatus(t, s.do(t, "GET", path, nil, "Authorization", "Bearer k"), http.StatusOK)
		}
	})
}
