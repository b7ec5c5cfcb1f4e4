package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
	"github.com/nornweave/nornweave/store"
)

// BenchmarkSuppressionSend is issue 29's first must-show: what the
// suppression check adds to a direct send. POST /v1/messages over HTTP to
// the app in-process, the smtp provider to an in-process relay, no
// throttle, from 4×GOMAXPROCS clients, with the suppression list empty
// and with 100,000 addresses on it (none of them the recipient, so every
// send looks its recipient up and goes out); each case on a server and
// database of its own, both built before either is measured. The cases
// alternate in NORNWEAVE_BENCH_ROUNDS rounds (see alternate), the second
// of each round reporting the round's overhead-% in time per send; then
// "paired" measures both at once (benchPairedSends), which a machine
// shared with other work disturbs far less. make bench runs one round:
//
//	NORNWEAVE_BENCH_ROUNDS=6 go test -run '^$' -bench BenchmarkSuppressionSend -benchtime 3s ./tests/
func BenchmarkSuppressionSend(b *testing.B) {
	cases := []int{0, 100_000}
	for _, driver := range []string{"sqlite", "postgres"} {
		b.Run(driver, func(b *testing.B) {
			servers := make([]*server, len(cases))
			bodies := make([][]byte, len(cases))
			for i, n := range cases {
				servers[i] = startSuppressed(b, driver, n)
				bodies[i] = smallSendJSON(b, servers[i].createInbox(b, "bench"), "ann@customer.test")
			}
			names := []string{fmt.Sprintf("suppressed=%d", cases[0]), fmt.Sprintf("suppressed=%d", cases[1])}
			alternate(b, names, func(b *testing.B, i int) float64 {
				return benchHTTPSends(b, servers[i], bodies[i])
			}, func(b *testing.B, perSend []float64) {
				b.ReportMetric((perSend[1]/perSend[0]-1)*100, "overhead-%")
			})
			b.Run("paired", func(b *testing.B) { benchPairedSends(b, servers, bodies) })
		})
	}
}

// benchPairedSends is the comparison with both cases measured at once:
// each of 4×GOMAXPROCS clients posts to the two servers in turn (which
// first alternates), timing each request, so that whatever else the
// machine does falls on both alike; an iteration is one pair. It reports
// the mean time of a send to each (µs/send-0, µs/send-1) and the overhead
// of server 1 against server 0, of the mean and of the median.
func benchPairedSends(b *testing.B, servers []*server, bodies [][]byte) {
	c := benchClient(b)
	var (
		mu    sync.Mutex
		lat   [2][]time.Duration
		first error
	)
	b.ReportAllocs()
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine [2][]time.Duration
		defer func() {
			mu.Lock()
			defer mu.Unlock()
			for i := range lat {
				lat[i] = append(lat[i], mine[i]...)
			}
		}()
		for k := 0; pb.Next(); k++ {
			for j := range 2 {
				i := (j + k) % 2
				t0 := time.Now()
				status, out, err := c.post(servers[i].URL+"/v1/messages", bodies[i], nil)
				if err != nil || status != http.StatusCreated {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("send: %d %.300s %v", status, out, err)
					}
					mu.Unlock()
					return
				}
				mine[i] = append(mine[i], time.Since(t0))
			}
		}
	})
	b.StopTimer()
	if first != nil {
		b.Fatal(first)
	}
	var mean, median [2]float64
	for i, l := range lat {
		var sum time.Duration
		for _, d := range l {
			sum += d
		}
		slices.Sort(l)
		mean[i] = float64(sum.Microseconds()) / float64(len(l))
		median[i] = float64(l[len(l)/2].Microseconds())
		b.ReportMetric(mean[i], fmt.Sprintf("µs/send-%d", i))
	}
	b.ReportMetric((mean[1]/mean[0]-1)*100, "overhead-%")
	b.ReportMetric((median[1]/median[0]-1)*100, "p50-overhead-%")
}

