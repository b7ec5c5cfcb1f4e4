package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/apptest"
)

// startServer serves the real app (what the nornweave command runs) on
// SQLite and loopback until the test ends, and returns its base URL. smtp
// is the sink's address, or nil for the demo provider.
func startServer(t testing.TB, perMinute int, smtp *net.TCPAddr) string {
	return startServerOn(t, "sqlite", perMinute, smtp)
}

// startServerOn is startServer on a fresh database of the given driver.
func startServerOn(t testing.TB, driver string, perMinute int, smtp *net.TCPAddr) string {
	t.Helper()
	cfg := apptest.Config(t, driver)
	cfg.SendRateLimitPerMinute = perMinute
	if smtp != nil {
		cfg.EmailProvider, cfg.EmailDomain = "smtp", "loadtest.test"
		cfg.SMTPHost, cfg.SMTPPort, cfg.SMTPUseTLS = smtp.IP.String(), smtp.Port, false
	}
	return apptest.Start(t, cfg).URL
}

// TestThrottledRunWithSink is the tool end to end against a server with a
// per-minute limit of 20: of 60 sends exactly 20 go out and reach the sink,
// the other 40 are refused, and the overshoot check fires only when the
// limit it is given is below what the sink saw.
func TestThrottledRunWithSink(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		checkedLimit  int
		wantCode      int
		wantViolation bool
	}{
		{name: "limit kept", checkedLimit: 20, wantCode: 0},
		{name: "overshoot reported", checkedLimit: 19, wantCode: 1, wantViolation: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			url := startServer(t, 20, ln.Addr().(*net.TCPAddr))
			o := options{url: url, clients: 8, requests: 60, duration: maxDuration, json: true,
				perMinute: tt.checkedLimit, sinkListener: ln}
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), o, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr %s", code, tt.wantCode, &stderr)
			}
			rep := decodeReport(t, stdout.Bytes())

			if rep.Requests != 60 {
				t.Errorf("requests = %d, want 60", rep.Requests)
			}
			wantHTTP := map[string]int{"201": 20, "429": 40}
			if !equalCounts(rep.HTTPStatus, wantHTTP) {
				t.Errorf("http status = %v, want %v (first error %q)", rep.HTTPStatus, wantHTTP, rep.FirstError)
			}
			if !equalCounts(rep.SendStatus, map[string]int{"sent": 20}) {
				t.Errorf("send status = %v, want sent=20", rep.SendStatus)
			}
			if rep.Sink == nil {
				t.Fatal("report has no sink section")
			}
			if rep.Sink.Received != 20 || rep.Sink.MaxIn60s != 20 {
				t.Errorf("sink received %d, max in 60 s %d; want 20 and 20", rep.Sink.Received, rep.Sink.MaxIn60s)
			}
			if got := len(rep.Violations) > 0; got != tt.wantViolation {
				t.Errorf("violations = %q, want some: %v", rep.Violations, tt.wantViolation)
			}
		})
	}
}

// TestRunFlags drives run itself, flags and all, against an unlimited
// demo server: the inbox is created by the tool and -requests bounds the run.
func TestRunFlags(t *testing.T) {
	t.Parallel()
	url := startServer(t, 0, nil)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-url", url, "-clients", "4", "-requests", "10", "-json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit code = %d, want 0; stderr %s", code, &stderr)
	}
	rep := decodeReport(t, stdout.Bytes())
	if !equalCounts(rep.HTTPStatus, map[string]int{"201": 10}) || !equalCounts(rep.SendStatus, map[string]int{"sent": 10}) {
		t.Errorf("http status %v, send status %v; want 201=10 and sent=10", rep.HTTPStatus, rep.SendStatus)
	}
	if rep.Sink != nil || rep.Server != nil {
		t.Errorf("sink %v, server %v; want neither without -sink and -spawn", rep.Sink, rep.Server)
	}
}

