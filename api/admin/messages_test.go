package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMessagesPage(t *testing.T) {
	hs := newHarness(t, "")
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	if body := hs.do("GET", "/admin/messages", nil, nil).Body.String(); !strings.Contains(body, `<p id="empty">No message matches.`) {
		t.Errorf("no messages: want the empty state:\n%s", body)
	}
	hs.msgs = []MessageRow{
		{ID: "m2", InboxID: "in-a", From: "a@example.com", Subject: "Second", Status: "failed",
			Error: strings.Repeat("x", 100), To: []string{"one@example.com", "two@example.com", "three@example.com"}, CreatedAt: at},
		{ID: "m1", InboxID: "in-a", From: "a@example.com", Subject: "First", Status: "sent",
			To: []string{"one@example.com"}, CreatedAt: at.Add(-time.Minute)},
	}
	rec := hs.do("GET", "/admin/messages", nil, nil)
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /admin/messages = %d:\n%s", rec.Code, body)
	}
	mustContain(t, body, `<tr class="message" data-message="m2">`, `<a href="/admin/messages/m2"><bdi>Second</bdi></a>`,
		`<bdi>one@example.com</bdi> and 2 more`, `<td class="status">failed</td>`,
		`<bdi>`+strings.Repeat("x", shortError)+`…</bdi>`, `<time datetime="2026-11-27T09:00:00Z">`,
		`<td class="inbox id"><bdi>in-a</bdi></td>`, `<td class="from"><bdi>a@example.com</bdi></td>`)
	mustNotContain(t, body, strings.Repeat("x", shortError+1), "<bdi>one@example.com</bdi> and 0 more", `rel="next"`, `rel="prev"`)
	if i, j := strings.Index(body, "Second"), strings.Index(body, "First"); i > j {
		t.Error("rows not in the order read (newest first)")
	}
	if got, want := hs.asked[0], (MessageFilter{Limit: MessagePageSize + 1}); !reflect.DeepEqual(got, want) {
		t.Errorf("asked %+v, want %+v", got, want)
	}
}

func TestMessagesPageFilters(t *testing.T) {
	hs := newHarness(t, "")
	day := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		query url.Values
		want  MessageFilter
		notes []string
		links string // the filter as the paging links keep it
	}{
		{"all", url.Values{"inbox_id": {"in-a"}, "status": {"sent"}, "since": {"2026-11-27"}, "until": {"2026-11-27T10:30:00+01:00"}},
			MessageFilter{InboxID: "in-a", Status: "sent", Since: day, Until: day.Add(9*time.Hour + 30*time.Minute)}, nil,
			"inbox_id=in-a&amp;offset=100&amp;since=2026-11-27&amp;status=sent&amp;until=2026-11-27T10%3A30%3A00%2B01%3A00"},
		{"until a date includes the day", url.Values{"until": {"2026-11-27"}}, MessageFilter{Until: day.AddDate(0, 0, 1)}, nil,
			"offset=100&amp;until=2026-11-27"},
		{"bad status", url.Values{"status": {"bounced"}}, MessageFilter{},
			[]string{"Status bounced is not one of scheduled, queued, sending, sent, failed, canceled; it was ignored."}, "offset=100"},
		{"bad times", url.Values{"since": {"yesterday"}, "until": {"2026-13-01"}}, MessageFilter{},
			[]string{"“yesterday” is not a date", "since was ignored", "“2026-13-01” is not a date", "until was ignored"}, "offset=100"},
		{"hostile status", url.Values{"status": {hostile}}, MessageFilter{}, []string{hostileEscaped}, "offset=100"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hs.msgs = make([]MessageRow, MessagePageSize+1)
			rec := hs.do("GET", "/admin/messages?"+tt.query.Encode(), nil, nil)
			body := rec.Body.String()
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d, want 200:\n%s", rec.Code, body)
			}
			tt.want.Limit = MessagePageSize + 1
			got := hs.asked[0].(MessageFilter)
			if !got.Since.Equal(tt.want.Since) || !got.Until.Equal(tt.want.Until) {
				t.Errorf("asked since %v until %v, want %v, %v", got.Since, got.Until, tt.want.Since, tt.want.Until)
			}
			got.Since, got.Until, tt.want.Since, tt.want.Until = time.Time{}, time.Time{}, time.Time{}, time.Time{}
			if got != tt.want {
				t.Errorf("asked %+v, want %+v", got, tt.want)
			}
			for _, n := range tt.notes {
				mustContain(t, body, n)
			}
			if len(tt.notes) == 0 {
				mustNotContain(t, body, `class="note"`)
			}
			mustContain(t, body, `<a rel="next" href="/admin/messages?`+tt.links+`">Next</a>`)
			mustNotContain(t, body, "<script>", "<svg")
		})
	}
}

