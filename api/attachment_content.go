package api

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/store"
)

// AttachmentFile is an attachment's description and content, read for one
// answer. Its bytes count against the in-flight budget until Close.
type AttachmentFile struct {
	AttachmentResponse
	Content []byte
	release func()
}

// Close gives the content's bytes back to the in-flight budget; it is safe
// to call twice.
func (f *AttachmentFile) Close() {
	if f.release != nil {
		f.release()
		f.release = nil
	}
}

// Base64 is the content as the format=base64 answer carries it.
func (f *AttachmentFile) Base64() AttachmentContent {
	return AttachmentContent{Content: base64.StdEncoding.EncodeToString(f.Content), ContentType: f.ContentType,
		Filename: f.Filename}
}

// OpenAttachment reads an attachment's content. A download holds it (and
// the driver's copy) in memory like a send holds its request, so it takes
// its size from the in-flight budget first (REQUESTS_IN_FLIGHT_MB): many
// downloads of a 25 MB file wait their turn instead of exhausting memory.
// The caller must Close the file.
func (a *API) OpenAttachment(ctx context.Context, id string) (*AttachmentFile, error) {
	att, err := a.Attachment(ctx, id)
	if err != nil {
		return nil, err
	}
	if att.ContentHash == nil {
		return nil, notFound(fmt.Sprintf("Attachment %s has no stored content: it was sent before contents were kept", id))
	}
	release, err := a.TakeInFlight(ctx, int64(att.Size))
	if err != nil {
		return nil, err
	}
	content, err := a.Store.AttachmentContent(ctx, id)
	if err != nil {
		release()
		if errors.Is(err, store.ErrNotFound) { // deleted meanwhile, with its message
			return nil, notFound(fmt.Sprintf("Attachment %s not found", id))
		}
		return nil, err
	}
	return &AttachmentFile{AttachmentResponse: toAttachment(att), Content: content, release: release}, nil
}

// getAttachmentContent answers the content as it was sent (format=binary,
// the default) or as JSON with the content in base64 (format=base64). The
// token and expires of the Python server's signed URLs are ignored: the
// API key authorizes, as on every /v1 route.
func (a *API) getAttachmentContent(c echo.Context) error {
	format := c.QueryParam("format")
	if format != "" && format != "binary" && format != "base64" {
		return fieldError("Input should be 'binary' or 'base64'", "literal_error", "query", "format")
	}
	f, err := a.OpenAttachment(c.Request().Context(), c.Param("id"))
	if errors.Is(err, errServerBusy) {
		c.Response().Header().Set("Retry-After", busyRetryAfter)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	a.paceDownload(c) // a slow reader gives the budget back (download.go)
	if format == "base64" {
		return writeBase64Content(c, f)
	}
	h := c.Response().Header()
	h.Set("Content-Disposition", contentDisposition(f.Filename))
	// The bytes are a client's: a browser that opens the URL must neither
	// render nor run them here.
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; sandbox")
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(f.Content)))
	ct := f.ContentType
	if !safeContentType(ct) { // validated when sent; a row written otherwise is served as bytes
		ct = echo.MIMEOctetStream
	}
	return c.Blob(http.StatusOK, ct, f.Content)
}

// writeBase64Content writes the format=base64 answer, encoding as it
// writes: a 25 MB file is 33 MB of base64, which is never held whole.
func writeBase64Content(c echo.Context, f *AttachmentFile) error {
	tail, err := MarshalNoEscape(AttachmentContent{ContentType: f.ContentType, Filename: f.Filename})
	if err != nil {
		return err
	}
	const head = `{"content":"`
	tail = `",` + strings.TrimPrefix(tail, `{"content":"",`) + "\n"
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	w.Header().Set(echo.HeaderContentLength,
		strconv.Itoa(len(head)+base64.StdEncoding.EncodedLen(len(f.Content))+len(tail)))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	enc := base64.NewEncoder(base64.StdEncoding, bw)
	if _, err := io.WriteString(bw, head); err != nil {
		return err
	}
	if _, err := enc.Write(f.Content); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	if _, err := io.WriteString(bw, tail); err != nil {
		return err
	}
	return bw.Flush()
}

// contentDisposition is "attachment" with the file's name, as RFC 6266
// has it: an ASCII fallback in filename (anything else, quotes, percent
// signs and controls replaced by "_") and, when that differs, the name
// itself in filename* (RFC 8187). Path separators become "_" in both: a
// name is a name, never a place to write to.
func contentDisposition(name string) string {
	name = strings.NewReplacer("/", "_", `\`, "_").Replace(name)
	fallback := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '%' {
			return '_'
		}
		return r
	}, name)
	v := `attachment; filename="` + fallback + `"`
	if fallback != name {
		v += "; filename*=UTF-8''" + rfc8187(name)
	}
	return v
}

// rfc8187 percent-encodes every byte of s but RFC 8187's attr-char.
func rfc8187(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
