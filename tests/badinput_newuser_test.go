package tests

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// What a new user tripped on (issue 25, "Tried as a new user would"),
// each as the user met it: the compose file, the README's and the
// OpenAPI document's examples, the logs.

// The compose demo runs without API_KEY: every port it publishes is on the
// host's loopback, every image is a released version (Mailpit was
// :latest), and the README and docs/ pages say the stop_grace_period the
// file has (the README said 5m where the file has 6m).
func TestComposePublishesOnLoopbackAndPinsImages(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	compose := string(raw)
	// Published ports are the list items under a ports: key.
	var ports []string
	lines := strings.Split(compose, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "ports:" {
			continue
		}
		for _, item := range lines[i+1:] {
			spec, ok := strings.CutPrefix(strings.TrimSpace(item), "- ")
			if !ok {
				break
			}
			ports = append(ports, strings.Trim(spec, `"'`))
		}
	}
	if len(ports) == 0 {
		t.Fatal("docker-compose.yml publishes no port: the test reads it wrong")
	}
	for _, spec := range ports {
		if !strings.HasPrefix(spec, "127.0.0.1:") {
			t.Errorf("port %q is published on every interface of the host, want 127.0.0.1:…", spec)
		}
	}
	images := regexp.MustCompile(`(?m)^\s*image:\s*(\S+)`).FindAllStringSubmatch(compose, -1)
	sawMailpit := false
	for _, m := range images {
		image := m[1]
		if image == "nornweave:local" { // built by the file itself
			continue
		}
		name, tag, ok := strings.Cut(image, ":")
		if !ok || tag == "latest" || tag == "" {
			t.Errorf("image %q is not pinned to a version", image)
		}
		if name == "axllent/mailpit" {
			sawMailpit = true
			if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(tag) {
				t.Errorf("Mailpit's tag %q is not a released version vX.Y.Z", tag)
			}
		}
	}
	if !sawMailpit {
		t.Error("docker-compose.yml has no axllent/mailpit image: the test reads it wrong")
	}

	grace := regexp.MustCompile(`(?m)^\s*stop_grace_period:\s*(\S+)`).FindAllStringSubmatch(compose, -1)
	if len(grace) != 1 {
		t.Fatalf("docker-compose.yml sets stop_grace_period %d times, want once (shared by both servers)", len(grace))
	}
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	saidAnywhere := false
	for _, page := range append([]string{"../README.md"}, pages...) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile("stop_grace_period: ?([0-9a-z]+)").FindAllStringSubmatch(string(text), -1) {
			saidAnywhere = true
			if m[1] != grace[0][1] {
				t.Errorf("%s says stop_grace_period: %s, the compose file has %s", page, m[1], grace[0][1])
			}
		}
	}
	if !saidAnywhere {
		t.Fatal("neither the README nor a docs/ page says the compose file's stop_grace_period")
	}
}

// logLines are the JSON lines a server wrote, decoded.
func logLines(t *testing.T, buf *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, raw := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		out = append(out, l)
	}
	return out
}

