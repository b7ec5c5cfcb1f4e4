package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestListPagesAreCappedInBytes: a page of large messages stops at the
// byte cap (8 MiB of bodies, at least one message), keeps every key of
// every item, and paging by offset+count still visits every message once.
func TestListPagesAreCappedInBytes(t *testing.T) {
	t.Parallel()
	// PostgreSQL: it indexes the bodies in its own process, where -race
	// does not slow it down (SQLite takes seconds per 1 MiB body).
	s := startDefault(t, "postgres", nil)
	inbox := s.createInbox(t, "support")
	const n = 6                                   // 3 MiB each in a page (text twice, html once): three pages
	body := strings.Repeat("word ", (1<<20)/5-10) // just under BODY_MAX_SIZE_MB
	for i := range n {
		r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
			"subject": fmt.Sprintf("big %d", i), "body": body, "html": "<p>" + body + "</p>"})
		mustStatus(t, r, http.StatusCreated)
	}

	seen := map[string]bool{}
	for offset, pages := 0, 0; offset < n; pages++ {
		if pages > n {
			t.Fatal("paging does not end")
		}
		r := s.do(t, "GET", fmt.Sprintf("/v1/messages?inbox_id=%s&limit=500&offset=%d", inbox, offset), nil)
		mustStatus(t, r, http.StatusOK)
		var page struct {
			Items []map[string]any `json:"items"`
			Count int              `json:"count"`
			Total int              `json:"total"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatalf("page at %d: %v", offset, err)
		}
		if page.Total != n || page.Count != len(page.Items) || page.Count == 0 {
			t.Fatalf("page at %d: count %d, %d items, total %d", offset, page.Count, len(page.Items), page.Total)
		}
		if len(r.Body) > 12<<20 {
			t.Errorf("page at %d is %d bytes, want at most the 8 MiB cap plus one message", offset, len(r.Body))
		}
		for _, it := range page.Items {
			if len(it) != 28 || it["text"] != body || it["content_clean"] != body {
				t.Errorf("item %v has %d keys or lost its body", it["id"], len(it))
			}
			if seen[it["id"].(string)] {
				t.Errorf("message %v on two pages", it["id"])
			}
			seen[it["id"].(string)] = true
		}
		offset += page.Count
	}
	if len(seen) != n {
		t.Errorf("visited %d messages, want %d", len(seen), n)
	}
}
