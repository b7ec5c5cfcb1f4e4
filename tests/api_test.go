package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/config"
)

func TestBlockedDomainSendsNothing(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) {
			c.OutboundDomainBlocklist = `evil\.test, (.*\.)?spam\.test`
			c.SendRateLimitPerMinute = 1
		})
		inbox := s.createInbox(t, "support")
		r := s.do(t, "POST", "/v1/messages", map[string]any{
			"inbox_id": inbox, "to": []string{"a@ok.test"}, "cc": []string{"b@mail.SPAM.test"},
			"bcc": []string{"c@evil.test", "d@evil.test"}, "subject": "s", "body": "b",
		})
		mustStatus(t, r, http.StatusForbidden)
		if d := r.JSON(t)["detail"]; d != "Recipient domain(s) blocked by outbound policy: evil.test, mail.spam.test" {
			t.Errorf("detail = %q", d)
		}
		if s.SMTP.Count() != 0 {
			t.Errorf("SMTP server received %d, want 0", s.SMTP.Count())
		}
		// Nothing was taken from the throttle: the one slot is still free.
		mustStatus(t, s.send(t, inbox, "a@ok.test"), http.StatusCreated)
		// notevil.test is not evil.test: patterns match the whole domain.
		mustStatus(t, s.send(t, inbox, "a@notevil.test"), http.StatusTooManyRequests)
	})
}

func TestNotFoundAndValidation(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", nil)
	inbox := s.createInbox(t, "support")
	tests := []struct {
		name         string
		method, path string
		body         any
		status       int
		detail       string // substring of the body
	}{
		{"unknown inbox on send", "POST", "/v1/messages", map[string]any{"inbox_id": "nonexistent-inbox-id",
			"to": []string{"a@b.test"}, "subject": "s", "body": ""}, 404, `"Inbox nonexistent-inbox-id not found"`},
		{"unknown thread on send", "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
			"subject": "s", "body": "", "reply_to_thread_id": "nope"}, 404, `"Thread nope not found"`},
		{"unknown inbox", "GET", "/v1/inboxes/nonexistent-inbox-id", nil, 404, `"Inbox nonexistent-inbox-id not found"`},
		{"unknown message", "GET", "/v1/messages/nonexistent", nil, 404, `"Message nonexistent not found"`},
		{"unknown thread", "GET", "/v1/threads/nonexistent", nil, 404, `"Thread nonexistent not found"`},
		{"unknown route", "GET", "/v1/nothing-here", nil, 404, `{"detail":"Not Found","code":"not_found"}`},
		{"missing fields", "POST", "/v1/messages", map[string]any{"inbox_id": inbox}, 422, `"loc":["body","to"]`},
		{"empty to", "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{},
			"subject": "s", "body": ""}, 422, `"type":"too_short"`},
		{"bad address", "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"not-an-address"},
			"subject": "s", "body": ""}, 422, `{"loc":["body","to",0],"msg":"Invalid email address: not-an-address","type":"value_error"}`},
		{"subject with newline", "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
			"subject": "s\r\nBcc: x@y.test", "body": ""}, 422, `CR or LF`},
		{"bad base64", "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
			"subject": "s", "body": "", "attachments": []map[string]any{{"filename": "a.txt",
				"content_type": "text/plain", "content_base64": "!!!"}}}, 400, `Invalid base64 content in attachment 0`},
		{"empty attachment", "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
			"subject": "s", "body": "", "attachments": []map[string]any{{"filename": "a.txt",
				"content_type": "text/plain", "content_base64": ""}}}, 422, `Attachment 0 has empty content`},
		{"unknown attachment key", "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
			"subject": "s", "body": "", "attachments": []map[string]any{{"filename": "a.txt",
				"content_type": "text/plain", "content_base64": "aGk=", "colour": "red"}}}, 422,
			`"loc":["body","attachments",0,"colour"]`},
		{"non-string recipient", "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []any{"a@b.test", 7},
			"subject": "s", "body": ""}, 422, `{"loc":["body","to",1],"msg":"Input should be a valid string","type":"string_type"}`},
		{"not json", "POST", "/v1/messages", "{not json", 422, `"json_invalid"`},
		{"duplicate inbox", "POST", "/v1/inboxes", map[string]any{"name": "x", "email_username": "support"}, 409,
			`Inbox with email support@acme.test already exists`},
		{"unknown inbox field", "POST", "/v1/inboxes", map[string]any{"name": "x", "email_username": "y", "z": 1}, 422, `"extra_forbidden"`},
		{"negative limit", "GET", "/v1/inboxes?limit=-1", nil, 422, `"loc":["query","limit"]`},
		{"messages need a filter", "GET", "/v1/messages", nil, 422, `inbox_id`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(t, tt.method, tt.path, tt.body)
			mustStatus(t, r, tt.status)
			if !strings.Contains(string(r.Body), tt.detail) {
				t.Errorf("body = %s, want it to contain %s", r.Body, tt.detail)
			}
		})
	}
	if s.SMTP.Count() != 0 {
		t.Errorf("SMTP server received %d, want 0", s.SMTP.Count())
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", func(c *config.Config) { c.APIKey = "s3cret" })
	tests := []struct {
		name    string
		headers []string
		status  int
	}{
		{"no key", nil, 401},
		{"wrong key", []string{"X-API-Key", "nope"}, 401},
		{"x-api-key", []string{"X-API-Key", "s3cret"}, 200},
		{"bearer", []string{"Authorization", "Bearer s3cret"}, 200},
		{"x-api-key wins over a right bearer", []string{"X-API-Key", "nope", "Authorization", "Bearer s3cret"}, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(t, "GET", "/v1/inboxes", nil, tt.headers...)
			mustStatus(t, r, tt.status)
			if tt.status == 401 {
				if r.Header.Get("WWW-Authenticate") != "Bearer" || r.JSON(t)["detail"] != "Missing or invalid API key" {
					t.Errorf("401 = %v %s", r.Header, r.Body)
				}
			}
		})
	}
	mustStatus(t, s.do(t, "GET", "/health", nil), 200)
	mustStatus(t, s.do(t, "GET", "/ready", nil), 200)
	if id := s.do(t, "GET", "/health", nil).Header.Get("X-Request-Id"); id == "" {
		t.Error("no X-Request-Id on the response")
	}
}