// The throttle's refusal summary, and the access log's summary of 429s,
// are written when their 10 s are up, by timers, with no further request
// to trigger them: one came 9 minutes late, with the next refusal. The server runs on a fake clock, which the
// test advances across the interval instead of waiting.
func TestRefusalSummaryIsWrittenOnTime(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		var log syncBuffer
		clock := clocktest.New(time.Now().UTC())
		mx := smtptest.Start(t)
		cfg := baseConfig(t, driver, mx)
		cfg.SendRateLimitPerMinute = 1
		s := &server{Server: apptest.StartWith(t, cfg, apptest.Options{Log: &log, LogLevel: slog.LevelInfo, Clock: clock}),
			SMTP: mx, cfg: cfg}
		inbox := s.createInbox(t, "support")
		mustStatus(t, s.send(t, inbox, "ann@example.com"), http.StatusCreated)
		for range 3 { // the first in full, two counted
			mustStatus(t, s.send(t, inbox, "ann@example.com"), http.StatusTooManyRequests)
		}
		summaries := func() []map[string]any {
			var out []map[string]any
			for _, l := range logLines(t, &log) {
				if strings.HasSuffix(l["msg"].(string), "since the last report") {
					out = append(out, l)
				}
			}
			return out
		}
		clock.Advance(10*time.Second - time.Millisecond)
		if got := summaries(); len(got) != 0 {
			t.Fatalf("a summary before its 10 s were up: %v", got)
		}
		clock.Advance(time.Millisecond)
		// The pipeline's summary and the access log's, of the same two
		// 429s, in either order: both timers end the same 10 s.
		got := map[string]map[string]any{}
		for _, l := range summaries() {
			got[l["msg"].(string)] = l
		}
		pipeline, access := got["sends refused by throttle since the last report"], got["requests answered 429 since the last report"]
		if len(got) != 2 || pipeline["refused"] != 2.0 || pipeline["per_minute_full"] != 2.0 || pipeline["over_ms"] != 10000.0 ||
			access["count"] != 2.0 || access["over_ms"] != 10000.0 {
			t.Fatalf("10 s after the first refusal, with no request since: summaries %v, want the pipeline's and the "+
				"access log's, each of 2 refusals over 10000 ms\n%s", got, log.String())
		}
	})
}

// A send with the demo provider is logged once, as what happened: one
// INFO line, "message sent", provider demo, with the message's id. The
// demo provider used to log "message not sent" just before it.
func TestDemoProviderSendIsLoggedOnce(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		var log syncBuffer
		s := &server{Server: apptest.StartWith(t, apptest.Config(t, driver), apptest.Options{Log: &log, LogLevel: slog.LevelInfo})}
		inbox := s.createInbox(t, "support")
		r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"ann@example.com"},
			"subject": "Hello", "body": "Hi"})
		mustStatus(t, r, http.StatusCreated)
		id := r.JSON(t)["id"].(string)
		var about []map[string]any
		for _, l := range logLines(t, &log) {
			if msg, _ := l["msg"].(string); strings.Contains(msg, "sent") || l["message_id"] != nil || l["message_id_header"] != nil {
				about = append(about, l)
			}
		}
		if len(about) != 1 || about[0]["msg"] != "message sent" || about[0]["level"] != "INFO" ||
			about[0]["provider"] != "demo" || about[0]["message_id"] != id {
			t.Errorf("log lines about the send: %v\nwant one INFO \"message sent\", provider demo, message_id %s", about, id)
		}
	})
}

// message_id is the message's id, as the API shows it, in every line;
// the Message-ID header is message_id_header, as in the API's answers.
// The SMTP provider's DEBUG line said message_id for the header.
func TestLogMessageIDIsTheMessagesID(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		var log syncBuffer
		mx := smtptest.Start(t)
		cfg := baseConfig(t, driver, mx)
		s := &server{Server: apptest.StartWith(t, cfg, apptest.Options{Log: &log, LogLevel: slog.LevelDebug}), SMTP: mx, cfg: cfg}
		inbox := s.createInbox(t, "support")
		r := s.send(t, inbox, "ann@example.com")
		mustStatus(t, r, http.StatusCreated)
		id := r.JSON(t)["id"].(string)
		m := s.do(t, "GET", "/v1/messages/"+id, nil)
		mustStatus(t, m, http.StatusOK)
		header := m.JSON(t)["message_id_header"].(string)

		seen := map[string]bool{}
		for _, l := range logLines(t, &log) {
			if v, ok := l["message_id"]; ok {
				seen["message_id"] = true
				if v != id {
					t.Errorf("%q: message_id = %v, want the message's id %s", l["msg"], v, id)
				}
			}
			if v, ok := l["message_id_header"]; ok {
				seen["message_id_header"] = true
				if v != header {
					t.Errorf("%q: message_id_header = %v, want the Message-ID %s", l["msg"], v, header)
				}
			}
		}
		if !seen["message_id"] || !seen["message_id_header"] {
			t.Errorf("the send's lines carry %v, want both message_id (message sent) and message_id_header (the SMTP provider's)\n%s",
				seen, log.String())
		}
	})
}

