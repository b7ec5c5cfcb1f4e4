package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

func TestMCPIdempotencyKey(t *testing.T) {
	e := newMCPEnv(t)
	id := e.ok("create_inbox", map[string]any{"name": "Support", "username": "support"})["id"]
	args := map[string]any{"inbox_id": id, "to": []string{"ann@example.com"}, "subject": "Once",
		"body": "b", "idempotency_key": "order-42"}
	first := e.ok("send_email", args)
	// The same request, its arguments in another order and one address
	// given as recipient instead, is the same send: replayed.
	again := e.ok("send_email", map[string]any{"idempotency_key": "order-42", "body": "b", "subject": "Once",
		"recipient": "ann@example.com", "inbox_id": id})
	if again["replayed"] != true || again["message_id"] != first["message_id"] {
		t.Errorf("retry = %v, want the first send replayed", again)
	}
	if n := e.out.count(); n != 1 {
		t.Errorf("provider got %d messages, want 1", n)
	}
	args["subject"] = "Twice?"
	if r, _ := e.refused("send_email", args); r.Code != "idempotency_key_reused" {
		t.Errorf("same key, other request = %+v, want idempotency_key_reused", r)
	}
	// The same key while its first call is still sending: 409's code.
	e.out.held, e.out.release = make(chan struct{}), make(chan struct{})
	slow := map[string]any{"inbox_id": id, "to": []string{"bob@example.com"}, "subject": "Slow", "body": "b",
		"idempotency_key": "slow"}
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, _ := e.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "send_email", Arguments: slow})
		done <- res
	}()
	<-e.out.held
	if r, _ := e.refused("send_email", slow); r.Code != "idempotency_key_in_flight" {
		t.Errorf("same key while in flight = %+v, want idempotency_key_in_flight", r)
	}
	close(e.out.release)
	if first := <-done; first == nil || first.IsError {
		t.Errorf("the first call = %+v, want it sent", first)
	}
	e.out.held = nil
	args["idempotency_key"] = "bad\nkey"
	if r, _ := e.refused("send_email", args); r.Code != "invalid_idempotency_key" {
		t.Errorf("bad key = %+v, want invalid_idempotency_key", r)
	}
}

