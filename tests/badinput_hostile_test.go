package tests

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/config"
)

// hostileCases are the refused requests of issue 17 ("hostile input, round
// 3"), numbered by its items. Like badInputCases, each must be answered with
// its status and code, send nothing and store nothing, on both databases.
func hostileCases() []badCase {
	addr := addrBody
	js := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	inbox := func(name, username string) string {
		b, _ := json.Marshal(map[string]string{"name": name, "email_username": username})
		return string(b)
	}
	var cases []badCase

	// 1. nesting: refused by depth, before any walk that could cost memory
	deep := func(open, close string, n int) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	for _, tc := range []struct{ name, path, body string }{
		{"9,999 nested arrays in a send", "/v1/messages", `{"x":` + deep("[", "]", 9999) + `}`},
		{"nested objects in a send", "/v1/messages", deep(`{"a":`, "}", 5000)},
		{"nested arrays in an attachment", "/v1/messages", sendBody("attachments", "["+deep("[", "]", 3000)+"]")},
		{"nested arrays in an inbox", "/v1/inboxes", `{"name":` + deep("[", "]", 9999) + `}`},
		{"nested arrays in a search", "/v1/search", `{"query":` + deep("[", "]", 9999) + `}`},
		{"65 levels", "/v1/messages", `{"x":` + deep("[", "]", 64) + `}`},
	} {
		cases = append(cases, badCase{name: "nesting: " + tc.name, method: "POST", path: tc.path, body: tc.body,
			status: 422, code: "validation_error", detail: "nested"})
	}
	cases = append(cases, badCase{name: "nesting: in a PATCH", method: "PATCH", path: "/v1/inboxes/{inbox}",
		body: `{"rate_limit":` + deep("[", "]", 9999) + `}`, status: 422, code: "validation_error", detail: "nested"})

	// 4. whatever a resolver reads as an IPv4 address is an IP literal
	for _, a := range []string{"a@127.1", "a@2130706433", "a@0x7f000001", "a@0177.0.0.1", "a@0x7f.0.0.1",
		"a@127.0.1", "a@0x7F.1", "a@017700000001", "a@0x7f.0x0.0x0.0x1", "a@127.000.000.001",
		"a@１２７.１", "Ann <a@0177.1>", "a@00000000000000000177.1"} {
		cases = append(cases, post("numeric host: to "+a, addr("to", a), 403, "domain_blocked", "[127.0.0.1]"))
	}
	cases = append(cases,
		post("numeric host: cc", addr("cc", "a@2130706433"), 403, "domain_blocked", "[127.0.0.1]"),
		post("numeric host: bcc", addr("bcc", "a@0x7f.1"), 403, "domain_blocked", "[127.0.0.1]"),
		post("numeric host: reply_to", addr("reply_to", "a@10.1"), 403, "domain_blocked", "[10.0.0.1]"),
		post("numeric host: zero", addr("to", "a@0"), 403, "domain_blocked", "[0.0.0.0]"),
		post("numeric host: out of range", addr("to", "a@256.256.256.256"), 422, "validation_error", `"loc":["body","to",0]`),
		post("numeric host: five parts", addr("to", "a@1.2.3.4.5"), 422, "validation_error", `"loc":["body","to",0]`),
		post("numeric host: bad octal", addr("to", "a@09.1"), 422, "validation_error", `"loc":["body","to",0]`),
	)

	// 5. percent hack and bang paths: judged by one domain, routed to another
	for _, tc := range []struct{ field, a string }{
		{"to", "a%evil.com@ok.test"}, {"to", "evil.com!a@ok.test"}, {"cc", "a%evil.com@ok.test"},
		{"bcc", "x!y!a@ok.test"}, {"reply_to", "a%b%evil.com@ok.test"}, {"to", "Ann <a%evil.com@ok.test>"},
		{"to", "%@ok.test"}, {"to", "!@ok.test"},
	} {
		cases = append(cases, post("percent or bang: "+tc.field+" "+tc.a, addr(tc.field, tc.a), 422, "validation_error", "local part"))
	}

	// 6. display names that decode, or look like, an address
	for _, n := range []string{
		`"=?utf-8?q?admin=40bank.com?=" <x@ok.test>`, `"=?UTF-8?Q?admin=40bank.com?=" <x@ok.test>`,
		`"=?utf-8?b?YWRtaW5AYmFuay5jb20=?=" <x@ok.test>`, `"=?iso-8859-1?q?=3Cadmin=3E?=" <x@ok.test>`,
		`"=?utf-8?q?a?= =?utf-8?q?=40b?=" <x@ok.test>`, `"=?x-unknown?q?admin=40bank.com?=" <x@ok.test>`,
		`"=?utf-8*en?q?admin=40bank.com?=" <x@ok.test>`, `"=?utf-8?q?=3D=3Futf-8=3Fq=3Fa=3D40b=3F=3D?=" <x@ok.test>`,
		"\"admin\uFF20bank.com\" <x@ok.test>", "\"admin\uFE6Bbank.com\" <x@ok.test>", "\"\uFF1Cadmin\uFF1E\" <x@ok.test>",
		"\"\uFE64admin\uFE65\" <x@ok.test>", "\"\u2039admin\u203A\" <x@ok.test>", "\"\u3008admin\u3009\" <x@ok.test>",
		"\"\u27E8admin\u27E9\" <x@ok.test>", "\"\u02C2admin\u02C3\" <x@ok.test>", "\"\u1438admin\u1433\" <x@ok.test>",
		"admin\uFF20bank.com <x@ok.test>",
	} {
		cases = append(cases, post("display name: "+n, addr("to", n), 422, "validation_error", "display name"))
	}
	cases = append(cases, post("display name: reply_to encoded word", addr("reply_to", `"=?utf-8?q?admin=40bank.com?=" <x@ok.test>`),
		422, "validation_error", `"loc":["body","reply_to",0]`))

	// 7. the inbox name: one rule for POST and PATCH
	for _, n := range []string{"Support <support@bank.com>", "a\r\nBcc: x@y.test", "a\nb", "admin@bank.com",
		"=?utf-8?q?admin=40bank.com?=", "admin\uFF20bank.com", "\uFF1Csupport\uFF1E", "a\x1bb", "a\u0085b", "a\u2028b", "",
		strings.Repeat("n", 256)} {
		cases = append(cases,
			badCase{name: "inbox name: POST " + n, method: "POST", path: "/v1/inboxes", body: inbox(n, "new"),
				status: 422, code: "validation_error", detail: `"loc":["body","name"]`},
			badCase{name: "inbox name: PATCH " + n, method: "PATCH", path: "/v1/inboxes/{inbox}", body: `{"name":` + js(n) + `}`,
				status: 422, code: "validation_error", detail: `"loc":["body","name"]`})
	}

	// 8. control characters in header-bound fields
	for _, c := range []string{"\v", "\f", "\x1b", "\x7f", "\u0085", "\u009b", "\u2028", "\u2029", "\x08", "\u202e"} {
		q := js("a" + c + "b")
		cases = append(cases,
			post("control: subject "+q, sendBody("subject", q), 422, "validation_error", `"loc":["body","subject"]`),
			post("control: filename "+q, sendBody("attachments", `[{"filename":`+q+`,"content_type":"text/plain","content_base64":"aGk="}]`),
				422, "validation_error", `"loc":["body","attachments",0,"filename"]`))
	}

	// 11. ids that are not UTF-8: the same answer on both databases
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/inboxes/%ff"}, {"DELETE", "/v1/inboxes/%ff"}, {"GET", "/v1/inboxes/%c0%80"},
		{"GET", "/v1/inboxes/%ed%a0%80/rate-limit"}, {"GET", "/v1/threads/%fe"}, {"GET", "/v1/messages/%ff"},
		{"GET", "/v1/messages?inbox_id=%ff"}, {"GET", "/v1/messages?thread_id=%ff"}, {"GET", "/v1/threads?inbox_id=%ff"},
		{"GET", "/v1/messages?inbox_id={inbox}&q=%ed%a0%80"}, {"GET", "/v1/messages?inbox_id={inbox}&q=a%ffb"},
		{"GET", "/v1/inboxes?%ff=1"},
	} {
		cases = append(cases, badCase{name: "not UTF-8: " + tc.method + " " + tc.path, method: tc.method, path: tc.path,
			status: 422, code: "validation_error", detail: "UTF-8"})
	}
	cases = append(cases, badCase{name: "not UTF-8: PATCH", method: "PATCH", path: "/v1/inboxes/%ff", body: `{"name":"x"}`,
		status: 422, code: "validation_error", detail: "UTF-8"})

	// 13. the username is held to the recipients' rule; a trailing full
	// stop is refused whatever its script
	for _, u := range []string{"ü", "jörg", "a%b", "a!b", "ａ", "a b", "a..b", ".a"} {
		cases = append(cases, badCase{name: "username: " + u, method: "POST", path: "/v1/inboxes", body: inbox("n", u),
			status: 422, code: "validation_error", detail: `"loc":["body","email_username"]`})
	}
	for _, a := range []string{"a@ok.test.", "a@ok.test。", "a@ok.test．", "a@ok.test｡", "a@evil.com。"} {
		cases = append(cases, post("trailing full stop: "+a, addr("to", a), 422, "validation_error", `"loc":["body","to",0]`))
	}

	// 10. DNS rebinding: a Host that is not ours, before any handler
	for _, tc := range []struct{ method, path, host string }{
		{"GET", "/v1/messages?inbox_id={inbox}", "rebind.evil.example"},
		{"GET", "/v1/inboxes", "rebind.evil.example:8000"},
		{"POST", "/v1/messages", "localhost.evil.example"},
		{"GET", "/v1/inboxes", "127.0.0.1.nip.io"},
		{"DELETE", "/v1/inboxes/{inbox}", "evil.example"},
		{"GET", "/metrics", "evil.example"},
		{"GET", "/openapi.json", "evil.example"},
		{"GET", "/v1/nothing-here", "evil.example"},
	} {
		bc := badCase{name: "host: " + tc.method + " " + tc.path + " for " + tc.host, method: tc.method, path: tc.path,
			header: []string{"Host", tc.host}, status: 421, code: "host_not_allowed", detail: "ALLOWED_HOSTS"}
		if tc.method == "POST" {
			bc.body = sendBody()
		}
		cases = append(cases, bc)
	}
	return cases
}