// docBlock is the first ```sh block of the Markdown file page (the
// README, a docs/ page) after heading that contains want.
func docBlock(t *testing.T, page, heading, want string) string {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut("\n"+string(raw), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no heading %q", page, heading)
	}
	for {
		var block string
		if _, rest, ok = strings.Cut(rest, "```sh\n"); !ok {
			t.Fatalf("%s has no sh block with %q after %q", page, want, heading)
		}
		block, rest, _ = strings.Cut(rest, "```")
		if strings.Contains(block, want) {
			return block
		}
	}
}

// runREADME runs a command of the README or a docs/ page with bash against
// s, as a user would paste it: localhost:8000 is s, $INBOX (or <inbox-id>)
// the inbox, <id> the message. It returns what curl printed.
func runREADME(t *testing.T, s *server, script, inbox, id string) map[string]any {
	t.Helper()
	script = strings.NewReplacer("localhost:8000", strings.TrimPrefix(s.URL, "http://"),
		"<inbox-id>", inbox, "<id>", id).Replace(script)
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "INBOX="+inbox)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s\n: %v", script, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("%s\nprinted %q, not a JSON object: %v", script, out, err)
	}
	return m
}

// The scheduled-send and PATCH examples of docs/held-mail.md (the README's
// until issue 28), pasted into a shell, and
// the OpenAPI document's "scheduled" and "later" examples, sent as Try it
// out sends them, are accepted by a server with the default
// SCHEDULE_MAX_AHEAD: the message is held, then rescheduled. All four
// used 2030 and were refused with 422.
func TestScheduledExamplesAreAccepted(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, nil)
		inbox := s.createInbox(t, "support")
		held := func(what string, m map[string]any, within time.Duration) string {
			t.Helper()
			at, _ := m["scheduled_at"].(string)
			when, err := time.Parse(time.RFC3339Nano, at)
			if m["status"] != "scheduled" || err != nil || time.Until(when) <= 0 || time.Until(when) > within {
				t.Fatalf("%s answered %v, want the message scheduled within %s", what, m, within)
			}
			return m["id"].(string)
		}

		const page, heading = "../docs/held-mail.md", "# Scheduled and queued sends"
		id := held("docs/held-mail.md's scheduled send", runREADME(t, s,
			docBlock(t, page, heading, `"scheduled_at"`), inbox, ""), time.Hour)
		var patch []string // the PATCH command, continuation line included
		for _, l := range strings.Split(docBlock(t, page, heading, "-X PATCH"), "\n") {
			if strings.Contains(l, "-X PATCH") || len(patch) > 0 && strings.HasSuffix(patch[len(patch)-1], `\`) {
				patch = append(patch, l)
			}
		}
		held("docs/held-mail.md's PATCH", runREADME(t, s, strings.Join(patch, "\n"), inbox, id), 2*time.Hour)

		r := s.do(t, "GET", "/openapi.json", nil)
		mustStatus(t, r, http.StatusOK)
		var doc struct {
			Paths map[string]map[string]json.RawMessage
		}
		if err := json.Unmarshal(r.Body, &doc); err != nil {
			t.Fatal(err)
		}
		example := func(path, method, name string) map[string]any {
			t.Helper()
			var op struct {
				RequestBody struct {
					Content map[string]struct {
						Examples map[string]struct{ Value map[string]any }
					}
				}
			}
			if err := json.Unmarshal(doc.Paths[path][method], &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			return op.RequestBody.Content["application/json"].Examples[name].Value
		}
		send := example("/v1/messages", "post", "scheduled")
		send["inbox_id"] = inbox
		r = s.do(t, "POST", "/v1/messages", send)
		mustStatus(t, r, http.StatusAccepted)
		id = held("the OpenAPI scheduled example", r.JSON(t), 32*time.Hour)
		r = s.do(t, "PATCH", "/v1/messages/"+id, example("/v1/messages/{id}", "patch", "later"))
		mustStatus(t, r, http.StatusOK)
		held("the OpenAPI PATCH example", r.JSON(t), 33*time.Hour)
	})
}
