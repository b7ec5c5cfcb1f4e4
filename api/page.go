package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/store"
)

// MaxPageBytes caps the message bodies one list response carries. A page
// stops early, after at least one message, when the next one would pass
// it: "count" says how many came, "total" how many match, and the next page
// starts at offset+count. Without it, limit=500 of 1 MB bodies would read
// and hold half a gigabyte for one request.
const MaxPageBytes = 8 << 20

// ItemOverhead is a generous size of a message's fields other than bodies.
const ItemOverhead = 1 << 10

// withBodies trims a page read with OmitBodies to PageBytes and reads
// the bodies of what is left (the HTML only if withHTML; the text counts
// twice, as "text" and "content_clean").
func (a *API) withBodies(ctx context.Context, msgs []store.Message, withHTML bool) ([]store.Message, error) {
	msgs = msgs[:bodyBatch(msgs, withHTML, a.PageBytes)]
	return msgs, a.loadBodies(ctx, msgs, withHTML)
}

// bodyBatch is how many of msgs, from the first, fit in limit bytes of
// bodies: at least one, so that any message can be read.
func bodyBatch(msgs []store.Message, withHTML bool, limit int64) int {
	var size int64
	for i := range msgs {
		size += 2*msgs[i].TextBytes + ItemOverhead
		if withHTML {
			size += msgs[i].HTMLBytes
		}
		if size > limit && i > 0 {
			return i
		}
	}
	return len(msgs)
}

// loadBodies reads the bodies of msgs, read with OmitBodies, into them.
func (a *API) loadBodies(ctx context.Context, msgs []store.Message, withHTML bool) error {
	if len(msgs) == 0 {
		return nil
	}
	ids := make([]string, len(msgs))
	for i := range msgs {
		ids[i] = msgs[i].ID
	}
	bodies, err := a.Store.MessageBodies(ctx, ids, withHTML)
	if err != nil {
		return err
	}
	for i := range msgs {
		b := bodies[msgs[i].ID]
		msgs[i].Text, msgs[i].HTML = b.Text, b.HTML
	}
	return nil
}

// streamItems writes 200 {"items": [item(0), ...], <tail>} one item at a
// time, so that the response is never held in memory whole (the JSON of a
// body can be several times its size). tail is the rest of the envelope,
// already JSON ("count":3,"total":7). Once the first byte is written the
// status cannot change; a failure after that cuts the response short.
func streamItems(c echo.Context, n int, item func(i int) any, tail string) error {
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, `{"items":[`); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range n {
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return err
			}
		}
		if err := enc.Encode(item(i)); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "],"+tail+"}\n")
	return err
}

// MarshalNoEscape is json.Marshal without HTML escaping, as jsonSerializer
// writes: Message-IDs and HTML come back as "<...>", not "\u003c...". MCP
// writes its results with it too.
func MarshalNoEscape(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return string(bytes.TrimRight(b.Bytes(), "\n")), nil
}
