package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/address"
)

func TestDemoSend(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	d := NewDemo(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	m := Message{
		MessageID: "<id-1@example.com>",
		From:      "inbox@example.com",
		To:        address.MustParseList("secret-to@example.org"),
		Cc:        address.MustParseList("secret-cc@example.org"),
		Bcc:       address.MustParseList("secret-bcc@example.org"),
		Subject:   "Hello",
		Text:      "private body text",
		HTML:      "<p>private body html</p>",
	}

	id, err := d.Send(context.Background(), m)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if id != m.MessageID {
		t.Errorf("got id %q, want %q", id, m.MessageID)
	}
	if got := d.Name(); got != "demo" {
		t.Errorf("got Name %q, want demo", got)
	}

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d log lines, want 1:\n%s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("log line is not JSON: %v", err)
	}
	want := map[string]any{
		"level": "DEBUG", "message_id_header": m.MessageID, "from": m.From,
		"recipient_count": float64(3), "subject_length": float64(5),
	}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("log %s: got %v, want %v", k, rec[k], v)
		}
	}
	for _, secret := range []string{"secret-to", "secret-cc", "secret-bcc", "private body"} {
		if strings.Contains(buf.String(), secret) {
			t.Errorf("log contains %q: %s", secret, buf.String())
		}
	}
}

func TestDemoCancelledContext(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	d := NewDemo(slog.New(slog.NewTextHandler(&buf, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	id, err := d.Send(ctx, Message{MessageID: "<x@example.com>", To: address.MustParseList("a@example.org")})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got error %v, want context.Canceled", err)
	}
	if id != "" {
		t.Errorf("got id %q, want none", id)
	}
	if buf.Len() != 0 {
		t.Errorf("got log output for a cancelled send: %s", buf.String())
	}
}

func TestDemoNilLogger(t *testing.T) {
	t.Parallel()
	if _, err := NewDemo(nil).Send(context.Background(), Message{MessageID: "<x@example.com>"}); err != nil {
		t.Errorf("Send with a nil logger: %v", err)
	}
}