// TestWebhooksRun is -webhooks end to end against the real app on
// SQLite: both receivers registered, every sent message's event answered
// 2xx at both (at B after one 500), and the server's delivery log agreeing.
func TestWebhooksRun(t *testing.T) {
	t.Parallel()
	cfg := apptest.Config(t, "sqlite")
	cfg.WebhookAllowHTTP, cfg.WebhookAllowPrivateTargets = true, true
	cfg.WebhookRetrySchedule = "100ms,100ms"
	url := apptest.Start(t, cfg).URL
	o := options{url: url, clients: 2, requests: 10, duration: maxDuration, json: true,
		webhooks: true, hookFailFirst: 1, hookWait: time.Minute}
	var stdout, stderr bytes.Buffer
	if code := execute(context.Background(), o, &stdout, &stderr); code != 0 {
		t.Errorf("exit code = %d, want 0; stdout %s; stderr %s", code, &stdout, &stderr)
	}
	rep := decodeReport(t, stdout.Bytes())
	w := rep.Webhooks
	if w == nil {
		t.Fatal("report has no webhooks section")
	}
	if w.Sends != 10 || w.Events != 10 || !w.AllDelivered || w.Ratio <= 0 {
		t.Errorf("sends %d, events at both %d, all delivered %v, ratio %v; want 10, 10, true, > 0",
			w.Sends, w.Events, w.AllDelivered, w.Ratio)
	}
	want := map[string][2]int{"A": {10, 0}, "B": {20, 10}} // requests, answered 500
	for _, r := range w.Receivers {
		if got := [2]int{r.Requests, r.Answered500}; got != want[r.Name] {
			t.Errorf("receiver %s: requests and 500s %v, want %v", r.Name, got, want[r.Name])
		}
		if r.Delivered != 10 || r.MaxPerID != 1 || r.LogEvents != 10 || r.LogMismatches != 0 || !r.Enabled {
			t.Errorf("receiver %s: %+v; want 10 delivered once each, 10 events in the log as answered, enabled", r.Name, r)
		}
	}
}

// TestRunRejectsBadFlags checks that every run stays bounded and on loopback.
func TestRunRejectsBadFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"remote url", []string{"-url", "http://example.com"}, "not a loopback address"},
		{"https url", []string{"-url", "https://127.0.0.1:8000"}, "http:// URL"},
		{"too long", []string{"-duration", "11m"}, "at most 10m0s"},
		{"no duration", []string{"-duration", "0s"}, "-duration"},
		{"no clients", []string{"-clients", "0"}, "-clients"},
		{"negative requests", []string{"-requests", "-1"}, "-requests"},
		{"remote sink", []string{"-sink", "10.0.0.1:25"}, "not a loopback address"},
		{"unknown provider", []string{"-provider", "ses"}, "-provider"},
		{"postgres without url", []string{"-spawn", "./bin/nornweave", "-db", "postgres"}, "-database-url"},
		{"stray argument", []string{"now"}, "unexpected argument"},
		{"fail-first past the schedule", []string{"-webhooks", "-webhook-fail-first", "5"}, "-webhook-fail-first must be 0..4"},
		{"bad schedule", []string{"-webhooks", "-webhook-retry-schedule", "1s,soon"}, "-webhook-retry-schedule"},
		{"negative hang", []string{"-sink-hang", "-1s"}, "-sink-hang"},
		{"no webhook wait", []string{"-webhook-wait", "0s"}, "-webhook-wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit code = %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr = %q, want it to mention %q", &stderr, tt.want)
			}
		})
	}
}

// TestSinkCloseTwice checks that Close is idempotent, even before any mail.
func TestSinkCloseTwice(t *testing.T) {
	t.Parallel()
	ln, err := listenSink("auto")
	if err != nil {
		t.Fatal(err)
	}
	s := startSink(ln, time.Now, 0, apptest.LogWriter{TB: t})
	s.Close()
	s.Close()
	if got := s.Count(); got != 0 {
		t.Errorf("count = %d, want 0", got)
	}
}

// TestSinkHangReleasedByClose checks -sink-hang: a message is held, not
// counted, and Close answers it at once rather than waiting out the hang.
func TestSinkHangReleasedByClose(t *testing.T) {
	t.Parallel()
	ln, err := listenSink("auto")
	if err != nil {
		t.Fatal(err)
	}
	s := startSink(ln, time.Now, time.Hour, apptest.LogWriter{TB: t})
	sent := make(chan error, 1)
	go func() {
		sent <- smtp.SendMail(ln.Addr().String(), nil, "a@loadtest.test", []string{"b@loadtest.test"},
			[]byte("Subject: held\r\n\r\nbody\r\n"))
	}()
	select {
	case err := <-sent:
		t.Fatalf("send answered (%v) while the sink should hold it", err)
	case <-time.After(200 * time.Millisecond):
	}
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while a message was held")
	}
	if err := <-sent; err == nil {
		t.Error("held send succeeded, want an error once the sink closed")
	}
	if got := s.Count(); got != 0 {
		t.Errorf("count = %d, want 0: a held message is not received", got)
	}
}

func decodeReport(t *testing.T, b []byte) report {
	t.Helper()
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report %q is not JSON: %v", b, err)
	}
	return rep
}

func equalCounts(got, want map[string]int) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
