// Package bounce reads the bounces of messages sent through the SMTP
// provider: the delivery status notifications (RFC 3464) that remote
// servers send back to the envelope sender. Each message is sent from a
// VERP address, bounces+<token>@example.com, one per recipient, whose token
// names the message and the recipient under a server key; a DSN counts only
// if it comes back to such an address, the token is ours, and the failed
// recipient it reports is the one the token was made for. Anything else in
// the bounce mailbox (auto-replies, spam, a DSN with a forged token, a
// qmail-style plain-text bounce) is not a bounce and is left where it is.
//
// The package has three parts: VERP (the tokens), ParseDSN and
// VERP.Attribute (a notification read into events), and Poller (the IMAP
// mailbox where the bounces arrive, polled, with the handled ones moved
// away).
package bounce

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/nornweave/nornweave/core/address"
)

// The token is base32 (lower case, no padding) of 30 bytes: the message's
// UUID (16), a keyed tag of the recipient (4) and a MAC of the two (10).
// 30 bytes are 48 characters exactly, so no padding and no spare bits: one
// string decodes to one token, and the local part "bounces+" + 48 stays
// within the 64 octets RFC 5321 allows.
//
// The recipient is bound, not carried: a DSN names the recipient that
// failed, and the tag says whether that is the one this token was made
// for. The tag is keyed, so a token shows nothing of the address to anyone
// who would guess it; 32 bits suffice because the MAC (80 bits) covers it:
// a tag cannot be chosen, only compared.
const (
	idLen    = 16
	tagLen   = 4
	macLen   = 10
	tokenLen = idLen + tagLen + macLen
	// TokenChars is the length of a token in an address.
	TokenChars = tokenLen * 8 / 5
	// MinKeyLen is the shortest server key NewVERP accepts (128 bits).
	MinKeyLen = 16
	// maxLocal is RFC 5321's limit on a local part.
	maxLocal = 64
)

// encoding is base32 lower-cased: letters and 2-7 are atext, and a server
// that lower-cases local parts changes nothing.
var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Domain separation of the two uses of the key.
const (
	tagContext = "nornweave/verp/v1/recipient\x00"
	macContext = "nornweave/verp/v1/token\x00"
)

// Errors of VERP.Parse and VERP.Match.
var (
	// ErrNotVERP: the address is not one of ours at all (another domain,
	// another local part, no token). Most mail in a bounce mailbox is this.
	ErrNotVERP = errors.New("not a VERP address of the bounce address")
	// ErrForged: the address has our form but its token is not one we
	// made: altered, truncated, or made with another key.
	ErrForged = errors.New("VERP token is not valid")
	// ErrRecipient: the token is ours but was made for another recipient.
	ErrRecipient = errors.New("VERP token was not made for this recipient")
)

// VERP makes and checks the per-message, per-recipient return paths
// derived from one bounce address. It is immutable and safe for
// concurrent use.
type VERP struct {
	local  string // lower-cased local part of the bounce address
	domain string // its canonical domain
	key    []byte
}

// Token is what a verified VERP address names: one of our messages, and a
// recipient given only as a tag (see VERP.IsFor).
type Token struct {
	// MessageID is our message's id, a lower-case UUID.
	MessageID string
	tag       [tagLen]byte
}

// NewVERP derives return paths from bounceAddress (BOUNCE_ADDRESS, e.g.
// bounces@example.com) under key, which must be at least MinKeyLen bytes
// and must stay the same while bounces of sent messages can still arrive
// (days): a token made under another key is refused as forged. The local
// part may not contain '+', the token's delimiter, and must leave room for
// the token within 64 octets.
func NewVERP(bounceAddress string, key []byte) (*VERP, error) {
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("bounce: VERP key of %d bytes, want at least %d", len(key), MinKeyLen)
	}
	a, err := address.Parse(bounceAddress)
	if err != nil {
		return nil, fmt.Errorf("bounce: bounce address: %w", err)
	}
	if a.Name != "" || strings.Count(bounceAddress, "@") != 1 {
		return nil, fmt.Errorf("bounce: bounce address %q: want a bare local@domain", bounceAddress)
	}
	if a.IsIPLiteral() {
		return nil, fmt.Errorf("bounce: bounce address %q: want a domain, not an IP literal", bounceAddress)
	}
	if strings.Contains(a.Local, "+") {
		return nil, fmt.Errorf("bounce: bounce address %q: local part must not contain '+', the token delimiter", bounceAddress)
	}
	if n := len(a.Local) + 1 + TokenChars; n > maxLocal {
		return nil, fmt.Errorf("bounce: bounce address %q: local part too long: with the token it is %d octets, at most %d",
			bounceAddress, n, maxLocal)
	}
	return &VERP{local: strings.ToLower(a.Local), domain: a.Domain, key: append([]byte(nil), key...)}, nil
}

