package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/api/admin"
	"github.com/nornweave/nornweave/store"
)

// messagesStore holds message "m1" (hostile text in its subject, address,
// error, metadata and a diagnostic) and records the list's filter.
type messagesStore struct {
	adminStore
	asked *store.MessageFilter
}

var adminAt = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

func adminMessageFixture() store.Message {
	why := "550 " + adminHostile
	prov := "prov-1"
	sent := adminAt.Add(time.Second)
	return store.Message{ID: "m1", ThreadID: "th1", InboxID: "busy", Status: store.StatusSent, Error: &why,
		ProviderMessageID: &prov, MessageIDHeader: "<m1@acme.test>", Subject: adminHostile,
		FromAddress: "busy@acme.test", ToAddresses: store.StringList{adminHostile + "@x.test", "b@x.test"},
		CcAddresses: store.StringList{"C@X.test"}, Text: "BODYTEXT", HTML: "<p>BODYHTML</p>",
		Labels: store.StringList{"l1"}, Metadata: store.JSONObject{"k": adminHostile},
		CreatedAt: adminAt, SentAt: &sent}
}

func (s messagesStore) Messages(_ context.Context, f store.MessageFilter) ([]store.Message, int64, error) {
	*s.asked = f
	m := adminMessageFixture()
	m.Text, m.HTML = "", ""
	return []store.Message{m}, -1, nil
}

func (messagesStore) Message(_ context.Context, id string) (*store.Message, error) {
	if id != "m1" {
		return nil, store.ErrNotFound
	}
	m := adminMessageFixture()
	return &m, nil
}

func (messagesStore) Attachments(_ context.Context, f store.AttachmentFilter) ([]store.Attachment, error) {
	return []store.Attachment{{MessageID: f.MessageID, Filename: "report.pdf", ContentType: "application/pdf", Size: 2048}}, nil
}

func (messagesStore) MessageEvents(_ context.Context, id string) ([]store.DeliveryEvent, error) {
	diag := "smtp; 550 " + adminHostile
	perm, code := "permanent", "5.1.1"
	return []store.DeliveryEvent{
		{MessageID: id, Provider: "ses", Type: "delivered", Recipient: "b@x.test", OccurredAt: adminAt.Add(time.Minute)},
		{MessageID: id, Provider: "ses", Type: "bounced", Recipient: "c@x.test", BounceType: &perm, SMTPStatus: &code,
			Diagnostic: &diag, OccurredAt: adminAt.Add(2 * time.Minute)},
	}, nil
}

// The Messages pages through the API: the filter reaches the store without
// its count or bodies, the message's page shows its recipients' events,
// every user text is escaped, no body is shown, and an unknown id is an
// HTML 404 behind the CSP.
func TestAdminMessagesPages(t *testing.T) {
	var asked store.MessageFilter
	h := New(Options{Store: messagesStore{asked: &asked}, Throttle: memThrottle(4, 0), Held: fakeHeld{}})
	get := func(path string, status int) string {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, adminRequest("GET", path, ""))
		if rec.Code != status || rec.Header().Get("Content-Security-Policy") != admin.CSP ||
			!strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s = %d, CSP %q, %q; want %d, the dashboard's CSP, HTML:\n%s", path, rec.Code,
				rec.Header().Get("Content-Security-Policy"), rec.Header().Get("Content-Type"), status, rec.Body)
		}
		body := rec.Body.String()
		for _, bad := range []string{"<script>", "<svg", "BODYTEXT", "BODYHTML"} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s: shows %q", path, bad)
			}
		}
		return body
	}
	esc := "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&gt;&lt;svg onload=alert(2)&gt;\u202E"

	body := get("/admin/messages?inbox_id=busy&status=sent&since=2026-11-27&until=2026-11-28T00:00:00Z&offset=100", http.StatusOK)
	want := store.MessageFilter{InboxID: "busy", Status: "sent", Since: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC),
		Until: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), Limit: admin.MessagePageSize + 1, Offset: 100,
		OmitBodies: true, SkipTotal: true}
	if !reflect.DeepEqual(asked, want) {
		t.Errorf("store asked %+v, want %+v", asked, want)
	}
	for _, w := range []string{`data-message="m1"`, "<bdi>" + esc + "</bdi>", "<bdi>" + esc + "@x.test</bdi> and 1 more",
		"<bdi>550 " + esc + "</bdi>", `<td class="status">sent</td>`} {
		if !strings.Contains(body, w) {
			t.Errorf("list lacks %q:\n%s", w, body)
		}
	}

	body = get("/admin/messages/m1", http.StatusOK)
	for _, w := range []string{`<dd id="status">sent</dd>`, "<bdi>th1</bdi>", "<bdi>&lt;m1@acme.test&gt;</bdi>", "<bdi>prov-1</bdi>",
		"<bdi>C@X.test</bdi>", "<bdi>l1</bdi>", `&#34;k&#34;: &#34;&lt;script&gt;alert(1)&lt;/script&gt;\&#34;&gt;`, "<bdi>report.pdf</bdi>", "<td>2048</td>",
		`<section class="recipient" data-recipient="b@x.test">`, `<section class="recipient" data-recipient="c@x.test">`,
		`<span class="state">bounced</span>`, `<span class="state">delivered</span>`, "<bdi>smtp; 550 " + esc + "</bdi>",
		"<bdi>5.1.1</bdi>", "<bdi>permanent</bdi>", `<time datetime="2026-11-27T09:02:00Z">`} {
		if !strings.Contains(body, w) {
			t.Errorf("message page lacks %q:\n%s", w, body)
		}
	}

	body = get("/admin/messages/nope", http.StatusNotFound)
	if !strings.Contains(body, "<bdi>Message nope</bdi> does not exist.") {
		t.Errorf("404 page:\n%s", body)
	}
}

// The page filters by the statuses the API accepts.
func TestAdminMessageStatuses(t *testing.T) {
	if !reflect.DeepEqual(admin.MessageStatuses, messageStatuses) {
		t.Errorf("admin.MessageStatuses = %v, want the API's %v", admin.MessageStatuses, messageStatuses)
	}
}
