package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// A session cookie is base64url(id ‖ expiry) "." base64url(HMAC-SHA256):
// 16 random bytes of id, the expiry in Unix seconds, and a MAC under a key
// derived from the server key and the API key. It carries neither key;
// changing API_KEY ends every session, since the MAC key changes with it.
// A logout is not in the cookie: the handler records the id through
// Options.Revoke (the database's admin_logouts), so that every server
// refuses a copy of the cookie, before and after a restart.

const (
	idLen      = 16
	payloadLen = idLen + 8
)

var (
	errMalformed = errors.New("admin: malformed session")
	errBadMAC    = errors.New("admin: session signature does not match")
	errExpired   = errors.New("admin: session expired")
)

// sessions signs and checks session cookies. It holds nothing but its
// key, and is safe for concurrent use.
type sessions struct {
	key []byte
}

// newSessions derives the MAC key from the server's shared key and the
// API key, so that a cookie outlives neither.
func newSessions(serverKey []byte, apiKey string) *sessions {
	m := hmac.New(sha256.New, serverKey)
	m.Write([]byte("nornweave admin session v1\x00"))
	m.Write([]byte(apiKey))
	return &sessions{key: m.Sum(nil)}
}

// issue returns a new session's cookie value, valid until exp.
func (s *sessions) issue(exp time.Time) (string, error) {
	var p [payloadLen]byte
	if _, err := rand.Read(p[:idLen]); err != nil {
		return "", err
	}
	binary.BigEndian.PutUint64(p[idLen:], uint64(exp.Unix()))
	return enc(p[:]) + "." + enc(s.mac(p[:])), nil
}

// check returns the session's id (hex) and expiry if v is a cookie this
// server (or another on the same database and API key) issued, not
// expired at now. Whether it was logged out is the handler's question.
func (s *sessions) check(v string, now time.Time) (string, time.Time, error) {
	ps, ms, ok := strings.Cut(v, ".")
	if !ok {
		return "", time.Time{}, errMalformed
	}
	p, err1 := base64.RawURLEncoding.DecodeString(ps)
	m, err2 := base64.RawURLEncoding.DecodeString(ms)
	if err1 != nil || err2 != nil || len(p) != payloadLen {
		return "", time.Time{}, errMalformed
	}
	if !hmac.Equal(m, s.mac(p)) {
		return "", time.Time{}, errBadMAC
	}
	id := hex.EncodeToString(p[:idLen])
	exp := time.Unix(int64(binary.BigEndian.Uint64(p[idLen:])), 0)
	if !now.Before(exp) {
		return id, exp, errExpired
	}
	return id, exp, nil
}

func (s *sessions) mac(p []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(p)
	return m.Sum(nil)
}

func enc(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
