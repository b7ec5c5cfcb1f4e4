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