// Every class of refusal an agent meets, each with the REST API's code,
// a sentence, and what it needs to act.
func TestMCPRefusals(t *testing.T) {
	e := newMCPEnv(t)
	id := e.ok("create_inbox", map[string]any{"name": "Support", "username": "support"})["id"]
	send := func(to ...string) map[string]any {
		return map[string]any{"inbox_id": id, "to": to, "subject": "Hi", "body": "b"}
	}

	t.Run("validation_error", func(t *testing.T) {
		r, txt := e.refused("send_email", map[string]any{"inbox_id": id, "to": []string{"not an address"},
			"body": "b", "thread": "t1"})
		var locs []string
		for _, fe := range r.Errors {
			locs = append(locs, fmt.Sprint(fe.Loc))
		}
		slices.Sort(locs)
		want := []string{"[arguments subject]", "[arguments thread]", "[arguments to 0]"}
		if r.Code != "validation_error" || !slices.Equal(locs, want) {
			t.Errorf("refusal = %+v, locs %v, want %v", r, locs, want)
		}
		if !strings.Contains(txt, "subject: Field required") || !strings.Contains(txt, "Fix these arguments") {
			t.Errorf("text = %q", txt)
		}
		r, _ = e.refused("send_email", map[string]any{"inbox_id": id, "to": []string{"a@example.com"},
			"recipient": "b@example.com", "subject": "s", "body": "b"})
		if r.Code != "validation_error" || fmt.Sprint(r.Errors[0].Loc) != "[arguments recipient]" {
			t.Errorf("to and recipient = %+v", r)
		}
		// The tool's names, not the REST body's, in the locations.
		r, _ = e.refused("create_inbox", map[string]any{"name": "Support", "username": "not valid"})
		if r.Code != "validation_error" || fmt.Sprint(r.Errors[0].Loc) != "[arguments username]" {
			t.Errorf("bad username = %+v", r)
		}
		for _, tt := range []struct {
			tool string
			args map[string]any
		}{
			{"list_messages", nil},
			{"search_email", map[string]any{"query": "x"}},
			{"list_inboxes", map[string]any{"limit": 0}},
			{"get_message", map[string]any{"message_id": 7}},
			{"send_email", map[string]any{"inbox_id": id, "to": []string{"a@example.com"}, "subject": "s",
				"body": "b", "reply_to_thread_id": "t"}},
		} {
			if r, _ := e.refused(tt.tool, tt.args); r.Code != "validation_error" || len(r.Errors) == 0 {
				t.Errorf("%s(%v) = %+v, want validation_error", tt.tool, tt.args, r)
			}
		}
	})

	t.Run("not_found", func(t *testing.T) {
		for _, tt := range []struct {
			tool   string
			args   map[string]any
			detail string
		}{
			{"get_message", map[string]any{"message_id": "nonexistent"}, "Message nonexistent not found"},
			{"get_thread", map[string]any{"thread_id": "nonexistent"}, "Thread nonexistent not found"},
			{"list_threads", map[string]any{"inbox_id": "nonexistent"}, "Inbox nonexistent not found"},
			{"send_email", map[string]any{"inbox_id": "nonexistent", "to": []string{"a@example.com"},
				"subject": "s", "body": "b"}, "Inbox nonexistent not found"},
			{"send_email", map[string]any{"inbox_id": id, "to": []string{"a@example.com"}, "subject": "s",
				"body": "b", "thread_id": "nonexistent"}, "Thread nonexistent not found"},
			{"get_rate_limit", map[string]any{"inbox_id": "nonexistent"}, "Inbox nonexistent not found"},
		} {
			if r, txt := e.refused(tt.tool, tt.args); r.Code != "not_found" || r.Detail != tt.detail || txt != tt.detail {
				t.Errorf("%s = %+v %q, want not_found %q", tt.tool, r, txt, tt.detail)
			}
		}
	})

	t.Run("body_too_large", func(t *testing.T) {
		args := send("ann@example.com")
		args["body"] = strings.Repeat("x", 1<<20+1) // BODY_MAX_SIZE_MB's default is 1
		if r, _ := e.refused("send_email", args); r.Code != "body_too_large" || !strings.Contains(r.Detail, "BODY_MAX_SIZE_MB") {
			t.Errorf("body over the limit = %+v", r)
		}
	})

	t.Run("conflict", func(t *testing.T) {
		r, _ := e.refused("create_inbox", map[string]any{"name": "Again", "username": "support"})
		if r.Code != "conflict" || r.Detail != "Inbox with email support@acme.test already exists" {
			t.Errorf("duplicate inbox = %+v", r)
		}
	})

	t.Run("domain_blocked", func(t *testing.T) {
		before := e.out.count()
		r, txt := e.refused("send_email", send("ann@example.com", "eve@blocked.test"))
		if r.Code != "domain_blocked" || r.Detail != "Recipient domain(s) blocked by outbound policy: blocked.test" ||
			r.RetryAfterSeconds != 0 || !strings.Contains(txt, "retrying will not help") {
			t.Errorf("blocked = %+v %q", r, txt)
		}
		if e.out.count() != before {
			t.Error("a blocked send reached the provider")
		}
	})

	// A suppressed recipient: refused with the list, named in the text;
	// list_suppressions shows it, remove_suppression takes it off (the
	// send that then goes out is tests/suppression_test.go's; here the
	// rate_limited case below counts every send).
	t.Run("recipient_suppressed", func(t *testing.T) {
		at := e.clock.Now()
		if _, _, err := e.store.AddSuppression(context.Background(), &store.Suppression{Email: "gone@example.com",
			Reason: store.ReasonBounce, Source: "mailgun", CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
		before := e.out.count()
		r, txt := e.refused("send_email", send("ann@example.com", "Gone@Example.com"))
		if r.Code != "recipient_suppressed" || r.Detail != "Recipient(s) on the suppression list: gone@example.com (bounce)" ||
			len(r.Suppressed) != 1 || r.Suppressed[0].Email != "gone@example.com" || !strings.Contains(txt, "list_suppressions") {
			t.Errorf("suppressed = %+v %q", r, txt)
		}
		if e.out.count() != before {
			t.Error("a suppressed send reached the provider")
		}
		l := e.ok("list_suppressions", map[string]any{"reason": "bounce"})
		if items := l["items"].([]any); len(items) != 1 || items[0].(map[string]any)["email"] != "gone@example.com" || l["total"] != 1.0 {
			t.Errorf("list_suppressions = %v", l)
		}
		if got := e.ok("remove_suppression", map[string]any{"email": "GONE@example.com"}); got["email"] != "gone@example.com" {
			t.Errorf("remove_suppression = %v", got)
		}
		if r, _ := e.refused("remove_suppression", map[string]any{"email": "gone@example.com"}); r.Code != "not_found" {
			t.Errorf("remove_suppression again = %+v, want not_found", r)
		}
	})

	t.Run("rate_limited", func(t *testing.T) {
		for range perMinute {
			e.ok("send_email", send("ann@example.com"))
		}
		r, txt := e.refused("send_email", send("ann@example.com"))
		if r.Code != "rate_limited" || r.RetryAfterSeconds < 1 || !slices.Equal(r.Violated, []string{"per-minute"}) ||
			r.Detail != fmt.Sprintf("Rate limit exceeded: per-minute limit reached (%d/%d)", perMinute, perMinute) {
			t.Errorf("throttled = %+v", r)
		}
		if want := fmt.Sprintf("Try again in %d second", r.RetryAfterSeconds); !strings.Contains(txt, want) {
			t.Errorf("text %q does not say %q", txt, want)
		}
		if n := e.out.count(); n != perMinute {
			t.Errorf("provider got %d messages, want %d", n, perMinute)
		}
		pm := e.ok("get_rate_limit", nil)["per_minute"].(map[string]any)
		if pm["remaining"] != 0.0 || pm["reset_seconds"] != float64(r.RetryAfterSeconds) {
			t.Errorf("get_rate_limit after the refusal = %v, want 0 left, reset in %d s", pm, r.RetryAfterSeconds)
		}
	})

	e.metrics.mu.Lock()
	defer e.metrics.mu.Unlock()
	for _, want := range []string{"create_inbox ok", "send_email ok", "send_email validation_error",
		"get_message not_found", "create_inbox conflict", "send_email domain_blocked", "send_email recipient_suppressed",
		"send_email rate_limited"} {
		if !slices.Contains(e.metrics.calls, want) {
			t.Errorf("metrics lack %q: %v", want, e.metrics.calls)
		}
	}
}

// What only a fake can provoke: failures of the pipeline itself.
func TestMCPPipelineFailures(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		code       string
		retryAfter int
	}{
		{"internal", fmt.Errorf("pq: password=hunter2 rejected"), "internal_error", 0},
		{"throttle down", &throttle.UnavailableError{Backend: "redis", Err: fmt.Errorf("dial")}, "throttle_unavailable", 5},
		{"shutting down", skuld.ErrShuttingDown, "shutting_down", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, s := newTestAPI(func() (*store.Message, error) { return nil, tt.err }, "")
			e := &mcpEnv{t: t}
			e.cs = connectInMemory(t, s.sdk)
			e.schemas = outputSchemas(t, e.cs)
			r, txt := e.refused("send_email", map[string]any{"inbox_id": "i", "to": []string{"a@b.test"},
				"subject": "s", "body": ""})
			if r.Code != tt.code || r.RetryAfterSeconds != tt.retryAfter || strings.Contains(txt+r.Detail, "hunter2") {
				t.Errorf("got %+v %q, want %s, retry after %d, no cause", r, txt, tt.code, tt.retryAfter)
			}
		})
	}
}