// ReturnPath is the envelope sender (MAIL FROM) for messageID, a UUID, sent
// to recipient: bounces+<token>@domain. A message to several recipients
// goes in one SMTP transaction, with one envelope sender: recipient ""
// makes a token for any recipient of the message (AnyRecipient), whose
// bounces name the recipient that failed, which the caller checks against
// the message's recipients (Bounce.AnyRecipient).
func (v *VERP) ReturnPath(messageID, recipient string) (string, error) {
	id, err := parseMessageID(messageID)
	if err != nil {
		return "", err
	}
	rcpt := ""
	if recipient != "" {
		if rcpt, err = canonical(recipient); err != nil {
			return "", fmt.Errorf("bounce: return path: %w", err)
		}
	}
	var raw [tokenLen]byte
	copy(raw[:idLen], id[:])
	tag := v.tag(rcpt)
	copy(raw[idLen:], tag[:])
	copy(raw[idLen+tagLen:], v.mac(raw[:idLen+tagLen]))
	return v.local + "+" + encoding.EncodeToString(raw[:]) + "@" + v.domain, nil
}

// Parse checks that addr is a VERP address of ours with a valid token,
// whatever its case, and returns what the token names. It answers
// ErrNotVERP or ErrForged (wrapped) otherwise.
func (v *VERP) Parse(addr string) (Token, error) {
	a, err := address.Parse(addr)
	if err != nil {
		return Token{}, fmt.Errorf("bounce: %w: %w", ErrNotVERP, err)
	}
	local := strings.ToLower(a.Local)
	tok, ok := strings.CutPrefix(local, v.local+"+")
	if !ok || a.Domain != v.domain {
		return Token{}, fmt.Errorf("bounce: %q: %w", addr, ErrNotVERP)
	}
	// The decoder skips CR and LF and accepts shorter input: the length
	// and alphabet are checked first, so one token has one spelling.
	if len(tok) != TokenChars || strings.Trim(tok, "abcdefghijklmnopqrstuvwxyz234567") != "" {
		return Token{}, fmt.Errorf("bounce: %q: %w: malformed", addr, ErrForged)
	}
	raw, err := encoding.DecodeString(tok)
	if err != nil || len(raw) != tokenLen {
		return Token{}, fmt.Errorf("bounce: %q: %w: malformed", addr, ErrForged)
	}
	if !hmac.Equal(raw[idLen+tagLen:], v.mac(raw[:idLen+tagLen])) {
		return Token{}, fmt.Errorf("bounce: %q: %w", addr, ErrForged)
	}
	t := Token{MessageID: uuid.UUID(raw[:idLen]).String()}
	copy(t.tag[:], raw[idLen:idLen+tagLen])
	return t, nil
}

// IsFor reports whether t was made for recipient (compared in canonical
// form, case-insensitively). An address that does not parse is not.
// AnyRecipient reports whether t was made for any recipient of its
// message (ReturnPath with recipient "").
func (v *VERP) AnyRecipient(t Token) bool {
	tag := v.tag("")
	return hmac.Equal(tag[:], t.tag[:])
}

func (v *VERP) IsFor(t Token, recipient string) bool {
	rcpt, err := canonical(recipient)
	if err != nil {
		return false
	}
	tag := v.tag(rcpt)
	return hmac.Equal(tag[:], t.tag[:])
}

// Match is Parse and IsFor in one: the message id addr names, if its token
// is valid and was made for recipient; ErrNotVERP, ErrForged or
// ErrRecipient (wrapped) otherwise.
func (v *VERP) Match(addr, recipient string) (string, error) {
	t, err := v.Parse(addr)
	if err != nil {
		return "", err
	}
	if !v.IsFor(t, recipient) {
		return "", fmt.Errorf("bounce: %q for %q: %w", addr, recipient, ErrRecipient)
	}
	return t.MessageID, nil
}

func (v *VERP) tag(canonicalRecipient string) [tagLen]byte {
	m := hmac.New(sha256.New, v.key)
	m.Write([]byte(tagContext))
	m.Write([]byte(canonicalRecipient))
	var t [tagLen]byte
	copy(t[:], m.Sum(nil))
	return t
}

func (v *VERP) mac(idAndTag []byte) []byte {
	m := hmac.New(sha256.New, v.key)
	m.Write([]byte(macContext))
	m.Write(idAndTag)
	return m.Sum(nil)[:macLen]
}

// parseMessageID accepts our message ids only: a UUID in its 36-character
// form, either case.
func parseMessageID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.UUID{}, fmt.Errorf("bounce: message id %q is not a UUID in its 36-character form", s)
	}
	return id, nil
}

// canonical is the recipient as the token binds it: address.Parse's Key,
// the addr-spec with a normalised domain, lower-cased.
func canonical(recipient string) (string, error) {
	a, err := address.Parse(recipient)
	if err != nil {
		return "", err
	}
	return a.Key(), nil
}
