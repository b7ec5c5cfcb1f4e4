package tests

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// upload starts a POST /v1/messages declaring length bytes from the local
// address from (a loopback address: each is a client of its own), sends
// the start of a JSON body and returns the connection.
func upload(t *testing.T, s *server, from string, length int) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\n\r\n{\"body\":\"", length)
	return c
}

// TestBadInputSlowUploads is issue 17, item 3: two uploads that declare
// 50 MB and 17 MB hold no more than their client's share of
// REQUESTS_IN_FLIGHT_MB, so another client's send with a 200 KB attachment
// goes through at once; and a body trickled below the minimum rate is cut
// off with 408. Neither stores or sends anything.
func TestBadInputSlowUploads(t *testing.T) {
	t.Parallel() // mostly waiting: it runs beside TestSIGTERMWaitsForTheLongestLease
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, nil)
		inbox := s.createInbox(t, "support")

		// One client uploads two large bodies, steadily and above the
		// minimum rate (64 KiB/s each): it holds what it declared as long
		// as it keeps sending, which is longer than this test.
		stop := make(chan struct{})
		var conns []net.Conn
		for _, n := range []int{50 << 20, 17 << 20} {
			c := upload(t, s, "127.0.0.2", n)
			conns = append(conns, c)
			go func() {
				chunk := []byte(strings.Repeat("a", 8<<10))
				for {
					select {
					case <-stop:
						return
					case <-time.After(125 * time.Millisecond):
						if _, err := c.Write(chunk); err != nil {
							return
						}
					}
				}
			}()
		}
		time.Sleep(500 * time.Millisecond) // let both reach the server and claim their budget
		att := base64.StdEncoding.EncodeToString(make([]byte, 200<<10))
		r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
			"subject": "s", "body": "b", "attachments": []map[string]any{{"filename": "a.bin",
				"content_type": "application/octet-stream", "content_base64": att}}})
		mustStatus(t, r, http.StatusCreated)
		// Answered while the other client's uploads are still waiting and
		// unanswered: not after the second one gave up its wait for the
		// budget (90 s), as when a client could hold all of it.
		for i, c := range conns {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			if n, err := c.Read(make([]byte, 1)); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("upload %d was answered (%v) before the normal send: it held the budget", i, err)
			}
		}
		close(stop)
		s.SMTP.WaitForCount(t, 1)

		// A trickle, a byte a second, is cut off after the grace.
		c := upload(t, s, "127.0.0.3", 1<<20)
		go func() {
			for range 120 {
				time.Sleep(time.Second)
				if _, err := c.Write([]byte("a")); err != nil {
					return
				}
			}
		}()
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer to a trickled body: %v", err)
		}
		var body struct{ Code string }
		_ = json.NewDecoder(res.Body).Decode(&body)
		if res.StatusCode != http.StatusRequestTimeout || body.Code != "request_timeout" {
			t.Fatalf("trickled body: %d %q, want 408 request_timeout", res.StatusCode, body.Code)
		}
		if n := s.SMTP.Count(); n != 1 {
			t.Errorf("SMTP server has %d messages, want 1 (the normal send)", n)
		}
		if got := s.rows(t, inbox); got.messages != 1 {
			t.Errorf("rows = %+v, want 1 message (the normal send)", got)
		}
	})
}
