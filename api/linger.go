package api

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// lingerTime bounds how long a refused request's unread body is read
// before the refusal is written (nginx's lingering_timeout is 5 s between
// reads; this is for the whole rest of the body).
const lingerTime = 10 * time.Second

// readRefusedBody reads and throws away what a refused request has not
// sent yet, before the refusal is written, so that the client reads its
// 413 (or 415, or 503) rather than a reset connection.
//
// Go's server answers a request whose body it did not read, waits 500 ms
// and closes the connection with the body still arriving: the kernel then
// resets it, and a client that reads the answer only once its request is
// written (many do; Go's own client does too on a loaded machine) sees
// "connection reset by peer" instead. This is nginx's lingering close,
// done before the answer rather than after it, since an HTTP/1 handler
// cannot read once it has written. It is bounded by construction: a body
// of at most twice the request limit, for at most lingerTime; a larger
// body, or a client too slow for it, gets the answer and a closed
// connection, as before. It runs after the API key check and only on the
// paths that need the key, so only a client with the key can make the
// server read a body it refused (a provider's webhook with an oversized
// body is refused and closed, as before).
func (a *API) readRefusedBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0 ||
			(a.APIKey != "" && !needsKey(req.URL.Path)) {
			return next(c)
		}
		body := &countedBody{ReadCloser: req.Body}
		req.Body = body
		err := next(c)
		if err == nil || body.done || c.Response().Committed ||
			errors.Is(err, errUploadTooSlow) || req.Context().Err() != nil {
			return err
		}
		bound := 2 * a.bodyLimit
		if req.ContentLength > bound {
			return err
		}
		_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(lingerTime))
		_, _ = io.CopyN(io.Discard, body, bound-body.n)
		return err
	}
}

// countedBody counts what the handler read of a request body, and whether
// it read all of it.
type countedBody struct {
	io.ReadCloser
	n    int64
	done bool
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err == io.EOF {
		b.done = true
	}
	return n, err
}
