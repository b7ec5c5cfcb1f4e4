package tests

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
)

// TestBadInputSlowDownloadGivesTheBudgetBack: a client that opens an
// attachment's download and reads nothing holds its bytes of the in-flight
// budget only until it falls behind the minimum download rate; then it is
// cut off, and another client's large send, which needs that budget, goes
// through (issue 25: four slow downloads kept a 2 MB send waiting 88 s; on
// 055603e the send waits inFlightWait and gets 503).
//
// The rate is the server's own write deadline, set here to 64 MiB/s after
// 100 ms, so that the client reading nothing is behind at once; no
// assertion reads a clock. The server's send buffer and the client's
// receive buffer are 4 KiB, so the 2 MiB answer cannot fit in them.
func TestBadInputSlowDownloadGivesTheBudgetBack(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		st := openMigrated(t, driver)
		mx := smtptest.Start(t)
		smtp, err := providers.NewSMTP(providers.SMTPConfig{Host: mx.Host(), Port: mx.Port(), Timeout: 15 * time.Second,
			MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		lim := throttle.NewMemory(throttle.NewGlobalRateLimiter(throttle.Limits{}, throttle.Limits{}), clock.NewSystem())
		sender := skuld.NewSender(skuld.Options{Store: st, Provider: smtp, Throttle: lim})
		// The budget is the request limit, about 4.2 MB: the 2 MiB download
		// and the 1.8 MiB send (2.5 MB of JSON) do not fit in it together.
		srv := httptest.NewUnstartedServer(api.New(api.Options{Store: st, Sender: sender, Throttle: lim,
			EmailDomain: "acme.test", AttachmentMaxSize: 2 << 20, AttachmentMaxTotalSize: 2 << 20, AttachmentMaxCount: 1,
			BodyMaxSize: 64 << 10, HTMLMaxSize: 64 << 10, RequestsInFlight: 1,
			DownloadMinRate: 64 << 20, DownloadGrace: 100 * time.Millisecond}))
		srv.Listener = smallSendBuffers{srv.Listener}
		srv.Start()
		t.Cleanup(srv.Close)
		s := &server{Server: &apptest.Server{URL: srv.URL}, SMTP: mx}
		inbox := s.createInbox(t, "files")
		withFile := func(size int) map[string]any {
			return map[string]any{"inbox_id": inbox, "to": []string{"ann@example.com"}, "subject": "file", "body": "here",
				"attachments": []map[string]any{{"filename": "f.bin", "content_type": "application/octet-stream",
					"content_base64": base64.StdEncoding.EncodeToString(make([]byte, size))}}}
		}
		r := s.do(t, "POST", "/v1/messages", withFile(2<<20))
		mustStatus(t, r, http.StatusCreated)
		atts := s.do(t, "GET", "/v1/attachments?message_id="+r.JSON(t)["id"].(string), nil).JSON(t)["items"].([]any)
		attID := atts[0].(map[string]any)["id"].(string)

		// The slow client: its request is answered (so the download holds
		// its budget), then it reads nothing more.
		d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			}); err != nil {
				return err
			}
			return serr
		}}
		conn, err := d.DialContext(context.Background(), "tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /v1/attachments/%s/content HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", attID)
		br := bufio.NewReaderSize(conn, 1024)
		status, err := br.ReadString('\n')
		if err != nil || !strings.Contains(status, " 200 ") {
			t.Fatalf("download: %q, %v; want 200", status, err)
		}

		mustStatus(t, s.do(t, "POST", "/v1/messages", withFile(1800<<10)), http.StatusCreated)

		// The slow client was cut off before it had the whole file.
		n, _ := io.Copy(io.Discard, br)
		if n >= 2<<20 {
			t.Errorf("the slow client read %d bytes, the whole file: it was not cut off", n)
		}
	})
}

// smallSendBuffers gives each accepted connection a 4 KiB send buffer.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}