// TestBadInputHostile is issue 17's bad-input suite: every case refused, on
// each database, with nothing sent, nothing stored and nothing changed.
func TestBadInputHostile(t *testing.T) {
	t.Parallel()
	cases := hostileCases()
	forEachDriver(t, func(t *testing.T, driver string) {
		s, inbox := startBadInput(t, driver)
		s.refuseEach(t, inbox, cases)
		// No PATCH changed the inbox.
		r := s.do(t, "GET", "/v1/inboxes/"+inbox, nil, "X-API-Key", "k")
		mustStatus(t, r, http.StatusOK)
		if name := r.JSON(t)["name"]; name != "Support" {
			t.Errorf("inbox name = %q after the refused PATCHes, want %q", name, "Support")
		}
	})
}

// TestBadInputBlocklistRepetition is issue 17, item 9: a blocklist pattern
// with a counted repetition, next to another, blocks what it says.
func TestBadInputBlocklistRepetition(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.OutboundDomainBlocklist = `ev(il){1,2}\.com, bad\.org` })
		inbox := s.createInbox(t, "support")
		for _, to := range []string{"a@evil.com", "a@evilil.com", "a@mx.evil.com", "a@bad.org"} {
			r := s.raw(t, post("to "+to, addrBody("to", to), 0, "", ""), inbox)
			if r.Status != http.StatusForbidden || !bytes.Contains(r.Body, []byte(`"code":"domain_blocked"`)) {
				t.Errorf("send to %s: %d %s, want 403 domain_blocked", to, r.Status, r.Body)
			}
		}
		if n := s.SMTP.Count(); n != 0 {
			t.Errorf("SMTP server received %d messages, want 0", n)
		}
		mustStatus(t, s.send(t, inbox, "a@evililil.com"), http.StatusCreated) // {1,2}: not three times
	})
}

func post(name, body string, status int, code, detail string) badCase {
	return badCase{name: name, method: "POST", path: "/v1/messages", body: body, status: status, code: code, detail: detail}
}

func addrBody(field, a string) string {
	b, _ := json.Marshal([]string{a})
	return sendBody(field, string(b))
}