func TestInboxLifecycle(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, nil)
		b := s.createInbox(t, "b-team")
		a := s.createInbox(t, "a-team")
		mustStatus(t, s.send(t, a, "x@customer.test"), http.StatusCreated)

		r := s.do(t, "GET", "/v1/inboxes", nil)
		mustStatus(t, r, http.StatusOK)
		var list struct {
			Items []map[string]any `json:"items"`
			Count int              `json:"count"`
		}
		if err := json.Unmarshal(r.Body, &list); err != nil {
			t.Fatal(err)
		}
		if list.Count != 2 || list.Items[0]["email_address"] != "a-team@acme.test" || list.Items[1]["id"] != b {
			t.Errorf("inboxes = %+v, want a-team then b-team", list)
		}
		mustStatus(t, s.do(t, "DELETE", "/v1/inboxes/"+a, nil), http.StatusNoContent)
		mustStatus(t, s.do(t, "GET", "/v1/inboxes/"+a, nil), http.StatusNotFound)
		r = s.send(t, a, "x@customer.test")
		mustStatus(t, r, http.StatusNotFound)
		if d := r.JSON(t)["detail"]; d != "Inbox "+a+" not found" {
			t.Errorf("send from a deleted inbox: detail %q", d)
		}
		mustStatus(t, s.do(t, "GET", "/v1/messages?inbox_id="+a, nil), http.StatusNotFound)
		mustStatus(t, s.do(t, "DELETE", "/v1/inboxes/"+a, nil), http.StatusNotFound)
	})
}

// jsonField decodes one top-level field of a JSON object.
func jsonField(body []byte, name string, into any) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return err
	}
	return json.Unmarshal(m[name], into)
}
