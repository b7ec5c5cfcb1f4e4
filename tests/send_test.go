package tests

import (
	"mime"
	"net/http"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/config"
)

func TestSendArrivesAndReadsBack(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, nil)
		inbox := s.createInbox(t, "support")

		r := s.do(t, "POST", "/v1/messages", map[string]any{
			"inbox_id": inbox, "to": []string{"Ann <ann@customer.test>"}, "cc": []string{"cc@customer.test"},
			"bcc": []string{"audit@acme.test"}, "subject": "Your order — Grüße",
			"body": "Hello **Ann**,\n\nYour order shipped.",
		})
		mustStatus(t, r, http.StatusCreated)
		sent := r.JSON(t)
		if sent["status"] != "sent" || sent["error"] != nil || sent["provider_message_id"] == nil {
			t.Fatalf("send response = %v, want status sent with a provider id", sent)
		}
		id := sent["id"].(string)

		s.SMTP.WaitForCount(t, 1)
		got := s.SMTP.Messages()[0]
		if got.From != "support@acme.test" {
			t.Errorf("envelope from = %q, want support@acme.test", got.From)
		}
		if strings.Join(got.To, ",") != "ann@customer.test,cc@customer.test,audit@acme.test" {
			t.Errorf("envelope to = %v, want to, cc and bcc", got.To)
		}
		for header, want := range map[string]string{
			"From": "support@acme.test", "To": "ann@customer.test", "Cc": "cc@customer.test",
			"Message-Id": "<" + id + "@acme.test>",
		} {
			if v := got.Header.Get(header); !strings.Contains(v, want) {
				t.Errorf("header %s = %q, want it to contain %q", header, v, want)
			}
		}
		if got.Header.Get("Bcc") != "" {
			t.Errorf("Bcc header %q leaked to recipients", got.Header.Get("Bcc"))
		}
		subject, err := new(mime.WordDecoder).DecodeHeader(got.Header.Get("Subject"))
		if err != nil || subject != "Your order — Grüße" {
			t.Errorf("Subject = %q (%v), want %q", subject, err, "Your order — Grüße")
		}
		if got.Header.Get("Date") == "" {
			t.Errorf("missing Date header:\n%s", got.Data)
		}
		if !strings.Contains(got.Text, "Hello **Ann**") {
			t.Errorf("text part = %q, want the Markdown", got.Text)
		}
		if !strings.Contains(got.HTML, "<strong>Ann</strong>") {
			t.Errorf("html part = %q, want rendered Markdown", got.HTML)
		}

		r = s.do(t, "GET", "/v1/messages/"+id, nil)
		mustStatus(t, r, http.StatusOK)
		if !strings.Contains(string(r.Body), `"message_id_header":"<`+id) {
			t.Errorf("Message-ID not written as the Python server does (unescaped <>): %s", r.Body)
		}
		m := r.JSON(t)
		if m["status"] != "sent" || m["subject"] != "Your order — Grüße" || m["from_address"] != "support@acme.test" ||
			m["direction"] != "outbound" || m["sent_at"] == nil || m["message_id_header"] != "<"+id+"@acme.test>" {
			t.Errorf("read back %v", m)
		}
		if !strings.Contains(m["html"].(string), "<strong>Ann</strong>") || m["content_clean"] != m["text"] {
			t.Errorf("read back html/text wrong: %v", m)
		}

		// A reply in the same thread carries the threading headers.
		r = s.do(t, "POST", "/v1/messages", map[string]any{
			"inbox_id": inbox, "to": []string{"ann@customer.test"}, "subject": "Re: Your order",
			"body": "One more thing.", "reply_to_thread_id": sent["thread_id"],
		})
		mustStatus(t, r, http.StatusCreated)
		reply := r.JSON(t)
		if reply["thread_id"] != sent["thread_id"] {
			t.Errorf("reply thread = %v, want %v", reply["thread_id"], sent["thread_id"])
		}
		s.SMTP.WaitForCount(t, 2)
		second := s.SMTP.Messages()[1]
		parent := "<" + id + "@acme.test>"
		if second.Header.Get("In-Reply-To") != parent || second.Header.Get("References") != parent {
			t.Errorf("reply In-Reply-To %q References %q, want %q", second.Header.Get("In-Reply-To"),
				second.Header.Get("References"), parent)
		}

		// The thread reads back with both messages, oldest first.
		r = s.do(t, "GET", "/v1/threads/"+sent["thread_id"].(string), nil)
		mustStatus(t, r, http.StatusOK)
		msgs := r.JSON(t)["messages"].([]any)
		if len(msgs) != 2 || msgs[0].(map[string]any)["role"] != "assistant" ||
			msgs[1].(map[string]any)["content"] != "One more thing." {
			t.Errorf("thread messages = %v", msgs)
		}
		r = s.do(t, "GET", "/v1/threads?inbox_id="+inbox, nil)
		mustStatus(t, r, http.StatusOK)
		items := r.JSON(t)["items"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["message_count"] != float64(2) {
			t.Errorf("threads = %v, want one thread of two messages", items)
		}
		r = s.do(t, "GET", "/v1/messages?inbox_id="+inbox+"&q=ONE+MORE", nil)
		mustStatus(t, r, http.StatusOK)
		if list := r.JSON(t); list["count"] != float64(1) || list["total"] != float64(1) {
			t.Errorf("search by q = %v, want the reply only", list)
		}
		r = s.do(t, "POST", "/v1/search", map[string]any{"query": "ORDER", "inbox_id": inbox})
		mustStatus(t, r, http.StatusOK)
		found := r.JSON(t)
		if found["count"] != float64(2) || found["query"] != "ORDER" {
			t.Errorf("search = %v, want both messages (subjects contain 'order')", found)
		}
		r = s.do(t, "POST", "/v1/search", map[string]any{"query": "support@", "inbox_id": inbox})
		mustStatus(t, r, http.StatusOK)
		if found := r.JSON(t); found["count"] != float64(0) {
			t.Errorf("search for the From address = %v, want nothing: search covers subject and body", found)
		}
	})
}

func TestSMTPRejectionIsRecordedAndGivesTheSlotBack(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = 1 })
		inbox := s.createInbox(t, "support")
		s.SMTP.RejectData(554, [3]int{5, 7, 1}, "rejected by policy")

		r := s.send(t, inbox, "bob@customer.test")
		mustStatus(t, r, http.StatusCreated)
		failed := r.JSON(t)
		if failed["status"] != "failed" || failed["provider_message_id"] != nil {
			t.Fatalf("send = %v, want status failed without a provider id", failed)
		}
		if e, _ := failed["error"].(string); !strings.Contains(e, "554") {
			t.Errorf("error = %q, want the server's 554 reason", e)
		}
		r = s.do(t, "GET", "/v1/messages/"+failed["id"].(string), nil)
		mustStatus(t, r, http.StatusOK)
		if row := r.JSON(t); row["status"] != "failed" || row["error"] == nil || row["sent_at"] != nil {
			t.Errorf("recorded row = %v, want failed with its error", row)
		}

		// The failure took nothing from the throttle: at a limit of 1 the
		// next send still goes out.
		s.SMTP.AcceptData()
		r = s.send(t, inbox, "bob@customer.test")
		mustStatus(t, r, http.StatusCreated)
		if st := r.JSON(t)["status"]; st != "sent" {
			t.Fatalf("send after failure = %v, want sent", st)
		}
		if n := s.SMTP.Count(); n != 1 {
			t.Errorf("SMTP server holds %d messages, want 1", n)
		}
		mustStatus(t, s.send(t, inbox, "bob@customer.test"), http.StatusTooManyRequests)
	})
}
