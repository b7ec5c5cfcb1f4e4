package skuld

import (
	"net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/skuld/filter"
	"github.com/nornweave/nornweave/store"
)

// FuzzAddressFilter checks the property behind issue 7.1: for any string a
// client can send as a recipient, the domain the filter judged is exactly
// the domain of the address the provider is given for the envelope, and of
// the address the header shows; and nothing under a blocked domain is
// allowed.
func FuzzAddressFilter(f *testing.F) {
	for _, s := range []string{
		"a@evil.com", "a@evil.com (x)", "g: b@evil.com;", "a@ evil.com", "Bob <a@EVIL.com>",
		"a@ｅｖｉｌ.com", "a@evil。com", "a@evil.com。", "a@mail.evil.com", `"a@ok.test"@evil.com`,
		"a@[127.0.0.1]", "a@127.0.0.1", "=?utf-8?q?x?= <a@evil.com>", "a@xn--vil-9oa.com", "a@évil.com",
		"a@evil.com\r\nBcc: b@x", "a@ok.test", "<a@evil.com>", "a@evil.com.", "(c) a@evil.com",
	} {
		f.Add(s)
	}
	policy, err := filter.New("", `evil\.com`)
	if err != nil {
		f.Fatal(err)
	}
	underEvil := regexp.MustCompile(`(^|\.)evil\.com$`)
	inbox := &store.Inbox{ID: "ib", EmailAddress: "support@acme.test", Name: "Support"}
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := address.Parse(raw)
		if err != nil {
			return
		}
		allowed, judged, _ := policy.Check(a)
		req := SendRequest{To: []address.Address{a}, Cc: []address.Address{a}, Bcc: []address.Address{a}}
		pm := providerMessage(&store.Message{MessageIDHeader: "<m@acme.test>", CreatedAt: time.Now()}, inbox, req)
		for _, list := range [][]address.Address{pm.To, pm.Cc, pm.Bcc} {
			// What go-mail puts in RCPT TO: the address's String without
			// the name, "<addr-spec>".
			ma := list[0].Mail()
			ma.Name = ""
			env := strings.TrimSuffix(strings.TrimPrefix(ma.String(), "<"), ">")
			if env != a.AddrSpec() {
				t.Fatalf("Parse(%q): envelope %q, want the canonical %q", raw, env, a.AddrSpec())
			}
			if envDomain := env[strings.LastIndexByte(env, '@')+1:]; envDomain != judged {
				t.Fatalf("Parse(%q): filter judged %q, envelope uses %q", raw, judged, envDomain)
			}
		}
		// The header form, read back by any RFC 5322 parser, names the same mailbox.
		back, err := mail.ParseAddress(a.String())
		if err != nil || back.Address != a.AddrSpec() {
			t.Fatalf("Parse(%q): header %q reads back as %v, %v; want %q", raw, a.String(), back, err, a.AddrSpec())
		}
		if allowed && underEvil.MatchString(strings.ToLower(judged)) {
			t.Fatalf("Parse(%q) = %q: allowed under a blocked domain", raw, a.AddrSpec())
		}
		if strings.ContainsAny(a.AddrSpec()+a.Name, "\r\n\x00") {
			t.Fatalf("Parse(%q): control character survived in %q", raw, a.String())
		}
	})
}