// alternate runs the cases of a same-run comparison as sub-benchmarks in
// NORNWEAVE_BENCH_ROUNDS rounds (default 1), in order in odd rounds and in
// reverse in even ones, so that a machine that slows down or speeds up
// during the run favours none. (go test -count repeats a sub-benchmark
// back to back, which does not interleave.) run measures case i and
// returns its cost per operation; the case run last in a round reports
// compare of the round's costs, in the order of names. A name repeated in
// later rounds gets go test's #NN suffix; strip it (sed 's/#[0-9]*//')
// before benchstat.
func alternate(b *testing.B, names []string, run func(b *testing.B, i int) float64,
	compare func(b *testing.B, costs []float64)) {
	rounds := 1
	if v := os.Getenv("NORNWEAVE_BENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("NORNWEAVE_BENCH_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	for r := range rounds {
		order := make([]int, len(names))
		for k := range order {
			order[k] = k
		}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		costs := make([]float64, len(names))
		for k, i := range order {
			b.Run(names[i], func(b *testing.B) {
				costs[i] = run(b, i)
				if k == len(order)-1 && !slices.Contains(costs, 0) {
					compare(b, costs)
				}
			})
		}
	}
}

// startSuppressed starts a server on a fresh database of driver with n
// addresses on its suppression list, and checks that a send to one of
// them is refused: the list the benchmark filled is the one the server
// reads.
func startSuppressed(b *testing.B, driver string, n int) *server {
	mx := smtptest.Start(b)
	cfg := baseConfig(b, driver, mx)
	fillSuppressions(b, cfg, n)
	s := start(b, cfg, mx)
	if n > 0 {
		inbox := s.createInbox(b, "check")
		r := s.send(b, inbox, "User1@List1.test")
		if r.Status != http.StatusUnprocessableEntity || r.JSON(b)["code"] != "recipient_suppressed" {
			b.Fatalf("send to a filled suppression = %d %s, want 422 recipient_suppressed", r.Status, r.Body)
		}
	}
	return s
}

// fillSuppressions adds n addresses, user<i>@list<i mod 1000>.test in their
// canonical form, to the suppression list of cfg's database in one
// statement, before the server opens it.
func fillSuppressions(b *testing.B, cfg config.Config, n int) {
	if n == 0 {
		return
	}
	ctx := context.Background()
	o := store.Options{Driver: cfg.DBDriver, DSN: cfg.SQLitePath()}
	q := `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO suppressions (email, reason, source, created_at)
		SELECT 'user' || i || '@list' || (i % 1000) || '.test', 'bounce', 'sendgrid', ? FROM n`
	if cfg.DBDriver == store.DriverPostgres {
		o.DSN = cfg.PostgresURL()
		q = `INSERT INTO suppressions (email, reason, source, created_at)
			SELECT 'user' || i || '@list' || (i % 1000) || '.test', 'bounce', 'sendgrid', $2::timestamptz
			FROM generate_series(1, $1::int) AS i`
	}
	st, err := store.Open(ctx, o)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	res, err := st.SQL().ExecContext(ctx, q, n, time.Now().UTC())
	if err != nil {
		b.Fatalf("fill suppressions: %v", err)
	}
	if got, _ := res.RowsAffected(); got != int64(n) {
		b.Fatalf("filled %d suppressions, want %d", got, n)
	}
	if cfg.DBDriver == store.DriverPostgres {
		// As autovacuum would soon after: the planner knows the table.
		if _, err := st.SQL().ExecContext(ctx, "ANALYZE suppressions"); err != nil {
			b.Fatal(err)
		}
	}
}

// smallSendJSON is the JSON of a small send from inbox to one recipient.
func smallSendJSON(b *testing.B, inbox, to string) []byte {
	body, err := json.Marshal(map[string]any{"inbox_id": inbox, "to": []string{to}, "subject": "Benchmark",
		"body": "Hello **Ann**, this is a benchmark message."})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// benchHTTPSends posts body to /v1/messages once per iteration, from
// 4×GOMAXPROCS clients, each answer a 201, reports sends/s and returns
// the wall time per send in ns.
func benchHTTPSends(b *testing.B, s *server, body []byte) float64 {
	c := benchClient(b)
	var (
		mu    sync.Mutex
		first error
	)
	b.ReportAllocs()
	b.SetParallelism(4) // as runSends: 4×GOMAXPROCS senders
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if status, out, err := c.post(s.URL+"/v1/messages", body, nil); err != nil || status != http.StatusCreated {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("send: %d %.300s %v", status, out, err)
				}
				mu.Unlock()
				return
			}
		}
	})
	b.StopTimer()
	if first != nil {
		b.Fatal(first)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// benchHTTPClient posts from benchmark goroutines, keeping a connection per
// client alive.
type benchHTTPClient struct{ *http.Client }

func benchClient(b *testing.B) benchHTTPClient {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	return benchHTTPClient{&http.Client{Transport: tr, Timeout: time.Minute}}
}

// post sends a JSON body with headers and returns the status and body.
func (c benchHTTPClient) post(url string, body []byte, h http.Header) (int, []byte, error) {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	return res.StatusCode, out, err
}
