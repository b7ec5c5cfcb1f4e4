// Package tests holds the end-to-end tests: the real server (internal/app,
// exactly what the nornweave command runs) on a real PostgreSQL or SQLite
// database, sending through the smtp provider to a real SMTP server on
// 127.0.0.1.
package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// drivers are the databases every end-to-end test runs on.
var drivers = []string{"postgres", "sqlite"}

// forEachDriver runs f once per database, each with its own fresh
// database, the databases in parallel: f must own everything it touches.
func forEachDriver(t *testing.T, f func(t *testing.T, driver string)) {
	for _, d := range drivers {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			f(t, d)
		})
	}
}

// forEachDriverInTurn is forEachDriver one database after the other, for
// a test that measures the whole process and so must run alone.
func forEachDriverInTurn(t *testing.T, f func(t *testing.T, driver string)) {
	for _, d := range drivers {
		t.Run(d, func(t *testing.T) { f(t, d) })
	}
}

// server is a running NornWeave with the SMTP server it sends to.
type server struct {
	*apptest.Server
	SMTP *smtptest.Server
	cfg  config.Config
}

// baseConfig is a valid configuration sending through smtp to mx on a
// fresh database of the given driver.
func baseConfig(t testing.TB, driver string, mx *smtptest.Server) config.Config {
	cfg := apptest.Config(t, driver)
	cfg.EmailProvider, cfg.SMTPHost, cfg.SMTPPort, cfg.SMTPUseTLS = "smtp", mx.Host(), mx.Port(), false
	return cfg
}

// start serves the app from cfg until the end of the test.
func start(t testing.TB, cfg config.Config, mx *smtptest.Server) *server {
	t.Helper()
	return &server{Server: apptest.Start(t, cfg), SMTP: mx, cfg: cfg}
}

// startDefault starts a server on driver with an SMTP server and the given
// changes to the base configuration.
func startDefault(t testing.TB, driver string, change func(*config.Config)) *server {
	mx := smtptest.Start(t)
	cfg := baseConfig(t, driver, mx)
	if change != nil {
		change(&cfg)
	}
	return start(t, cfg, mx)
}

// startPaged is startDefault whose list answers carry at most pageBytes
// of bodies (app.WithPageBytes), so that a test cuts pages with small
// messages.
func startPaged(t testing.TB, driver string, pageBytes int64) *server {
	mx := smtptest.Start(t)
	cfg := baseConfig(t, driver, mx)
	return &server{Server: apptest.StartWith(t, cfg, apptest.Options{PageBytes: pageBytes}), SMTP: mx, cfg: cfg}
}

// response is a decoded HTTP answer.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map.
func (r response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.Body, err)
	}
	return m
}

// do sends a request with an optional JSON body and headers (key, value, ...).
func (s *server) do(t testing.TB, method, path string, body any, headers ...string) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		if raw, ok := body.(string); ok {
			rd = bytes.NewBufferString(raw)
		} else {
			b, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			rd = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	checkResponse(t, req, res.StatusCode, res.Header, b) // against openapi.json
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// mustStatus fails the test unless r has the wanted status.
func mustStatus(t testing.TB, r response, want int) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status = %d, want %d; body %s", r.Status, want, r.Body)
	}
}

// createInbox creates an inbox and returns its id.
func (s *server) createInbox(t testing.TB, username string, headers ...string) string {
	t.Helper()
	r := s.do(t, "POST", "/v1/inboxes", map[string]any{"name": "Support", "email_username": username}, headers...)
	mustStatus(t, r, http.StatusCreated)
	return r.JSON(t)["id"].(string)
}

// send posts a simple message from inbox to one recipient.
func (s *server) send(t testing.TB, inboxID, to string) response {
	return s.do(t, "POST", "/v1/messages", map[string]any{
		"inbox_id": inboxID, "to": []string{to}, "subject": "Hello", "body": "Hi **there**",
	})
}
