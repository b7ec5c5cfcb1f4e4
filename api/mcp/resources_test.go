package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Python server's resources: an inbox's recent threads, a thread as
// Markdown.
func TestMCPResources(t *testing.T) {
	e := newMCPEnv(t)
	ctx := context.Background()
	id := e.ok("create_inbox", map[string]any{"name": "Support", "username": "support"})["id"].(string)
	var thread string
	for i := range 12 {
		e.clock.Advance(time.Minute/perMinute + time.Second) // within the throttle
		thread = e.ok("send_email", map[string]any{"inbox_id": id, "to": []string{"ann@example.com"},
			"subject": fmt.Sprintf("Thread %d", i), "body": "b"})["thread_id"].(string)
	}
	templates, err := e.cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, rt := range templates.ResourceTemplates {
		uris = append(uris, rt.URITemplate)
	}
	if slices.Sort(uris); !slices.Equal(uris, []string{"email://inbox/{id}/recent", "email://thread/{id}"}) {
		t.Errorf("resource templates = %v", uris)
	}

	res, err := e.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "email://inbox/" + id + "/recent"})
	if err != nil {
		t.Fatal(err)
	}
	var recent struct {
		Items []struct{ ID string }
		Count int
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &recent); err != nil || recent.Count != 10 ||
		recent.Items[0].ID != thread || res.Contents[0].MIMEType != "application/json" {
		t.Errorf("recent = %s (%v), want 10 threads, the newest first", res.Contents[0].Text, err)
	}
	res, err = e.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "email://thread/" + thread})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Contents[0]; c.MIMEType != "text/markdown" || !strings.HasPrefix(c.Text, "# Thread 11\n") {
		t.Errorf("thread resource = %s %q", c.MIMEType, c.Text)
	}
	for _, uri := range []string{"email://thread/nonexistent", "email://inbox/nonexistent/recent"} {
		_, err := e.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("%s: err = %v, want resource not found", uri, err)
		}
	}
}
