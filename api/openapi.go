package api

import (
	"bytes"
	_ "embed"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// OpenAPIDocument is the API's OpenAPI 3.1 description, written by hand
// next to the handlers it describes; tests fail when it and the routes
// disagree, and the end-to-end tests validate real responses against it.
// Its example times are on 2030-01-02 (exampleDay); /openapi.json serves
// it with them moved to tomorrow.
//
//go:embed openapi.json
var OpenAPIDocument []byte

// exampleDay is the day OpenAPIDocument's example times are written on.
// No date can stay both fixed and within SCHEDULE_MAX_AHEAD (30 days by
// default): an example in 2030 was refused with 422 when Try it out sent
// it. So /openapi.json serves every time on this day on the day after the
// request instead: 8 to 32 hours ahead for the examples' 09:00+01:00, and
// a scheduled example is held, not refused, whenever it is tried. In the
// file it stays far ahead, where a copy by hand is refused with a 422 that
// says why, not sent at once as a past time would be.
const exampleDay = "2030-01-02"

// openAPI serves OpenAPIDocument with its example day moved to tomorrow
// (UTC, by the API's clock). The day is as long as exampleDay, so the
// document is written in place, in pieces, without a copy.
func (a *API) openAPI(c echo.Context) error {
	day := a.Clock.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	w.Header().Set(echo.HeaderContentLength, strconv.Itoa(len(OpenAPIDocument)))
	w.WriteHeader(http.StatusOK)
	at := []byte(`"` + exampleDay + "T") // a JSON string that opens with the day
	for doc := OpenAPIDocument; ; {
		i := bytes.Index(doc, at)
		if i < 0 {
			_, err := w.Write(doc)
			return err
		}
		if _, err := w.Write(doc[:i+1]); err != nil {
			return err
		}
		if _, err := w.Write([]byte(day)); err != nil {
			return err
		}
		doc = doc[i+1+len(exampleDay):]
	}
}
