package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
)

// loadDoc loads openapi.json with its references resolved.
func loadDoc(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPIDocument)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

// operations calls f for every operation.
func operations(doc *openapi3.T, f func(method, path string, op *openapi3.Operation)) {
	for _, path := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(path).Operations() {
			f(method, path, op)
		}
	}
}

// unavailableCodes greps this package's source for every code a 503 can
// carry: newError(http.StatusServiceUnavailable, "code", …) and the
// problem{Status: http.StatusServiceUnavailable, Code: "code"} of the error
// mapping's 503s.
func unavailableCodes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`StatusServiceUnavailable,\s*(?:"|Code:\s*")([a-z_]+)"`)
	var codes []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(codes, m[1]) {
				codes = append(codes, m[1])
			}
		}
	}
	slices.Sort(codes)
	return codes
}

// Every code a 503 can carry is documented on some operation's 503, and
// each operation but /health (which answers while the server drains)
// documents a 503.
func TestOpenAPIDocumentsEvery503Code(t *testing.T) {
	codes := unavailableCodes(t)
	want := []string{"database_unavailable", "inbox_changing", "search_timeout", "server_busy", "shutting_down", "throttle_unavailable", "webhook_busy"}
	if !slices.Equal(codes, want) {
		t.Errorf("the source's 503 codes are %v; the test knew %v: document the new one and update want", codes, want)
	}
	documented := map[string]bool{}
	operations(loadDoc(t), func(method, path string, op *openapi3.Operation) {
		r := op.Responses.Status(503)
		if r == nil {
			if path != "/health" {
				t.Errorf("%s %s documents no 503", method, path)
			}
			return
		}
		if codes := enumCodes(r.Value); len(codes) > 0 {
			for _, c := range codes {
				documented[c] = true
			}
		} else if path != "/ready" {
			t.Errorf("%s %s: its 503 names no code", method, path)
		}
	})
	for _, c := range codes {
		if !documented[c] {
			t.Errorf("503 %s is not documented on any operation", c)
		}
	}
}

// enumCodes is the code enum of a 503's body: allOf [Error, {code: enum}].
func enumCodes(r *openapi3.Response) []string {
	mt := r.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return nil
	}
	var codes []string
	for _, s := range mt.Schema.Value.AllOf {
		if p := s.Value.Properties["code"]; p != nil {
			for _, e := range p.Value.Enum {
				codes = append(codes, e.(string))
			}
		}
	}
	return codes
}

// Every response carries X-Request-Id, and the document says so.
func TestOpenAPIEveryResponseHasXRequestId(t *testing.T) {
	operations(loadDoc(t), func(method, path string, op *openapi3.Operation) {
		for status, r := range op.Responses.Map() {
			if r.Value.Headers["X-Request-Id"] == nil {
				t.Errorf("%s %s %s: no X-Request-Id header", method, path, status)
			}
		}
	})
}

