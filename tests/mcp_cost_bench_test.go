//go:build !race

package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/smtptest"
	"github.com/nornweave/nornweave/internal/testkit/testdb"
)

// BenchmarkMCPHostileCost measures issue 25's MCP cases against the server
// as a process (built from this tree, default limits: REQUESTS_IN_FLIGHT_MB
// 64), with a plain send of a 900 KB body in the same run as the baseline.
// For each case: the growth of the process's peak RSS (VmHWM, reset through
// /proc/PID/clear_refs, less VmRSS before) and its CPU time (utime+stime),
// per byte of the request. One measurement per run; b.N is ignored. make
// bench runs it; the numbers are in BENCHMARKS.md, section 11.
func BenchmarkMCPHostileCost(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "nornweave")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/nornweave").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	mx := smtptest.Start(b)
	port := freePortTB(b)
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), "DB_DRIVER=sqlite", "DATABASE_URL="+testdb.SQLitePath(b), "EMAIL_PROVIDER=smtp",
		"EMAIL_DOMAIN=acme.test", "SMTP_HOST="+mx.Host(), fmt.Sprintf("SMTP_PORT=%d", mx.Port()), "SMTP_USE_TLS=false",
		"HOST=127.0.0.1", "LOG_LEVEL=warning", fmt.Sprintf("PORT=%d", port))
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	for i := 0; ; i++ {
		if res, err := http.Get(url + "/health"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if i > 600 {
			b.Fatalf("server not healthy\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	pid := cmd.Process.Pid

	post := func(path, body string, headers ...string) (int, []byte) {
		req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, out
	}
	js := func(v any) string { out, _ := json.Marshal(v); return string(out) }
	_, out := post("/v1/inboxes", `{"name":"Big","email_username":"big"}`)
	var inbox struct{ ID string }
	_ = json.Unmarshal(out, &inbox)
	largeBody := strings.Repeat("ab\n", 300<<10) // 900 KB, every newline two bytes of JSON
	send := js(map[string]any{"inbox_id": inbox.ID, "to": []string{"a@b.test"}, "subject": "s", "body": largeBody})
	for range 40 {
		if st, out := post("/v1/messages", send); st != 201 {
			b.Fatalf("send: %d %.200s", st, out)
		}
	}
	att := func(n int) string {
		return js(map[string]any{"inbox_id": inbox.ID, "to": []string{"a@b.test"}, "subject": "f", "body": "b",
			"attachments": []map[string]any{{"filename": "f.bin", "content_type": "application/octet-stream",
				"content_base64": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, n))}}})
	}
	attachmentID := func(size int) string {
		st, out := post("/v1/messages", att(size))
		if st != 201 {
			b.Fatalf("send with attachment: %d %.200s", st, out)
		}
		var m struct{ ID string }
		_ = json.Unmarshal(out, &m)
		res, err := http.Get(url + "/v1/attachments?message_id=" + m.ID)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		var l struct{ Items []struct{ ID string } }
		_ = json.NewDecoder(res.Body).Decode(&l)
		return l.Items[0].ID
	}
	big, largest := attachmentID(20<<20), attachmentID(5<<20)

	call := func(id int, tool string, args map[string]any) string {
		return js(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
			"params": map[string]any{"name": tool, "arguments": args}})
	}
	batch := func(n int, one func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = one(i)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	listCall := func(i int) string {
		return call(i, "list_messages", map[string]any{"inbox_id": inbox.ID, "limit": 50})
	}
	version := []string{"Mcp-Protocol-Version", "2025-06-18"}

	type result struct {
		name            string
		reqBytes        int64
		answered        string
		rssGrowth, cpus float64 // MiB, seconds
	}
	var results []result
	measure := func(name string, reqBytes int64, run func() string) {
		time.Sleep(200 * time.Millisecond) // let the last case's garbage settle
		before := pidStatus(b, pid, "VmRSS")
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			b.Fatalf("reset VmHWM: %v", err)
		}
		cpu0 := pidCPU(b, pid)
		answered := run()
		growth := pidStatus(b, pid, "VmHWM") - before
		results = append(results, result{name, reqBytes, answered, float64(growth) / (1 << 20), pidCPU(b, pid) - cpu0})
	}

	measure("plain send, 900 KB body", int64(len(send)), func() string {
		st, _ := post("/v1/messages", send)
		return strconv.Itoa(st)
	})
	list20 := batch(20, listCall)
	measure("batch of 20 list_messages (40 messages of 900 KB)", int64(len(list20)), func() string {
		st, out := post("/mcp", list20)
		return fmt.Sprintf("%d %.60s", st, out)
	})
	var oneByOne int64
	for i := range 20 {
		oneByOne += int64(len(listCall(i)))
	}
	measure("the same 20 list_messages one by one", oneByOne, func() string {
		var answer int
		for i := range 20 {
			_, out := post("/mcp", listCall(i), version...)
			answer += len(out)
		}
		return fmt.Sprintf("200 x20, %.1f MiB answered", float64(answer)/(1<<20))
	})
	attCall := func(id string) func(i int) string {
		return func(i int) string { return call(i, "get_attachment_content", map[string]any{"attachment_id": id}) }
	}
	batch8 := batch(8, attCall(big))
	measure("batch of 8 get_attachment_content, 20 MiB file", int64(len(batch8)), func() string {
		st, out := post("/mcp", batch8)
		return fmt.Sprintf("%d %.60s", st, out)
	})
	concurrent := func(id string) func() string {
		return func() string {
			var wg sync.WaitGroup
			codes := make([]string, 8)
			for i := range 8 {
				wg.Go(func() {
					st, out := post("/mcp", attCall(id)(i), version...)
					codes[i] = strconv.Itoa(st)
					if bytes.Contains(out, []byte(`"isError":true`)) {
						codes[i] += " refused"
					}
				})
			}
			wg.Wait()
			return strings.Join(codes, ", ")
		}
	}
	measure("8 concurrent get_attachment_content, 20 MiB file", 8*int64(len(attCall(big)(0))), concurrent(big))
	measure("8 concurrent get_attachment_content, 5 MiB file (the largest answered)",
		8*int64(len(attCall(largest)(0))), concurrent(largest))

	plain := results[0]
	plainCPU := plain.cpus / float64(plain.reqBytes)
	b.Logf("%-72s %10s %12s %10s %12s %s", "case", "request", "RSS growth", "CPU", "CPU/B ÷ plain", "answered")
	for _, r := range results {
		b.Logf("%-72s %9.1fK %9.1f MiB %8.2f s %12.1f   %s", r.name, float64(r.reqBytes)/1024, r.rssGrowth, r.cpus,
			r.cpus/float64(r.reqBytes)/plainCPU, r.answered)
	}
	b.ReportMetric(results[1].rssGrowth, "batch-MiB")
	b.ReportMetric(results[4].rssGrowth, "8x20MiB-MiB")
}

// pidStatus reads a "kB" field of /proc/PID/status, in bytes.
func pidStatus(tb testing.TB, pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// pidCPU is the process's user and system CPU time, in seconds (Linux's
// 100 ticks a second).
func pidCPU(tb testing.TB, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:])) // fields from the 3rd on
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// freePortTB is freePort for a benchmark.
func freePortTB(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
