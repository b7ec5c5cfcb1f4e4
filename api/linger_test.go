package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/store"
)

// A client that writes its whole request before it reads the answer gets
// the refusal, not a reset connection: the server reads what a refused
// request still sends, up to twice the request limit (CI's
// TestBadInputLimits/postgres saw "connection reset by peer" for a 413).
// Beyond that bound it reads nothing more and closes, as before.
func TestRefusedBodyIsReadBeforeTheAnswer(t *testing.T) {
	t.Parallel()
	start := func(apiKey string) (*Server, string) {
		srv := New(Options{Store: fakeStore{}, Sender: fakeSender(func() (*store.Message, error) {
			t.Error("a refused request was sent")
			return nil, nil
		}), Throttle: memThrottle(0, 0), APIKey: apiKey,
			AttachmentMaxTotalSize: 1 << 10, BodyMaxSize: 1 << 10, HTMLMaxSize: 1 << 10})
		ts := httptest.NewServer(srv)
		t.Cleanup(ts.Close)
		return srv, ts.Listener.Addr().String()
	}
	srv, addr := start("")
	limit := srv.api.BodyLimit() // about 1 MiB: the field allowance

	// dial returns a connection whose client side buffers little, so that
	// a body the server does not read cannot all fit in the kernel's
	// buffers and the client's write has to wait for the server.
	dial := func(t *testing.T, addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.(*net.TCPConn).SetWriteBuffer(64 << 10); err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(time.Minute)) // a hung server fails the test, not the run
		return c
	}
	head := func(contentType, length string) string {
		return "POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: " + contentType + "\r\n" + length + "\r\n"
	}
	fixed := func(n int64) string { return fmt.Sprintf("Content-Length: %d\r\n", n) }
	body := strings.Repeat("a", int(limit*3/2))
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)

	for _, tt := range []struct {
		name, request string
		status        int
		code          string
	}{
		{"over the request limit", head("application/json", fixed(int64(len(body)))) + body, 413, "payload_too_large"},
		{"over the request limit, chunked", head("application/json", "Transfer-Encoding: chunked\r\n") + chunked,
			413, "payload_too_large"},
		{"not JSON", head("text/plain", fixed(int64(len(body)))) + body, 415, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := dial(t, addr)
			if _, err := c.Write([]byte(tt.request)); err != nil {
				t.Fatalf("writing the whole request: %v (the server did not read what it refused)", err)
			}
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			defer res.Body.Close()
			var e ErrorBody
			_ = json.NewDecoder(res.Body).Decode(&e)
			if res.StatusCode != tt.status || (tt.code != "" && e.Code != tt.code) {
				t.Fatalf("got %d %+v, want %d %s", res.StatusCode, e, tt.status, tt.code)
			}
		})
	}

	t.Run("beyond the bound", func(t *testing.T) {
		t.Parallel()
		c := dial(t, addr)
		n := 3 * limit // more than twice the limit: not read
		if _, err := c.Write([]byte(head("application/json", fixed(n)) + strings.Repeat("a", int(n)))); err == nil {
			t.Fatalf("the server read all of a %d-byte body it refused; it reads at most %d", n, 2*limit)
		}
	})

	t.Run("without the key", func(t *testing.T) {
		t.Parallel()
		_, keyed := start("key")
		c := dial(t, keyed)
		if _, err := c.Write([]byte(head("application/json", fixed(int64(len(body)))) + body)); err == nil {
			t.Fatal("the server read a body it refused to a client without the API key")
		}
	})
}
