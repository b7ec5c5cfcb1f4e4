package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/store"
)

// A body trickled far below the minimum rate is cut off with a 408 once
// the grace is over; a body sent at once is not, however large.
func TestSlowUploadIsCutOff(t *testing.T) {
	srv := New(Options{Store: fakeStore{}, Sender: fakeSender(func() (*store.Message, error) {
		return &store.Message{ID: "m", Status: "sent"}, nil
	}), Throttle: memThrottle(0, 0)})
	srv.api.uploadGrace = 300 * time.Millisecond
	ts := httptest.NewServer(srv)
	defer ts.Close()

	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", 1<<20)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // one byte every 100 ms: 10 B/s, 3,000 times too slow
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // without the rate, nothing ever answers
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	var body ErrorBody
	_ = json.NewDecoder(res.Body).Decode(&body)
	if res.StatusCode != http.StatusRequestTimeout || body.Code != "request_timeout" {
		t.Fatalf("got %d %+v, want 408 request_timeout", res.StatusCode, body)
	}

	big := validSend[:len(validSend)-1] + `,"html":"` + strings.Repeat("a", 1<<20) + `"}`
	resp, err := http.Post(ts.URL+"/v1/messages", "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a body sent at once: %d, want 201", resp.StatusCode)
	}
}

// One client's large requests wait for each other, not for the global
// budget: while a client holds its share, another's large request runs.
func TestOneClientHoldsItsShare(t *testing.T) {
	entered, release := make(chan string, 4), make(chan struct{})
	h := New(Options{Store: fakeStore{}, Sender: fakeSender(func() (*store.Message, error) {
		entered <- "sent"
		<-release
		return &store.Message{ID: "m", Status: "sent"}, nil
	}), Throttle: memThrottle(0, 0),
		AttachmentMaxSize: 1 << 20, AttachmentMaxTotalSize: 1 << 20, RequestsInFlight: 1}) // raised to one request limit
	// Each takes a third of the budget: three fit, but not three from one client.
	large := validSend + strings.Repeat(" ", int(h.api.RequestsInFlight/3))
	post := func(remote string) int {
		req := localRequest("POST", "/v1/messages", strings.NewReader(large))
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	var wg sync.WaitGroup
	codes := make(chan int, 3)
	wg.Go(func() { codes <- post("192.0.2.1:1") })
	<-entered // client 1's first request holds its share
	wg.Go(func() { codes <- post("192.0.2.1:2") })
	wg.Go(func() { codes <- post("192.0.2.2:1") })
	if got := <-entered; got != "sent" {
		t.Fatal(got)
	}
	// Two are in the sender: client 1's first and client 2's; client 1's
	// second waits for its share, and has taken nothing from the budget.
	select {
	case <-entered:
		t.Fatal("client 1's second large request ran beside its first")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusCreated {
			t.Errorf("status %d, want 201", c)
		}
	}
}
