package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nornweave/nornweave/api"
)

// budgetProbe is a ResponseWriter that notes, at each Write, whether the
// answer held none of the in-flight budget: it must hold its part while
// it is being written.
type budgetProbe struct {
	*httptest.ResponseRecorder
	held      *atomic.Int64
	freeAtOut bool
}

func (p *budgetProbe) Write(b []byte) (int, error) {
	if p.held.Load() == 0 {
		p.freeAtOut = true
	}
	return p.ResponseRecorder.Write(b)
}

// An attachment's content, and the answer that carries it, hold their
// part of the in-flight budget until the answer is written, not only
// while the tool runs; all of it comes back afterwards.
func TestMCPAnswerHoldsTheBudgetUntilWritten(t *testing.T) {
	env := newMCPEnv(t)
	inbox := env.ok("create_inbox", map[string]any{"name": "Files", "username": "files"})["id"].(string)
	content := strings.Repeat("x", 900<<10)
	res := env.call("send_email_with_attachments", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
		"subject": "s", "body": "b", "attachments": []map[string]any{{"filename": "a.txt",
			"content_type": "text/plain", "content": base64.StdEncoding.EncodeToString([]byte(content))}}})
	if res.IsError {
		t.Fatalf("send: %v", res.StructuredContent)
	}
	list := env.call("list_attachments", map[string]any{"inbox_id": inbox})
	id := list.StructuredContent.(map[string]any)["items"].([]any)[0].(map[string]any)["id"].(string)

	// What the answers take from the budget, counted until given back.
	var held atomic.Int64
	take := env.mcp.take
	env.mcp.take = func(ctx context.Context, n int64) (func(), error) {
		release, err := take(ctx, n)
		if err != nil {
			return nil, err
		}
		held.Add(n)
		return func() { held.Add(-n); release() }, nil
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_attachment_content",`+
		`"arguments":{"attachment_id":%q}}}`, id)
	req := localRequest("POST", "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	probe := &budgetProbe{ResponseRecorder: httptest.NewRecorder(), held: &held}
	env.srv.ServeHTTP(probe, req)
	if probe.Code != http.StatusOK || !strings.Contains(probe.Body.String(), base64.StdEncoding.EncodeToString([]byte(content))) {
		t.Fatalf("got %d %.200s", probe.Code, probe.Body)
	}
	if probe.freeAtOut {
		t.Errorf("the answer held none of the budget while it was written: the answer was not counted")
	}
	if n := held.Load(); n != 0 {
		t.Errorf("the answer still holds %d bytes of the budget after it was written", n)
	}
	// The attachment's content too: the whole budget is free again (a
	// budget still held would refuse this after api's wait).
	a := env.mcp.api
	release, err := a.TakeInFlight(context.Background(), a.RequestsInFlight)
	if err != nil {
		t.Fatalf("the budget was not all given back after the answer: %v", err)
	}
	release()
}

// fitPage cuts a list after the last item that fits its cap, keeps at
// least one, and says where the next page starts. The cap is 12 KiB here,
// with its 4 KiB of envelope, where an answer's is 8 MiB: the bytes are a
// few thousandths, the cuts the same.
func TestFitPage(t *testing.T) {
	const budget = 12 << 10
	item := strings.Repeat("a", 3<<10) // 3 KiB of JSON each
	for _, tt := range []struct {
		name     string
		n, limit int
		more     bool
		kept     int
		next     int // -1: none
	}{
		{"fits, not full, no more", 2, 50, false, 2, -1},
		{"cut by bytes", 5, 50, false, 2, 12},
		{"full by limit", 2, 2, false, 2, 12},
		{"more remain", 1, 50, true, 1, 11},
		{"empty", 0, 50, false, 0, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			items := make([]string, tt.n)
			for i := range items {
				items[i] = item
			}
			got, next := fitPage(budget, items, 10, tt.limit, tt.more)
			if len(got) != tt.kept || (next == nil) != (tt.next < 0) || (next != nil && *next != tt.next) {
				t.Errorf("kept %d, next %v; want %d, %d", len(got), next, tt.kept, tt.next)
			}
		})
	}
	// On the wire (CallToolResult's json.Marshal) each < > & is six
	// bytes: the page is cut by that size, not by the unescaped one.
	angles := make([]string, 20)
	for i := range angles {
		angles[i] = strings.Repeat("<&>", 1<<8) // 768 bytes, 4.5 KiB on the wire
	}
	got, next := fitPage(budget, angles, 0, 50, false)
	wire, err := json.Marshal(&sdk.CallToolResult{StructuredContent: got})
	if err != nil {
		t.Fatal(err)
	}
	if len(wire) > budget+pageEnvelope || len(got) != 1 || next == nil || *next != 1 {
		t.Errorf("kept %d items of < & >, %d bytes on the wire; want 1, within %d", len(got), len(wire), budget)
	}
	huge := []string{strings.Repeat("a", 10<<10)}
	if got, _ := fitPage(budget, huge, 0, 50, false); len(got) != 1 {
		t.Errorf("one item over the cap: kept %d, want it (the result's cap refuses it)", len(got))
	}
}

// jsonSize is the length api.MarshalNoEscape gives a string, less its quotes.
func TestJSONSize(t *testing.T) {
	for _, s := range []string{"", "plain", "a\nb\tc\"d\\e", "\x01\x1f", "é漢🙂", "\xff\xfe", "<&>", "\u2028\u2029"} {
		b, err := api.MarshalNoEscape(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := jsonSize(s), len(b)-2; got != want {
			t.Errorf("jsonSize(%q) = %d, want %d (%s)", s, got, want, b)
		}
	}
}

// wireSize is the length json.Marshal (the SDK's encoding of a result)
// gives what api.MarshalNoEscape wrote: answerFits refuses by it.
func TestWireSize(t *testing.T) {
	for _, s := range []string{"", "plain", "<&>", "a<b>c&d", "\u2028\"\\", strings.Repeat("<", 100)} {
		body, err := api.MarshalNoEscape(s)
		if err != nil {
			t.Fatal(err)
		}
		escaped, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := wireSize(body), len(escaped); got != want {
			t.Errorf("wireSize(%s) = %d, want %d", body, got, want)
		}
	}
}
