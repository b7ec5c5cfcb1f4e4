package mcpstdio

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

type bufCloser struct{ strings.Builder }

func (*bufCloser) Close() error { return nil }

// Every line that is not one JSON-RPC message is answered with its
// JSON-RPC error, and the lines after it are read on.
func TestFilterLinesAnswersBadLinesAndReadsOn(t *testing.T) {
	good := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	in := strings.Join([]string{
		"not json",
		`{"jsonrpc":"2.0","id":1,`,
		`[` + good + `]`,
		`"a string"`,
		`{"jsonrpc":"1.0","id":"x","method":"ping"}`,
		`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		"",
		good,
	}, "\n") + "\n"
	out := &bufCloser{}
	r := filterLines(io.NopCloser(strings.NewReader(in)), &lockedWriter{w: out})
	passed, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(passed); got != good+"\n" {
		t.Errorf("passed on %q, want only the good line", got)
	}
	want := []struct {
		id   string
		code float64
	}{{"null", -32700}, {"null", -32700}, {"null", -32600}, {"null", -32600}, {`"x"`, -32600}, {"null", -32600}}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("answers = %q, want %d", lines, len(want))
	}
	for i, l := range lines {
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct{ Code float64 }
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil || m.JSONRPC != "2.0" || string(m.ID) != want[i].id ||
			m.Error.Code != want[i].code {
			t.Errorf("answer %d = %s, want id %s code %v", i, l, want[i].id, want[i].code)
		}
	}
}
