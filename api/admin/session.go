package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"time"
)

// A session cookie is base64url(id ‖ expiry) "." base64url(HMAC-SHA256):
// 16 random bytes of id, the expiry in Unix seconds, and a MAC under a key
// derived from the server key and the API key. It carries neither key;
// changing API_KEY ends every session, since the MAC key changes with it.

const (
	idLen      = 16
	payloadLen = idLen + 8
	// maxRevoked bounds the logouts remembered; past it, those that
	// expire first are forgotten first.
	maxRevoked = 10000
)

var (
	errMalformed = errors.New("admin: malformed session")
	errBadMAC    = errors.New("admin: session signature does not match")
	errExpired   = errors.New("admin: session expired")
	errRevoked   = errors.New("admin: session logged out")
)

// sessions signs and checks session cookies, and remembers the sessions
// logged out until they would have expired. It is safe for concurrent use.
type sessions struct {
	key []byte

	mu      sync.Mutex
	revoked map[[idLen]byte]time.Time // id → expiry
}

// newSessions derives the MAC key from the server's shared key and the
// API key, so that a cookie outlives neither.
func newSessions(serverKey []byte, apiKey string) *sessions {
	m := hmac.New(sha256.New, serverKey)
	m.Write([]byte("nornweave admin session v1\x00"))
	m.Write([]byte(apiKey))
	return &sessions{key: m.Sum(nil), revoked: map[[idLen]byte]time.Time{}}
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

// check returns the session's id and expiry if v is a cookie this server
// (or another on the same database and API key) issued, not expired at
// now and not logged out here.
func (s *sessions) check(v string, now time.Time) ([idLen]byte, time.Time, error) {
	var id [idLen]byte
	ps, ms, ok := strings.Cut(v, ".")
	if !ok {
		return id, time.Time{}, errMalformed
	}
	p, err1 := base64.RawURLEncoding.DecodeString(ps)
	m, err2 := base64.RawURLEncoding.DecodeString(ms)
	if err1 != nil || err2 != nil || len(p) != payloadLen {
		return id, time.Time{}, errMalformed
	}
	if !hmac.Equal(m, s.mac(p)) {
		return id, time.Time{}, errBadMAC
	}
	copy(id[:], p)
	exp := time.Unix(int64(binary.BigEndian.Uint64(p[idLen:])), 0)
	if !now.Before(exp) {
		return id, exp, errExpired
	}
	s.mu.Lock()
	_, gone := s.revoked[id]
	s.mu.Unlock()
	if gone {
		return id, exp, errRevoked
	}
	return id, exp, nil
}

// revoke remembers that session id, valid until exp, was logged out.
func (s *sessions) revoke(id [idLen]byte, exp, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.revoked) >= maxRevoked {
		for k, e := range s.revoked {
			if !now.Before(e) {
				delete(s.revoked, k)
			}
		}
	}
	for len(s.revoked) >= maxRevoked {
		var first [idLen]byte
		var at time.Time
		for k, e := range s.revoked {
			if at.IsZero() || e.Before(at) {
				first, at = k, e
			}
		}
		delete(s.revoked, first)
	}
	s.revoked[id] = exp
}

func (s *sessions) mac(p []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(p)
	return m.Sum(nil)
}

func enc(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
