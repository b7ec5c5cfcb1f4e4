package tests

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// A send with html and no body goes out with a text/plain part derived
// from the HTML, and that text is what the message, its preview and
// search show.
func TestSendHTMLWithoutBody(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, nil)
		inbox := s.createInbox(t, "support")
		html := `<html><head><title>Order</title><style>p{color:red}</style></head><body>` +
			`<h1>Order 42</h1><p>Hello <b>Ann</b>,</p><ul><li>Tea</li><li>Milk &amp; honey</li></ul>` +
			`<p><a href="https://shop.test/o/42">Track it</a></p><script>alert(1)</script></body></html>`
		want := "Order 42\n\nHello Ann,\n\n- Tea\n- Milk & honey\n\nTrack it (https://shop.test/o/42)"

		r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"ann@customer.test"},
			"subject": "Your order", "html": html})
		mustStatus(t, r, http.StatusCreated)
		id := r.JSON(t)["id"].(string)

		s.SMTP.WaitForCount(t, 1)
		got := s.SMTP.Messages()[0]
		if text := strings.TrimRight(got.Text, "\n"); text != want {
			t.Errorf("text/plain part that went out:\n%q\nwant\n%q", text, want)
		}
		if strings.TrimRight(got.HTML, "\n") != html {
			t.Errorf("text/html part that went out: %q, want the html given", got.HTML)
		}
		if ct := got.Header.Get("Content-Type"); !strings.HasPrefix(ct, "multipart/alternative") {
			t.Errorf("Content-Type %q, want multipart/alternative (text and HTML)", ct)
		}

		m := s.do(t, "GET", "/v1/messages/"+id, nil).JSON(t)
		if m["text"] != want || m["content_clean"] != want || m["html"] != html ||
			m["preview"] != "Order 42 Hello Ann, - Tea - Milk & honey Track it (https://shop.test/o/42)" {
			t.Errorf("read back text %q, content_clean %q, preview %q", m["text"], m["content_clean"], m["preview"])
		}
		res := s.do(t, "POST", "/v1/search", map[string]any{"query": "honey", "inbox_id": inbox}).JSON(t)
		if res["count"] != float64(1) {
			t.Errorf("search for a word of the derived text: %v, want the message", res)
		}

		// Neither body nor html is still a 422, naming body; nothing goes out.
		r = s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"}, "subject": "s"})
		mustStatus(t, r, http.StatusUnprocessableEntity)
		if !strings.Contains(string(r.Body), `{"loc":["body","body"],"msg":"Field required unless html is given","type":"missing"}`) {
			t.Errorf("422 body %s, want body named", r.Body)
		}
		if s.SMTP.Count() != 1 {
			t.Errorf("the SMTP server got %d messages, want 1", s.SMTP.Count())
		}
	})
}

// Labels and metadata come back as sent from every read of the message,
// numbers digit for digit; over their limits a send is a 422 naming the
// field and sends nothing.
func TestLabelsAndMetadataRoundTrip(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, nil)
		inbox := s.createInbox(t, "support")
		metadata := `{"order_id":12345678901234567890,"amount":10.50,"nested":{"list":[1,"two",null,true]},"emoji":"☺"}`
		body := `{"inbox_id":"` + inbox + `","to":["ann@customer.test"],"subject":"Invoice","body":"Paid.",` +
			`"labels":["billing","q3","billing","Ünïcode"],"metadata":` + metadata + `}`
		r := s.do(t, "POST", "/v1/messages", body)
		mustStatus(t, r, http.StatusCreated)
		id := r.JSON(t)["id"].(string)
		wantLabels := []any{"billing", "q3", "Ünïcode"}

		check := func(where string, m map[string]json.RawMessage) {
			t.Helper()
			var labels []any
			_ = json.Unmarshal(m["labels"], &labels)
			if where != "search" && !reflect.DeepEqual(labels, wantLabels) {
				t.Errorf("%s: labels %s, want %v", where, m["labels"], wantLabels)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, m["metadata"]); err != nil || !sameJSON(compact.String(), metadata) {
				t.Errorf("%s: metadata %s, want %s", where, m["metadata"], metadata)
			}
		}
		var one map[string]json.RawMessage
		if err := json.Unmarshal(s.do(t, "GET", "/v1/messages/"+id, nil).Body, &one); err != nil {
			t.Fatal(err)
		}
		check("GET /v1/messages/{id}", one)
		var page struct{ Items []map[string]json.RawMessage }
		if err := json.Unmarshal(s.do(t, "GET", "/v1/messages?inbox_id="+inbox, nil).Body, &page); err != nil || len(page.Items) != 1 {
			t.Fatalf("list: %v %v", page, err)
		}
		check("GET /v1/messages", page.Items[0])
		if err := json.Unmarshal(s.do(t, "POST", "/v1/search", map[string]any{"query": "Paid", "inbox_id": inbox}).Body,
			&page); err != nil || len(page.Items) != 1 {
			t.Fatalf("search: %v %v", page, err)
		}
		check("search", page.Items[0])

		// Without them: [] and {}.
		plain := s.send(t, inbox, "ann@customer.test").JSON(t)["id"].(string)
		m := s.do(t, "GET", "/v1/messages/"+plain, nil)
		if !strings.Contains(string(m.Body), `"labels":[]`) || !strings.Contains(string(m.Body), `"metadata":{}`) {
			t.Errorf("a send without labels or metadata reads back %s", m.Body)
		}

		labels51 := make([]string, 51)
		for i := range labels51 {
			labels51[i] = "l" + strings.Repeat("x", i)
		}
		for _, tt := range []struct {
			name  string
			field string
			value any
			want  string
		}{
			{"51 labels", "labels", labels51, `{"loc":["body","labels"],"msg":"List should have at most 50 items after validation, not 51","type":"too_long"}`},
			{"a label of 101 characters", "labels", []string{"ok", strings.Repeat("ü", 101)}, `{"loc":["body","labels",1],"msg":"String should have at most 100 characters","type":"string_too_long"}`},
			{"an empty label", "labels", []string{""}, `"loc":["body","labels",0]`},
			{"labels not a list", "labels", "billing", `{"loc":["body","labels"],"msg":"Input should be a valid list","type":"list_type"}`},
			{"metadata over 16 KiB", "metadata", map[string]string{"k": strings.Repeat("x", 16<<10)}, `{"loc":["body","metadata"],"msg":"metadata should be at most 16384 bytes of JSON, not 16392","type":"too_long"}`},
			{"metadata a list", "metadata", []int{1}, `{"loc":["body","metadata"],"msg":"Input should be a valid dictionary","type":"dict_type"}`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
					"subject": "s", "body": "b", tt.field: tt.value})
				mustStatus(t, r, http.StatusUnprocessableEntity)
				if !strings.Contains(string(r.Body), tt.want) {
					t.Errorf("body %s, want it to contain %s", r.Body, tt.want)
				}
			})
		}
		s.SMTP.WaitForCount(t, 2)
		if s.SMTP.Count() != 2 {
			t.Errorf("the SMTP server got %d messages, want the 2 valid sends", s.SMTP.Count())
		}
	})
}

// sameJSON compares two JSON texts with numbers as written.
func sameJSON(a, b string) bool {
	decode := func(s string) any {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return nil
		}
		return v
	}
	va, vb := decode(a), decode(b)
	return va != nil && reflect.DeepEqual(va, vb)
}
