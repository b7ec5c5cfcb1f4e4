package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/config"
)

// badCase is one request that must be refused with nothing sent and
// nothing stored.
type badCase struct {
	name   string
	method string
	path   string // "{inbox}" is replaced by the suite's inbox id
	body   string // raw; "{inbox}" replaced too
	ctype  string // Content-Type; "-" for none
	header []string
	status int
	code   string
	detail string // substring of the body, optional
}

// send builds a /v1/messages body from a base valid request with the
// given fields changed (raw JSON values).
func sendBody(fields ...string) string {
	base := map[string]string{
		"inbox_id": `"{inbox}"`, "to": `["a@ok.test"]`, "subject": `"s"`, "body": `"b"`,
	}
	for i := 0; i+1 < len(fields); i += 2 {
		base[fields[i]] = fields[i+1]
	}
	var parts []string
	for _, k := range []string{"inbox_id", "to", "cc", "bcc", "reply_to", "subject", "body", "attachments", "extra"} {
		if v, ok := base[k]; ok {
			parts = append(parts, fmt.Sprintf("%q:%s", k, v))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// attachment is one attachment object with a content type and content id.
func attachment(contentType, contentID string) string {
	cid := ""
	if contentID != "" {
		b, _ := json.Marshal(contentID)
		cid = `,"disposition":"inline","content_id":` + string(b)
	}
	ct, _ := json.Marshal(contentType)
	return `[{"filename":"a.txt","content_type":` + string(ct) + `,"content_base64":"aGk="` + cid + `}]`
}

func badInputCases() []badCase {
	post := func(name, body string, status int, code, detail string) badCase {
		return badCase{name: name, method: "POST", path: "/v1/messages", body: body, status: status, code: code, detail: detail}
	}
	blocked := func(name, field, addr, domain string) badCase {
		b, _ := json.Marshal([]string{addr})
		return post(name, sendBody(field, string(b)), 403, "domain_blocked", "blocked by outbound policy: "+domain)
	}
	invalid := func(name, field, addr, loc string) badCase {
		b, _ := json.Marshal([]string{addr})
		return post(name, sendBody(field, string(b)), 422, "validation_error", loc)
	}
	inboxBody := func(name string) string {
		b, _ := json.Marshal(map[string]string{"name": name, "email_username": "new"})
		return string(b)
	}
	att := func(name, ctype, cid, loc string) badCase {
		return post(name, sendBody("attachments", attachment(ctype, cid)), 422, "validation_error", loc)
	}
	return []badCase{
		// 1. the domain filter judges the address the envelope uses
		blocked("to: comment after the address", "to", "a@evil.com (x)", "evil.com"),
		blocked("to: space after the @", "to", "a@ evil.com", "evil.com"),
		blocked("to: display name", "to", "Bob <a@evil.com>", "evil.com"),
		blocked("to: upper case", "to", "a@EVIL.COM", "evil.com"),
		blocked("to: fullwidth letters", "to", "a@ｅｖｉｌ.com", "evil.com"),
		blocked("to: ideographic full stop", "to", "a@evil。com", "evil.com"),
		invalid("to: trailing ideographic full stop", "to", "a@evil.com。", `must not end with a dot`),
		blocked("to: subdomain", "to", "a@mail.evil.com", "mail.evil.com"),
		blocked("cc: comment after the address", "cc", "a@evil.com (x)", "evil.com"),
		blocked("cc: space after the @", "cc", "a@ evil.com", "evil.com"),
		blocked("cc: fullwidth letters", "cc", "a@ＥＶＩＬ.com", "evil.com"),
		blocked("bcc: comment after the address", "bcc", "a@evil.com (x)", "evil.com"),
		blocked("bcc: space after the @", "bcc", "a@ evil.com", "evil.com"),
		blocked("bcc: ideographic full stop", "bcc", "a@evil。com", "evil.com"),
		blocked("reply_to: blocked domain", "reply_to", "r@evil.com", "evil.com"),
		blocked("reply_to: space after the @", "reply_to", "Ann <r@ evil.com>", "evil.com"),
		invalid("to: group syntax", "to", "g: b@evil.com;", `"loc":["body","to",0]`),
		invalid("to: empty group", "to", "g:;", `group syntax`),
		invalid("cc: group syntax", "cc", "g: b@evil.com;", `"loc":["body","cc",0]`),
		invalid("bcc: group syntax", "bcc", "undisclosed: b@evil.com;", `"loc":["body","bcc",0]`),
		invalid("reply_to: group syntax", "reply_to", "g: b@evil.com;", `"loc":["body","reply_to",0]`),
		invalid("to: two addresses in one item", "to", "a@ok.test, b@evil.com", `Invalid email address`),
		invalid("to: quoted local part hiding an @", "to", `"a@ok.test"@evil.com`, `local part`),
		invalid("to: domain IDNA refuses", "to", "a@x_y.test", `domain cannot be normalised`),
		invalid("to: label starting with a hyphen", "to", "a@-x.test", `domain cannot be normalised`),
		invalid("to: bad punycode", "to", "a@xn--zz.test", `domain cannot be normalised`),
		invalid("to: header injection", "to", "a@ok.test\r\nBcc: b@evil.com", `control character`),
		invalid("to: line separator", "to", "a@ok.test\u2028", `control character`),

		// 2. cross-site requests and Content-Type
		{name: "text/plain body", method: "POST", path: "/v1/messages", body: sendBody(), ctype: "text/plain", status: 415, code: "unsupported_media_type"},
		{name: "form body", method: "POST", path: "/v1/messages", body: sendBody(), ctype: "application/x-www-form-urlencoded", status: 415, code: "unsupported_media_type"},
		{name: "multipart body", method: "POST", path: "/v1/messages", body: sendBody(), ctype: "multipart/form-data; boundary=x", status: 415, code: "unsupported_media_type"},
		{name: "no Content-Type", method: "POST", path: "/v1/messages", body: sendBody(), ctype: "-", status: 415, code: "unsupported_media_type"},
		{name: "inbox as text/plain", method: "POST", path: "/v1/inboxes", body: inboxBody("x"), ctype: "text/plain", status: 415, code: "unsupported_media_type"},
		{name: "cross-site Origin", method: "POST", path: "/v1/messages", body: sendBody(), header: []string{"Origin", "https://evil.example"}, status: 403, code: "cross_site_forbidden"},
		{name: "null Origin", method: "POST", path: "/v1/messages", body: sendBody(), header: []string{"Origin", "null"}, status: 403, code: "cross_site_forbidden"},
		{name: "Sec-Fetch-Site cross-site", method: "POST", path: "/v1/messages", body: sendBody(), header: []string{"Sec-Fetch-Site", "cross-site"}, status: 403, code: "cross_site_forbidden"},
		{name: "cross-site inbox delete", method: "DELETE", path: "/v1/inboxes/{inbox}", header: []string{"Origin", "https://evil.example"}, status: 403, code: "cross_site_forbidden"},

		// 5. CR, LF, NUL and forged display names
		{name: "inbox name with CR LF", method: "POST", path: "/v1/inboxes", body: inboxBody("a\r\nBcc: x@y.test"), status: 422, code: "validation_error", detail: `"loc":["body","name"]`},
		{name: "inbox name with LF", method: "POST", path: "/v1/inboxes", body: inboxBody("a\nb"), status: 422, code: "validation_error", detail: `"loc":["body","name"]`},
		{name: "inbox name with NUL", method: "POST", path: "/v1/inboxes", body: inboxBody("a\x00b"), status: 422, code: "validation_error", detail: `NUL`},
		{name: "inbox name with an address", method: "POST", path: "/v1/inboxes", body: inboxBody(`"Q" <admin@bank.com>`), status: 422, code: "validation_error", detail: `"loc":["body","name"]`},
		{name: "inbox name is an address", method: "POST", path: "/v1/inboxes", body: inboxBody("admin@bank.com"), status: 422, code: "validation_error", detail: `"loc":["body","name"]`},
		{name: "email_username with NUL", method: "POST", path: "/v1/inboxes", body: `{"name":"n","email_username":"a\u0000b"}`, status: 422, code: "validation_error", detail: `NUL`},
		post("subject with NUL", sendBody("subject", `"a\u0000b"`), 422, "validation_error", `"loc":["body","subject"]`),
		post("body with NUL", sendBody("body", `"a\u0000b"`), 422, "validation_error", `"loc":["body","body"]`),
		post("recipient with NUL", sendBody("to", `["a@ok.test\u0000"]`), 422, "validation_error", `NUL`),
		post("inbox_id with NUL", sendBody("inbox_id", `"{inbox}\u0000"`), 422, "validation_error", `"loc":["body","inbox_id"]`),
		post("attachment filename with NUL", sendBody("attachments", `[{"filename":"a\u0000.txt","content_type":"text/plain","content_base64":"aGk="}]`), 422, "validation_error", `NUL`),
		{name: "NUL in a path id", method: "GET", path: "/v1/inboxes/a%00b", status: 422, code: "validation_error", detail: `"loc":["path"]`},
		{name: "NUL in a path id on delete", method: "DELETE", path: "/v1/inboxes/%00", status: 422, code: "validation_error"},
		{name: "NUL in a thread id", method: "GET", path: "/v1/threads/x%00", status: 422, code: "validation_error"},
		{name: "NUL in a query id", method: "GET", path: "/v1/messages?inbox_id=%00", status: 422, code: "validation_error", detail: `"loc":["query","inbox_id"]`},
		{name: "NUL in a search term", method: "GET", path: "/v1/messages?inbox_id={inbox}&q=a%00", status: 422, code: "validation_error", detail: `"loc":["query","q"]`},
		{name: "NUL in a search body", method: "POST", path: "/v1/search", body: `{"query":"a\u0000","inbox_id":"{inbox}"}`, status: 422, code: "validation_error", detail: `"loc":["body","query"]`},

		// 6. strict JSON
		post("data after the object", sendBody()+` {"to":["x@evil.com"]}`, 422, "validation_error", `Extra data after the JSON object`),
		post("garbage after the object", sendBody()+`x`, 422, "validation_error", `"type":"json_invalid"`),
		post("duplicate key", `{"inbox_id":"{inbox}","to":["a@ok.test"],"to":["b@ok.test"],"subject":"s","body":"b"}`, 422, "validation_error", `"type":"duplicate_key"`),
		post("duplicate key in an attachment", sendBody("attachments", `[{"filename":"a.txt","filename":"b.txt","content_type":"text/plain","content_base64":"aGk="}]`), 422, "validation_error", `"loc":["body","attachments",0,"filename"]`),
		post("unknown field", sendBody("extra", `"x"`), 422, "validation_error", `"type":"extra_forbidden"`),
		post("misspelt reply_to_thread_id", `{"inbox_id":"{inbox}","to":["a@ok.test"],"subject":"s","body":"b","reply_to_thread":"t"}`, 422, "validation_error", `"loc":["body","reply_to_thread"]`),
		post("invalid UTF-8", "{\"inbox_id\":\"{inbox}\",\"to\":[\"a@ok.test\"],\"subject\":\"\xff\xfe\",\"body\":\"b\"}", 422, "validation_error", `UTF-8`),
		post("lone surrogate", sendBody("subject", `"\ud800"`), 422, "validation_error", `surrogate`),
		{name: "unknown search field", method: "POST", path: "/v1/search", body: `{"query":"a","inbox_id":"{inbox}","limt":5}`, status: 422, code: "validation_error", detail: `"loc":["body","limt"]`},
		{name: "duplicate search key", method: "POST", path: "/v1/search", body: `{"query":"a","query":"b","inbox_id":"{inbox}"}`, status: 422, code: "validation_error", detail: `duplicate_key`},
		{name: "data after an inbox", method: "POST", path: "/v1/inboxes", body: inboxBody("x") + `{}`, status: 422, code: "validation_error", detail: `Extra data`},

		// 7. attachment content types and ids
		att("content type with parameters", `text/plain; name="x"; X-Injected=1`, "", `"loc":["body","attachments",0,"content_type"]`),
		att("message/rfc822", "message/rfc822", "", `"loc":["body","attachments",0,"content_type"]`),
		att("multipart type", "multipart/mixed", "", `"content_type"`),
		att("content type with CR LF", "text/plain\r\nX-Injected: 1", "", `"content_type"`),
		att("content type without subtype", "text", "", `"content_type"`),
		att("content id with quotes", "image/png", `a"b@x`, `"loc":["body","attachments",0,"content_id"]`),
		att("content id with U+2028", "image/png", "a\u2028b@x", `"content_id"`),
		att("content id with a space", "image/png", "a b@x", `"content_id"`),
		att("content id with angle brackets", "image/png", "<a@x>", `"content_id"`),

		// 8. every error is {"detail", "code"}; the key before 404/405
		{name: "unknown route", method: "GET", path: "/v1/nothing-here", status: 404, code: "not_found"},
		{name: "unknown top-level route", method: "GET", path: "/nothing", status: 404, code: "not_found"},
		{name: "405 on a real route, with the key", method: "DELETE", path: "/v1/messages", status: 405, code: "method_not_allowed"},
		{name: "405 on a real route, no key", method: "DELETE", path: "/v1/messages", header: []string{"X-API-Key", ""}, status: 401, code: "unauthorized"},
		{name: "404 under /v1, no key", method: "GET", path: "/v1/nothing-here", header: []string{"X-API-Key", ""}, status: 401, code: "unauthorized"},
		{name: "headers too large", method: "GET", path: "/v1/inboxes", header: []string{"X-Padding", strings.Repeat("a", 80<<10)}, status: 431, code: "headers_too_large"},

		// 11. the key
		{name: "wrong key", method: "POST", path: "/v1/messages", body: sendBody(), header: []string{"X-API-Key", "wrong"}, status: 401, code: "unauthorized"},
		{name: "wrong bearer", method: "POST", path: "/v1/messages", body: sendBody(), header: []string{"X-API-Key", "", "Authorization", "Bearer wrong"}, status: 401, code: "unauthorized"},

		// 12. IP literals need the allowlist
		blocked("to: IPv4 literal", "to", "a@[127.0.0.1]", "[127.0.0.1]"),
		blocked("cc: bare IPv4 domain", "cc", "a@127.0.0.1", "[127.0.0.1]"),
		blocked("bcc: IP literal with a name", "bcc", "Ann <a@[10.0.0.1]>", "[10.0.0.1]"),
		invalid("to: IPv6 literal", "to", "a@[IPv6:::1]", `Invalid email address`),
	}
}

// TestBadInput runs every refused request of issue 7 against the real
// server on each database: each must answer with its status and code,
// hand nothing to the SMTP server and store nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	cases := badInputCases()
	if len(cases) < 60 {
		t.Fatalf("%d cases, want at least 60", len(cases))
	}
	forEachDriver(t, func(t *testing.T, driver string) {
		s, inbox := startBadInput(t, driver)
		s.refuseEach(t, inbox, cases)
	})
}

// startBadInput starts the server the bad-input suites send to: evil.com
// blocked, an API key without lockout (the 401 cases must not lock the
// suite out), and an inbox "Support".
func startBadInput(t *testing.T, driver string) (*server, string) {
	s := startDefault(t, driver, func(c *config.Config) {
		c.OutboundDomainBlocklist = `evil\.com`
		c.APIKey = "k"
		c.AuthFailureLimit = 0
	})
	return s, s.createInbox(t, "support", "X-API-Key", "k")
}

// refuseEach sends every case: each must answer with its status and code
// (and its detail, when it names one), hand nothing to the SMTP server and
// store nothing.
func (s *server) refuseEach(t *testing.T, inbox string, cases []badCase) {
	before := s.rows(t, inbox)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.raw(t, tc, inbox)
			if r.Status != tc.status {
				t.Fatalf("status = %d, want %d; body %.400s", r.Status, tc.status, r.Body)
			}
			var body struct {
				Detail any    `json:"detail"`
				Code   string `json:"code"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil || body.Code != tc.code || body.Detail == nil {
				t.Fatalf("body = %.400s, want {detail, code: %q}", r.Body, tc.code)
			}
			if tc.detail != "" && !bytes.Contains(r.Body, []byte(tc.detail)) {
				t.Errorf("body = %.400s, want it to contain %s", r.Body, tc.detail)
			}
			if n := s.SMTP.Count(); n != 0 {
				t.Errorf("SMTP server received %d messages, want 0", n)
			}
			if after := s.rows(t, inbox); after != before {
				t.Errorf("rows = %+v, want %+v (nothing stored)", after, before)
			}
		})
	}
}

// rowCounts are the rows visible through the API.
type rowCounts struct{ inboxes, threads, messages int }

func (s *server) rows(t *testing.T, inbox string) rowCounts {
	t.Helper()
	count := func(path, field string) int {
		r := s.do(t, "GET", path, nil, "X-API-Key", "k")
		mustStatus(t, r, http.StatusOK)
		return int(r.JSON(t)[field].(float64))
	}
	return rowCounts{
		inboxes:  count("/v1/inboxes", "count"),
		threads:  count("/v1/threads?inbox_id="+inbox, "count"),
		messages: count("/v1/messages?inbox_id="+inbox, "total"),
	}
}

// raw sends a case exactly as written: raw body, chosen Content-Type, and
// the API key unless the case overrides X-API-Key.
func (s *server) raw(t *testing.T, tc badCase, inbox string) response {
	t.Helper()
	var rd io.Reader
	if tc.body != "" {
		rd = strings.NewReader(strings.ReplaceAll(tc.body, "{inbox}", inbox))
	}
	req, err := http.NewRequest(tc.method, s.URL+strings.ReplaceAll(tc.path, "{inbox}", inbox), rd)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case tc.ctype == "-":
	case tc.ctype != "":
		req.Header.Set("Content-Type", tc.ctype)
	case tc.body != "":
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-API-Key", "k")
	for i := 0; i+1 < len(tc.header); i += 2 {
		if tc.header[i] == "Host" {
			req.Host = tc.header[i+1] // the client writes req.Host, never Header["Host"]
			continue
		}
		if tc.header[i+1] == "" {
			req.Header.Del(tc.header[i])
			continue
		}
		req.Header.Set(tc.header[i], tc.header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", tc.method, tc.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}
