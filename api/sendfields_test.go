package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// sendWith is a valid send with fields set to raw JSON values ("" drops
// the field).
func sendWith(fields map[string]string) string {
	base := map[string]string{"inbox_id": `"i"`, "to": `["a@b.test"]`, "subject": `"s"`, "body": `"b"`}
	for k, v := range fields {
		if v == "" {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	parts := make([]string, 0, len(base))
	for k, v := range base {
		parts = append(parts, `"`+k+`":`+v)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func TestSendBodyLabelsAndMetadata(t *testing.T) {
	many := make([]string, maxLabels+1)
	for i := range many {
		many[i] = `"l` + itoa(i) + `"`
	}
	big := `{"k":"` + strings.Repeat("x", maxMetadataSize) + `"}`
	tests := []struct {
		name   string
		fields map[string]string
		status int
		want   string // in the body of a refusal
		check  func(t *testing.T, c *capture)
	}{
		{"html without body", map[string]string{"body": "", "html": `"<p>Hi</p>"`}, 201, "", func(t *testing.T, c *capture) {
			if c.req.Body != "" || c.req.HTML != "<p>Hi</p>" {
				t.Errorf("reached the pipeline with body %q html %q, want no body (derived there)", c.req.Body, c.req.HTML)
			}
		}},
		{"empty body, no html", map[string]string{"body": `""`}, 201, "", nil},
		{"neither body nor html", map[string]string{"body": ""}, 422,
			`{"loc":["body","body"],"msg":"Field required unless html is given","type":"missing"}`, nil},
		{"no body, empty html", map[string]string{"body": "", "html": `""`}, 422, `"loc":["body","body"]`, nil},
		{"labels and metadata", map[string]string{"labels": `["billing","q3","billing"]`,
			"metadata": `{"order_id": 12345678901234567890, "tags": {"a": [1, 2.50]}, "ok": true}`}, 201, "",
			func(t *testing.T, c *capture) {
				if !reflect.DeepEqual(c.req.Labels, []string{"billing", "q3"}) {
					t.Errorf("labels %q, want [billing q3] (the duplicate dropped)", c.req.Labels)
				}
				want := map[string]any{"order_id": json.Number("12345678901234567890"),
					"tags": map[string]any{"a": []any{json.Number("1"), json.Number("2.50")}}, "ok": true}
				if !reflect.DeepEqual(c.req.Metadata, want) {
					t.Errorf("metadata %#v, want %#v (numbers digit for digit)", c.req.Metadata, want)
				}
			}},
		{"null labels and metadata", map[string]string{"labels": "null", "metadata": "null"}, 201, "", nil},
		{"labels not a list", map[string]string{"labels": `"billing"`}, 422, `{"loc":["body","labels"],"msg":"Input should be a valid list","type":"list_type"}`, nil},
		{"a label not a string", map[string]string{"labels": `["a",7]`}, 422, `"loc":["body","labels",1],"msg":"Input should be a valid string"`, nil},
		{"too many labels", map[string]string{"labels": "[" + strings.Join(many, ",") + "]"}, 422,
			`{"loc":["body","labels"],"msg":"List should have at most 50 items after validation, not 51","type":"too_long"}`, nil},
		{"a label too long", map[string]string{"labels": `["a","` + strings.Repeat("é", maxLabelLen+1) + `"]`}, 422,
			`{"loc":["body","labels",1],"msg":"String should have at most 100 characters","type":"string_too_long"}`, nil},
		{"an empty label", map[string]string{"labels": `[""]`}, 422, `"loc":["body","labels",0],"msg":"String should have at least 1 character"`, nil},
		{"a label with a line break", map[string]string{"labels": `["a\nb"]`}, 422, `"loc":["body","labels",0],"msg":"Labels must not contain control characters"`, nil},
		{"metadata a list", map[string]string{"metadata": `[1]`}, 422, `{"loc":["body","metadata"],"msg":"Input should be a valid dictionary","type":"dict_type"}`, nil},
		{"metadata a string", map[string]string{"metadata": `"x"`}, 422, `"loc":["body","metadata"]`, nil},
		{"metadata too large", map[string]string{"metadata": big}, 422,
			`{"loc":["body","metadata"],"msg":"metadata should be at most 16384 bytes of JSON, not 16392","type":"too_long"}`, nil},
		{"metadata at the limit, spaces not counted", map[string]string{"metadata": `{ "k" : "` + strings.Repeat("x", maxMetadataSize-8) + `" }`}, 201, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &capture{}
			h := New(Options{Store: fakeStore{}, Sender: c, Throttle: memThrottle(0, 0),
				AttachmentMaxSize: 1 << 20, AttachmentMaxTotalSize: 1 << 20, AttachmentMaxCount: 3})
			rec := serve(h, "POST", "/v1/messages", sendWith(tt.fields))
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("got %d %s, want %d containing %s", rec.Code, rec.Body, tt.status, tt.want)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}
