package api

import (
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"
)

// A download must be read at minDownloadRate on average after
// downloadGrace, as an upload must arrive (minUploadRate): a client that
// reads an attachment slowly, or not at all, holds the content's bytes of
// REQUESTS_IN_FLIGHT_MB, and every large send waits behind it (four such
// downloads kept a 2 MB send waiting 88 s). One that falls behind is cut
// off: the write fails, the handler returns and the budget is given back.
const (
	minDownloadRate = 32 << 10 // bytes per second
	downloadGrace   = 10 * time.Second
	// downloadMaxTime is the server's WriteTimeout (internal/app), which
	// the rate's write deadlines replace: no download runs longer.
	downloadMaxTime = 7 * time.Minute
	// downloadChunk is how much is written under one deadline.
	downloadChunk = 64 << 10
)

// errDownloadTooSlow is what a write to a client that fell behind returns.
var errDownloadTooSlow = errors.New("response read slower than the minimum download rate; cut off")

// rateWriter is a response body that the client must read at rate bytes a
// second after grace: each chunk is written under the connection's write
// deadline by which the client must have taken it. The server's own
// write deadline does the waiting, so no goroutine or timer of ours is
// left behind. It is used by one handler goroutine.
type rateWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int64
	n     int64 // bytes written so far
	late  bool
}

// paceDownload makes the rest of c's response body a rateWriter at the
// API's download rate. Where the connection's deadline cannot be set
// (httptest's recorder), the server's WriteTimeout is the only bound, as
// before.
func (a *API) paceDownload(c echo.Context) {
	res := c.Response()
	res.Writer = &rateWriter{ResponseWriter: res.Writer, rc: http.NewResponseController(res.Writer),
		start: time.Now(), grace: a.DownloadGrace, rate: a.DownloadMinRate}
}

func (w *rateWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if w.late {
			return written, errDownloadTooSlow
		}
		chunk := p[:min(len(p), downloadChunk)]
		// The chunk's last byte is due when the body has had grace plus
		// (n+len)/rate; never later than the server would allow at all.
		due := min(w.grace+time.Duration((w.n+int64(len(chunk)))*int64(time.Second)/w.rate), downloadMaxTime)
		_ = w.rc.SetWriteDeadline(w.start.Add(due))
		k, err := w.ResponseWriter.Write(chunk)
		written += k
		w.n += int64(k)
		p = p[k:]
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) || time.Now().After(w.start.Add(due)) {
				w.late = true
				return written, errDownloadTooSlow
			}
			return written, err
		}
	}
	return written, nil
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *rateWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