// Every operation shows a request (a curl line in its description), every
// parameter (but an optional header: in words) and request body has examples, and each example is valid
// against its schema; the send is the first operation and its tag the
// first, so the reference page opens on it.
func TestOpenAPIExamples(t *testing.T) {
	doc := loadDoc(t)
	operations(doc, func(method, path string, op *openapi3.Operation) {
		name := method + " " + path
		if !strings.Contains(op.Description, "```sh\ncurl ") {
			t.Errorf("%s: no curl example in its description", name)
		}
		params := append(doc.Paths.Value(path).Parameters, op.Parameters...)
		for _, p := range params {
			if p.Value.In == "header" && !p.Value.Required {
				// Try it out sends a header's example with every Execute:
				// a pre-filled Idempotency-Key made the second try a 422.
				// Its example is in words, in the description.
				if p.Value.Example != nil || len(p.Value.Examples) > 0 || !strings.Contains(p.Value.Description, "e.g. ") {
					t.Errorf("%s: optional header %s has an example value, or no \"e.g. \" in its description", name, p.Value.Name)
				}
				continue
			}
			if p.Value.Example == nil && len(p.Value.Examples) == 0 {
				t.Errorf("%s: parameter %s has no example", name, p.Value.Name)
			} else if p.Value.Example != nil {
				if err := p.Value.Schema.Value.VisitJSON(p.Value.Example); err != nil {
					t.Errorf("%s: parameter %s: example %v: %v", name, p.Value.Name, p.Value.Example, err)
				}
			}
		}
		if op.RequestBody != nil {
			mt := op.RequestBody.Value.Content.Get("application/json")
			if len(mt.Examples) == 0 {
				t.Errorf("%s: request body has no examples", name)
			}
			for k, ex := range mt.Examples {
				if err := mt.Schema.Value.VisitJSON(ex.Value.Value); err != nil {
					t.Errorf("%s: request example %s: %v", name, k, err)
				}
			}
		}
		for status, r := range op.Responses.Map() {
			for _, mt := range r.Value.Content {
				for k, ex := range mt.Examples {
					if err := mt.Schema.Value.VisitJSON(ex.Value.Value); err != nil {
						t.Errorf("%s %s: response example %s: %v", name, status, k, err)
					}
				}
			}
		}
	})
	// kin's maps forget the order; the raw document keeps it.
	var raw struct {
		Paths json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPIDocument, &raw); err != nil {
		t.Fatal(err)
	}
	path, item := firstMember(t, raw.Paths)
	method, _ := firstMember(t, item)
	if got := strings.ToUpper(method) + " " + path; got != "POST /v1/messages" || doc.Tags[0].Name != "messages" {
		t.Errorf("the document opens on %s (tag %s), want POST /v1/messages (tag messages)", got, doc.Tags[0].Name)
	}
}

// firstMember is the first key of a JSON object, and its value.
func firstMember(t *testing.T, obj json.RawMessage) (string, json.RawMessage) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", obj)
	}
	key, err := dec.Token()
	if err != nil {
		t.Fatal(err)
	}
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return key.(string), v
}

// The document's example times are served on the day after the request,
// so a scheduled example sent by Try it out is within SCHEDULE_MAX_AHEAD's
// default, whatever the day (issue 25: examples in 2030 were refused with
// 422). Everything else is served as written.
func TestOpenAPIExampleTimesAreAcceptedWhenServed(t *testing.T) {
	for _, now := range []time.Time{
		time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2027, 2, 28, 12, 0, 0, 0, time.FixedZone("", -10*3600)),
	} {
		h := New(Options{Store: fakeStore{}, Clock: clocktest.New(now), Throttle: memThrottle(5, 0),
			AttachmentMaxSize: 1 << 20, AttachmentMaxTotalSize: 1 << 20, AttachmentMaxCount: 2})
		rec := serve(h, "GET", "/openapi.json", "")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /openapi.json = %d", rec.Code)
		}
		doc, err := openapi3.NewLoader().LoadFromData(rec.Body.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		requestExample := func(method, path, name string) string {
			t.Helper()
			op := doc.Paths.Value(path).GetOperation(method)
			ex := op.RequestBody.Value.Content.Get("application/json").Examples[name]
			if ex == nil {
				t.Fatalf("%s %s has no request example %q", method, path, name)
			}
			at, _ := ex.Value.Value.(map[string]any)["scheduled_at"].(string)
			return at
		}
		for _, at := range []string{requestExample("POST", "/v1/messages", "scheduled"),
			requestExample("PATCH", "/v1/messages/{id}", "later")} {
			when, err := time.Parse(time.RFC3339, at)
			if err != nil {
				t.Fatalf("scheduled_at example %q: %v", at, err)
			}
			// Held (more than a second ahead), not refused (at most the
			// default SCHEDULE_MAX_AHEAD, 720h).
			if ahead := when.Sub(now); ahead <= time.Second || ahead > 720*time.Hour {
				t.Errorf("served at %s, the example scheduled_at %s is %s ahead, want within (1s, 720h]", now, at, ahead)
			}
		}
		tomorrow := now.UTC().AddDate(0, 0, 1).Format(time.DateOnly)
		want := bytes.ReplaceAll(OpenAPIDocument, []byte(`"`+exampleDay+"T"), []byte(`"`+tomorrow+"T"))
		if !bytes.Equal(rec.Body.Bytes(), want) || rec.Header().Get("Content-Length") != strconv.Itoa(len(want)) {
			t.Errorf("at %s the document served (Content-Length %q) is not the file with %s for %s",
				now, rec.Header().Get("Content-Length"), tomorrow, exampleDay)
		}
	}
}
