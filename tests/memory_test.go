//go:build !race

// The race detector instruments every memory access: under -race these
// sends take ~50 s and its shadow memory swamps the numbers. make test runs
// with -race and so skips this file; the in-flight budget's behaviour is
// covered there by api.TestInFlightBudgetSerializesLargeRequests, and make
// bench (and go test ./tests/) runs this measurement.

package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/apptest"
)

// memoryPerBudgetByte is how much process memory (RSS) a byte of request
// body in flight may cost. Measured: 7.8 for one maximum-size send (49 MiB
// on the wire, +384 MiB RSS): the bytes read, the decoded JSON strings, the
// cleaned and decoded attachments, the rendered HTML and the stored and
// indexed row each hold a copy or part of one, and Go's collector lets the
// heap grow to twice what is live before it runs. Without the budget, 8
// concurrent sends took +1692 to +1940 MiB (three runs).
const memoryPerBudgetByte = 10

// TestConcurrentMaxSizeSendsBoundedMemory sends 8 maximum-size messages at
// once (every attachment limit, body and html at their caps) and checks
// that the server's peak memory stays within memoryPerBudgetByte times the
// in-flight budget (REQUESTS_IN_FLIGHT_MB, at least one request limit) —
// not 8 times the size of a request. It measures the growth of the peak
// Go heap (sampled every millisecond) and of the peak RSS of this process
// (VmHWM, reset first through /proc/self/clear_refs).
//
// Not parallel: it measures the whole process's heap and RSS.
func TestConcurrentMaxSizeSendsBoundedMemory(t *testing.T) {
	cfg := apptest.Config(t, "sqlite")
	if os.Getenv("NORNWEAVE_MEMTEST_FULL") == "" {
		// go test: a 13 MiB request, one at a time. make bench sets
		// NORNWEAVE_MEMTEST_FULL=1 for the documented defaults (49 MiB,
		// 64 MiB budget), the number in BENCHMARKS.md.
		cfg.AttachmentMaxSizeMB, cfg.AttachmentMaxTotalSizeMB, cfg.RequestsInFlightMB = 8, 8, 16
	}
	if v := os.Getenv("NORNWEAVE_MEMTEST_INFLIGHT_MB"); v != "" { // to measure without the budget
		cfg.RequestsInFlightMB, _ = strconv.Atoi(v)
	}
	srv := &server{Server: apptest.Start(t, cfg), cfg: cfg}
	inbox := srv.createInbox(t, "big")

	// One request body, shared by every client, so that the client side
	// holds one copy whatever the concurrency.
	total := int64(cfg.AttachmentMaxTotalSizeMB) << 20
	first := min(total, int64(cfg.AttachmentMaxSizeMB)<<20)
	atts := []map[string]any{}
	for i, size := range []int64{first, total - first} {
		if size > 0 {
			atts = append(atts, map[string]any{"filename": fmt.Sprintf("f%d.bin", i),
				"content_type":   "application/octet-stream",
				"content_base64": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, int(size)))})
		}
	}
	body, err := json.Marshal(map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"}, "subject": "big",
		"body": strings.Repeat("a", cfg.BodyMaxSizeMB<<20), "html": strings.Repeat("b", cfg.HTMLMaxSizeMB<<20),
		"attachments": atts})
	if err != nil {
		t.Fatal(err)
	}
	atts = nil
	post := func() int {
		res, err := http.Post(srv.URL+"/v1/messages", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Errorf("send: %v", err)
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := post(); code != http.StatusCreated { // warm up: connections, caches
		t.Fatalf("maximum-size send: got %d, want 201", code)
	}

	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset peak RSS: %v (this test needs Linux)", err)
	}
	baseRSS := procStatus(t, "VmRSS")
	heapSample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(heapSample)
	baseHeap, baseLive := heapSample[0].Value.Uint64(), heapSample[1].Value.Uint64()

	var heapPeak, livePeak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > heapPeak.Load() {
				heapPeak.Store(v)
			}
			if v := s[1].Value.Uint64(); v > livePeak.Load() {
				livePeak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if code := post(); code != http.StatusCreated {
				t.Errorf("concurrent maximum-size send: got %d, want 201", code)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	peakRSS := procStatus(t, "VmHWM")

	budget := max(int64(cfg.RequestsInFlightMB)<<20, int64(len(body)))
	bound := memoryPerBudgetByte * budget
	rssGrowth := peakRSS - baseRSS
	heapGrowth := int64(heapPeak.Load()) - int64(baseHeap)
	t.Logf("request %d MiB; budget %d MiB; RSS %d MiB -> peak %d MiB (+%d MiB); Go heap %d MiB -> peak %d MiB (+%d MiB); live heap %d -> %d MiB; bound +%d MiB",
		len(body)>>20, budget>>20, baseRSS>>20, peakRSS>>20, rssGrowth>>20,
		baseHeap>>20, heapPeak.Load()>>20, heapGrowth>>20, baseLive>>20, livePeak.Load()>>20, bound>>20)
	if heapGrowth > bound {
		t.Errorf("peak Go heap grew by %d MiB under 8 concurrent maximum-size sends, want at most %d MiB "+
			"(%d x the in-flight budget of %d MiB)", heapGrowth>>20, bound>>20, memoryPerBudgetByte, budget>>20)
	}
	if rssGrowth > bound {
		t.Errorf("peak RSS grew by %d MiB under 8 concurrent maximum-size sends, want at most %d MiB "+
			"(%d x the in-flight budget of %d MiB)", rssGrowth>>20, bound>>20, memoryPerBudgetByte, budget>>20)
	}
}

// procStatus reads a "kB" field of /proc/self/status, in bytes.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
