package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/store"
)

// requestCases are requests of about size bytes: a plain send, and the
// hostile shapes of issue 17, each to be compared with the plain one.
func requestCases(size int) []struct {
	name   string
	body   string
	header string // a header value of this size, when set
} {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	keys := strings.Repeat(`"k":0,`, size/6)
	return []struct {
		name   string
		body   string
		header string
	}{
		{"plain send", `{"inbox_id":"i","to":["a@b.test"],"subject":"s","body":"` + strings.Repeat("a", size-64) + `"}`, ""},
		{"nested JSON", `{"x":` + deep(size/2-4) + `}`, ""},
		{"nested JSON at the cap", `{"x":[` + strings.Repeat(deep(maxJSONDepth-2)+",", size/(2*maxJSONDepth)) + `1]}`, ""},
		{"duplicate keys", `{"x":{` + keys + `"k":0}}`, ""},
		{"numbers", `{"x":[` + strings.Repeat("1,", size/2) + `1]}`, ""},
		{"long header", validSend, strings.Repeat("a", size)},
		{"many headers", validSend, "many"},
	}
}

// BenchmarkRequestCostPerByte measures a request through the whole API
// (middleware, strict JSON, validation, a fake sender), per byte of
// request: ns/B and B/B (bytes allocated per byte).
func BenchmarkRequestCostPerByte(b *testing.B) {
	h := New(Options{Store: fakeStore{}, Sender: fakeSender(func() (*store.Message, error) {
		return &store.Message{ID: "m", Status: store.StatusSent}, nil
	}), Throttle: memThrottle(0, 0),
		BodyMaxSize: 4 << 20})
	for _, size := range []int{64 << 10, 256 << 10, 1 << 20} {
		for _, c := range requestCases(size) {
			b.Run(fmt.Sprintf("%s/%dKB", c.name, size>>10), func(b *testing.B) {
				n := len(c.body)
				if c.header != "" {
					n += size
				}
				b.ReportAllocs()
				b.SetBytes(int64(n))
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for b.Loop() {
					req := localRequest("POST", "/v1/messages", strings.NewReader(c.body))
					req.Header.Set("Content-Type", "application/json")
					switch {
					case c.header == "many":
						for i := range size / 32 {
							req.Header.Add(fmt.Sprintf("X-H-%d", i), "0123456789012345678")
						}
					case c.header != "":
						req.Header.Set("X-Padding", c.header)
					}
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code >= http.StatusInternalServerError {
						b.Fatalf("%d %s", rec.Code, rec.Body)
					}
				}
				runtime.ReadMemStats(&after)
				total := float64(b.N) * float64(n)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/B")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/total, "B/B")
			})
		}
	}
}