func TestMessagesPaging(t *testing.T) {
	hs := newHarness(t, "")
	hs.msgs = make([]MessageRow, 2*MessagePageSize+5)
	for i := range hs.msgs {
		hs.msgs[i] = MessageRow{ID: fmt.Sprintf("m%03d", i), Status: "sent"}
	}
	for _, tt := range []struct {
		offset     string
		from, to   int
		prev, next string
		first      string
	}{
		{"", 1, 100, "", "/admin/messages?offset=100", "m000"},
		{"100", 101, 200, "/admin/messages", "/admin/messages?offset=200", "m100"},
		{"200", 201, 205, "/admin/messages?offset=100", "", "m200"},
		{"-3", 1, 100, "", "/admin/messages?offset=100", "m000"},
		{"x", 1, 100, "", "/admin/messages?offset=100", "m000"},
	} {
		body := hs.do("GET", "/admin/messages?offset="+tt.offset, nil, nil).Body.String()
		mustContain(t, body, fmt.Sprintf(`<span class="meta" id="paging-range">%d–%d</span>`, tt.from, tt.to),
			`data-message="`+tt.first+`"`)
		if n := strings.Count(body, `<tr class="message"`); n != tt.to-tt.from+1 {
			t.Errorf("offset %q: %d rows, want %d", tt.offset, n, tt.to-tt.from+1)
		}
		for rel, href := range map[string]string{"prev": tt.prev, "next": tt.next} {
			if href == "" {
				mustNotContain(t, body, `rel="`+rel+`"`)
			} else {
				mustContain(t, body, `<a rel="`+rel+`" href="`+href+`">`)
			}
		}
	}
	body := hs.do("GET", "/admin/messages?offset=900", nil, nil).Body.String()
	mustContain(t, body, `<p id="empty">No messages on this page.`, `rel="prev"`)
	mustNotContain(t, body, " of ")
}

func TestMessagePage(t *testing.T) {
	hs := newHarness(t, key)
	ck := sessionCookie(t, hs.do("POST", "/admin/login", url.Values{"api_key": {key}}, nil))
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	hs.one = map[string]MessageDetail{"m1": {
		MessageRow: MessageRow{ID: "m1", InboxID: "in-a", From: hostile + "@example.com", Subject: hostile,
			Status: "failed", Error: "error " + hostile, To: []string{"to" + hostile}, CreatedAt: at},
		ThreadID: "th-1", MessageIDHeader: "<m1@example.com>", ProviderMessageID: "prov-1",
		Cc: []string{"cc@example.com"}, Bcc: []string{"bcc@example.com"}, SentAt: at.Add(time.Second),
		Labels: []string{"label " + hostile}, Metadata: `{"k":"` + hostile + `"}`,
		Attachments: []Attachment{{Filename: "a" + hostile + ".pdf", ContentType: "application/pdf", Size: 1234}},
		Recipients: []RecipientTimeline{
			{Email: "to@example.com", State: "bounced", Events: []DeliveryEvent{
				{Type: "delivered", Recipient: "to@example.com", Provider: "ses", OccurredAt: at.Add(time.Minute)},
				{Type: "bounced", Recipient: "to@example.com", Provider: "ses", BounceType: "permanent",
					SMTPStatus: "5.1.1", Diagnostic: "diag " + hostile, OccurredAt: at.Add(2 * time.Minute)}}},
			{Email: "cc@example.com", State: "failed"},
		}}}
	if rec := hs.do("GET", "/admin/messages/m1", nil, nil); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/login" {
		t.Errorf("without a session = %d %q, want 303 to /admin/login", rec.Code, rec.Header().Get("Location"))
	}
	rec := hs.do("GET", "/admin/messages/m1", nil, ck)
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d:\n%s", rec.Code, body)
	}
	mustContain(t, body, `<h1><bdi>`+hostileEscaped+`</bdi></h1>`, `<dd id="status">failed</dd>`,
		`<bdi>error `+hostileEscaped+`</bdi>`, `<bdi>`+hostileEscaped+`@example.com</bdi>`, `<bdi>to`+hostileEscaped+`</bdi>`,
		`<bdi>th-1</bdi>`, `<bdi>&lt;m1@example.com&gt;</bdi>`, `<bdi>prov-1</bdi>`, `<bdi>cc@example.com</bdi>`, `<bdi>bcc@example.com</bdi>`,
		`<bdi>label `+hostileEscaped+`</bdi>`, `<pre id="metadata"><bdi>{&#34;k&#34;:&#34;`+hostileEscaped+`&#34;}</bdi></pre>`,
		`<bdi>a`+hostileEscaped+`.pdf</bdi>`, `<td>1234</td>`,
		`<section class="recipient" data-recipient="to@example.com">`, `<span class="state">bounced</span>`,
		`<bdi>5.1.1</bdi>`, `<bdi>permanent</bdi>`, `<bdi>diag `+hostileEscaped+`</bdi>`,
		`<section class="recipient" data-recipient="cc@example.com">`, "No delivery event reported.",
		`<time datetime="2026-11-27T09:00:01Z">`)
	mustNotContain(t, body, "<script>", "<svg", "Scheduled at", "Next attempt")
	if i, j := strings.Index(body, `<bdi>delivered</bdi>`), strings.Index(body, `<bdi>bounced</bdi>`); i < 0 || i > j {
		t.Error("events not oldest first")
	}

	rec = hs.do("GET", "/admin/messages/nope"+url.PathEscape(hostile), nil, ck)
	body = rec.Body.String()
	if rec.Code != http.StatusNotFound || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Errorf("unknown id = %d %q, want 404 text/html", rec.Code, rec.Header().Get("Content-Type"))
	}
	mustContain(t, body, `<p id="notfound"><bdi>Message nope`, "does not exist.")
	mustNotContain(t, body, "<script>", "<svg")
}
