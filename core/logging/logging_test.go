package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
)

func TestRequestIDOnEveryLine(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelDebug).With(slog.String("component", "test"))
	ctx := WithRequestID(context.Background(), "req-123")
	log.InfoContext(ctx, "hello", slog.Int("n", 1))
	log.Info("no context")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2: %s", len(lines), buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &second); err != nil {
		t.Fatal(err)
	}
	if first["request_id"] != "req-123" || first["component"] != "test" {
		t.Errorf("first line = %v, want request_id req-123 and component test", first)
	}
	if _, ok := second["request_id"]; ok {
		t.Errorf("second line = %v, want no request_id", second)
	}
}

// A library's Printf line becomes one slog line with the request id of its
// context.
func TestPrintfLogger(t *testing.T) {
	var buf bytes.Buffer
	p := PrintfLogger{Logger: New(&buf, slog.LevelDebug), Level: slog.LevelWarn, Msg: "redis client"}
	p.Printf(WithRequestID(context.Background(), "req-9"), "redis: connection pool: failed to dial after %d attempts\n", 5)
	var m map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &m); err != nil {
		t.Fatalf("not one JSON line: %q", buf.String())
	}
	want := map[string]any{"level": "WARN", "msg": "redis client", "request_id": "req-9",
		"detail": "connection pool: failed to dial after 5 attempts"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
}

// AtLeast drops what is below its level and keeps the rest, request id
// and attributes included.
func TestAtLeast(t *testing.T) {
	var buf bytes.Buffer
	log := AtLeast(New(&buf, slog.LevelDebug), slog.LevelWarn).With(slog.String("component", "sdk"))
	ctx := WithRequestID(context.Background(), "req-1")
	log.InfoContext(ctx, "server connecting")
	log.WarnContext(ctx, "rejecting request")
	var m map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &m); err != nil {
		t.Fatalf("want exactly the WARN line, got %q", buf.String())
	}
	if m["msg"] != "rejecting request" || m["request_id"] != "req-1" || m["component"] != "sdk" {
		t.Errorf("line = %v", m)
	}
}
