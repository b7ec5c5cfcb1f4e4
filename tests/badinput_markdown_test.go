package tests

import (
	"net/http"
	"strings"
	"testing"
)

// TestBadInputMarkdown is issue 17, item 2: bodies that made goldmark
// quadratic (2.2 s for 64 KB of "*a_", 73 s for 256 KB) are accepted and
// sent, with their text, escaped, as the HTML part; ordinary Markdown is
// still rendered. (How long each takes is BenchmarkRenderCostPerByte's to
// show; here, which way each body went.)
func TestBadInputMarkdown(t *testing.T) {
	t.Parallel()
	deepList := func(size int) string {
		var b strings.Builder
		for i := 0; b.Len() < size; i++ {
			b.WriteString(strings.Repeat("  ", i) + "- a\n")
		}
		return b.String()
	}
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, nil)
		inbox := s.createInbox(t, "support")
		for _, tc := range []struct {
			name, body string
			plain      bool
		}{
			{"*a_ repeated", strings.Repeat("*a_", 64<<10/3), true},
			{"[a]( repeated", strings.Repeat("[a](", 64<<10/4), true},
			{"deep list nesting", deepList(64 << 10), true},
			{"nested blockquotes", strings.Repeat(">", 64<<10), true},
			{"ordinary Markdown", "Hi **Ann**, see [the docs](https://example.com/docs).\n\n- one\n- two\n", false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
					"subject": "s", "body": tc.body})
				mustStatus(t, r, http.StatusCreated)
				m := s.do(t, "GET", "/v1/messages/"+r.JSON(t)["id"].(string), nil)
				mustStatus(t, m, http.StatusOK)
				html, _ := m.JSON(t)["html"].(string)
				if plain := strings.HasPrefix(html, `<pre style="white-space: pre-wrap`); plain != tc.plain {
					t.Errorf("html sent as text: %v, want %v; html %.120q", plain, tc.plain, html)
				}
				if text, _ := m.JSON(t)["text"].(string); text != tc.body {
					t.Errorf("text = %.60q..., want the body as sent", text)
				}
			})
		}
	})
}
