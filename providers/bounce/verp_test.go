package bounce_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/providers/bounce"
)

// testKey made the tokens written into the fixtures under testdata.
var testKey = []byte("nornweave-bounce-test-key-32byte")

const (
	msgID = "0190d5a2-3c4e-7b8f-9a01-23456789abcd"
	rcpt  = "nobody@example.org"
)

func newVERP(t testing.TB) *bounce.VERP {
	t.Helper()
	v, err := bounce.NewVERP("bounces@example.com", testKey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func returnPath(t testing.TB, v *bounce.VERP, id, to string) string {
	t.Helper()
	rp, err := v.ReturnPath(id, to)
	if err != nil {
		t.Fatal(err)
	}
	return rp
}

func TestVERPRoundTrip(t *testing.T) {
	v := newVERP(t)
	rp := returnPath(t, v, msgID, rcpt)
	local, domain, _ := strings.Cut(rp, "@")
	if domain != "example.com" || !strings.HasPrefix(local, "bounces+") {
		t.Fatalf("return path %q: want bounces+<token>@example.com", rp)
	}
	if len(local) > 64 || len(local) != len("bounces+")+bounce.TokenChars {
		t.Fatalf("local part of %d octets: %q", len(local), local)
	}
	if strings.ToLower(rp) != rp {
		t.Fatalf("return path %q is not lower case", rp)
	}
	for _, form := range []string{rp, "<" + rp + ">", " " + rp + " "} {
		got, err := v.Match(form, rcpt)
		if err != nil || got != msgID {
			t.Errorf("Match(%q) = %q, %v; want %q", form, got, err, msgID)
		}
	}
	// The same message and recipient give the same address: a message
	// retried is bounced to the address it was sent from.
	if again := returnPath(t, v, msgID, rcpt); again != rp {
		t.Errorf("second ReturnPath %q, want %q", again, rp)
	}
	if other := returnPath(t, v, msgID, "someone@example.org"); other == rp {
		t.Error("two recipients of one message share a token")
	}
}

// An MTA may change the case of the local part, the domain, or the
// recipient; none of that matters.
func TestVERPCaseFolding(t *testing.T) {
	v := newVERP(t)
	rp := returnPath(t, v, strings.ToUpper(msgID), "NoBody@Example.ORG")
	for _, form := range []string{rp, strings.ToUpper(rp), "Bounces+" + strings.TrimPrefix(rp, "bounces+")} {
		for _, to := range []string{rcpt, "NOBODY@EXAMPLE.ORG"} {
			got, err := v.Match(form, to)
			if err != nil || got != msgID {
				t.Errorf("Match(%q, %q) = %q, %v; want %q", form, to, got, err, msgID)
			}
		}
	}
}

func TestVERPRefuses(t *testing.T) {
	v := newVERP(t)
	rp := returnPath(t, v, msgID, rcpt)
	tok := strings.TrimSuffix(strings.TrimPrefix(rp, "bounces+"), "@example.com")
	otherKey, err := bounce.NewVERP("bounces@example.com", []byte("another-key-of-thirty-two-bytes!"))
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, addr, rcpt string
		want             error
	}{
		{"another recipient", rp, "somebody@example.org", bounce.ErrRecipient},
		{"another key", returnPath(t, otherKey, msgID, rcpt), rcpt, bounce.ErrForged},
		{"truncated", "bounces+" + tok[:len(tok)-1] + "@example.com", rcpt, bounce.ErrForged},
		{"extended", "bounces+" + tok + "a@example.com", rcpt, bounce.ErrForged},
		{"outside the alphabet", "bounces+" + tok[:10] + "1" + tok[11:] + "@example.com", rcpt, bounce.ErrForged},
		{"another domain", "bounces+" + tok + "@example.net", rcpt, bounce.ErrNotVERP},
		{"another local part", "returns+" + tok + "@example.com", rcpt, bounce.ErrNotVERP},
		{"the bare bounce address", "bounces@example.com", rcpt, bounce.ErrNotVERP},
		{"not an address", "MAILER-DAEMON", rcpt, bounce.ErrNotVERP},
		{"empty", "", rcpt, bounce.ErrNotVERP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Match(tt.addr, tt.rcpt)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Match(%q) = %q, %v; want %v", tt.addr, got, err, tt.want)
			}
		})
	}
	// Every one-character change of the token, at any place, is refused.
	for i := range len(tok) {
		c := byte('a')
		if tok[i] == 'a' {
			c = 'b'
		}
		addr := "bounces+" + tok[:i] + string(c) + tok[i+1:] + "@example.com"
		if got, err := v.Match(addr, rcpt); !errors.Is(err, bounce.ErrForged) {
			t.Errorf("token altered at %d: Match = %q, %v; want ErrForged", i, got, err)
		}
	}
}

func TestNewVERPRefuses(t *testing.T) {
	tests := []struct {
		name, addr string
		key        []byte
	}{
		{"short key", "bounces@example.com", []byte("fifteen bytes!!")},
		{"plus in the local part", "bounces+x@example.com", testKey},
		{"local part too long for the token", strings.Repeat("b", 64-bounce.TokenChars) + "@example.com", testKey},
		{"two at signs", `"a@b"@example.com`, testKey},
		{"no domain", "bounces", testKey},
		{"display name", "Bounces <bounces@example.com>", testKey},
		{"IP literal", "bounces@[192.0.2.1]", testKey},
		{"empty", "", testKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := bounce.NewVERP(tt.addr, tt.key); err == nil {
				t.Fatalf("NewVERP(%q) accepted", tt.addr)
			}
		})
	}
	// The longest local part that fits is accepted.
	longest := strings.Repeat("b", 64-1-bounce.TokenChars) + "@example.com"
	v, err := bounce.NewVERP(longest, testKey)
	if err != nil {
		t.Fatalf("NewVERP(%q): %v", longest, err)
	}
	rp := returnPath(t, v, msgID, rcpt)
	if local, _, _ := strings.Cut(rp, "@"); len(local) != 64 {
		t.Fatalf("local part of %d octets, want 64", len(local))
	}
}

func TestReturnPathRefuses(t *testing.T) {
	v := newVERP(t)
	for _, tt := range []struct{ id, rcpt string }{
		{"not-a-uuid", rcpt},
		{"0190d5a23c4e7b8f9a0123456789abcd", rcpt}, // no dashes: not our form
		{"urn:uuid:" + msgID, rcpt},
		{msgID, "not an address"},
		{msgID, "a@b.example, c@d.example"},
	} {
		if rp, err := v.ReturnPath(tt.id, tt.rcpt); err == nil {
			t.Errorf("ReturnPath(%q, %q) = %q, want an error", tt.id, tt.rcpt, rp)
		}
	}
}
