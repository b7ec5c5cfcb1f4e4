package tests

import (
	"context"
	"html"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 25, "Markdown that expands quadratically": a body whose HTML (one
// reference with a long destination, used in many short paragraphs) or
// whose tree (a wide table header over one-word rows, padded) grows faster
// than the body. Sent directly, scheduled, or through MCP's send_email, it
// goes out with its text, escaped, as the HTML part, and the server's work
// is bounded by the body's size: the bytes the whole process allocates
// while it answers are at most renderAllocPerByte per body byte plus
// renderAllocSlack (23 MB and 18 MB here; this tree: 0.5 to 5 MB). On
// 055603e the 32 KB reference body (26 MB of HTML) allocated 172 to 176 MB
// and the 7.6 KB table (400,000 cells) 147 to 148 MB, each way in, on both
// databases; at 150 KB and 35 KB they cost 1.5 GB and 577 MB.
//
// Bytes, not time: the count is deterministic where a duration is not. The
// test is not parallel, so no other test allocates in the same window.
const (
	renderAllocPerByte = 200
	renderAllocSlack   = 16 << 20
)

// hostileReferences and hostileTable are skuld's test bodies of the same
// names (render_hostile_test.go), built again here.
func hostileReferences(size int) string {
	def := "[a]: http://x/" + strings.Repeat("A", size/2) + "\n\n"
	uses := "See [a].\n\n"
	return def + strings.Repeat(uses, max(1, (size-len(def))/len(uses)))
}

func hostileTable(cols, rows int) string {
	return "|" + strings.Repeat("a|", cols) + "\n|" + strings.Repeat("-|", cols) + "\n" + strings.Repeat("hello\n", rows)
}

// allocatedDuring is what the process allocated while f ran, in bytes.
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Not parallel: it counts the bytes the whole process allocates.
func TestBadInputMarkdownExpansion(t *testing.T) {
	bodies := []struct{ name, body string }{
		{"reference used 1,600 times", hostileReferences(32 << 10)},
		{"table padded to 400 × 1,000 cells", hostileTable(400, 1000)},
	}
	forEachDriverInTurn(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, nil)
		inbox := s.createInbox(t, "support")
		ctx := context.Background()
		cs, err := connectHTTP(ctx, s.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()

		// Each way in sends the body and returns the message's id.
		ways := []struct {
			name string
			send func(t *testing.T, subject, body string) string
		}{
			{"direct", func(t *testing.T, subject, body string) string {
				r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
					"subject": subject, "body": body})
				mustStatus(t, r, http.StatusCreated)
				return r.JSON(t)["id"].(string)
			}},
			{"scheduled", func(t *testing.T, subject, body string) string {
				r := s.sendAt(t, inbox, "a@b.test", time.Now().Add(2*time.Second), "subject", subject, "body", body)
				mustStatus(t, r, http.StatusAccepted)
				return r.JSON(t)["id"].(string)
			}},
			{"MCP send_email", func(t *testing.T, subject, body string) string {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_email", Arguments: map[string]any{
					"inbox_id": inbox, "to": []string{"a@b.test"}, "subject": subject, "body": body}})
				if err != nil {
					t.Fatal(err)
				}
				sc, _ := res.StructuredContent.(map[string]any)
				if res.IsError || sc["status"] != "sent" {
					t.Fatalf("send_email = %v", sc)
				}
				return sc["message_id"].(string)
			}},
		}
		sent := 0
		for _, b := range bodies {
			want := `<pre style="white-space: pre-wrap; font-family: inherit">` + html.EscapeString(b.body) + "</pre>\n"
			for _, way := range ways {
				t.Run(b.name+"/"+way.name, func(t *testing.T) {
					subject := b.name + " " + way.name
					var id string
					alloc := allocatedDuring(func() { id = way.send(t, subject, b.body) })
					t.Logf("a %d-byte body: %d bytes allocated answering", len(b.body), alloc)
					if limit := renderAllocPerByte*uint64(len(b.body)) + renderAllocSlack; alloc > limit {
						t.Errorf("a %d-byte body: the server allocated %d bytes answering, want at most %d",
							len(b.body), alloc, limit)
					}
					m := s.do(t, "GET", "/v1/messages/"+id, nil)
					mustStatus(t, m, http.StatusOK)
					if got, _ := m.JSON(t)["html"].(string); got != want {
						t.Errorf("stored html = %.100q..., want the body as escaped text", got)
					}
					sent++
					s.SMTP.WaitForCount(t, sent)
					for _, got := range s.SMTP.Messages() {
						if got.Header.Get("Subject") == subject && got.HTML != want {
							t.Errorf("HTML part at the SMTP server = %.100q..., want the body as escaped text", got.HTML)
						}
					}
				})
			}
		}
	})
}
