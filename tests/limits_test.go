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
//
// The cap is 8 MiB (api.MaxPageBytes, whose arithmetic api's tests hold);
// here the server's is 128 KiB (app.WithPageBytes) and the bodies 16 KiB,
// where they would be 1 MiB: the same cuts for a 64th of the bytes, which
// cost seconds each under -race (SQLite's full-text index more than that).
func TestListPagesAreCappedInBytes(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) { listPagesCapped(t, driver) })
}

func listPagesCapped(t *testing.T, driver string) {
	const capBytes = 128 << 10
	s := startPaged(t, driver, capBytes)
	inbox := s.createInbox(t, "support")
	const n = 6                                    // 49 KiB each in a page (text twice, html once, 1 KiB): three pages
	body := strings.Repeat("word ", (16<<10)/5-10) // just under 16 KiB
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
		if len(r.Body) > capBytes+64<<10 {
			t.Errorf("page at %d is %d bytes, want at most the %d-byte cap plus one message", offset, len(r.Body), capBytes)
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
