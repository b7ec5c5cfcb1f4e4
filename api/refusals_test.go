package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
)

// Each refusal of a send is counted under its reason, wrapped or not;
// what is not the request's refusal is not counted.
func TestRefusalReasons(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&throttle.RateLimitedError{}, "throttled"},
		{fmt.Errorf("send: %w", &throttle.RateLimitedError{}), "throttled"},
		{&skuld.BlockedError{Domains: []string{"x.test"}}, "domain_blocked"},
		{&skuld.SuppressedError{}, "suppressed"},
		{&throttle.TooLargeError{Limit: 10, Cost: 11}, "validation"},
		{&ValidationError{Errors: []FieldError{{Msg: "Field required"}}}, "validation"},
		{newError(http.StatusBadRequest, "invalid_json", "bad"), "validation"},
		{newError(http.StatusRequestEntityTooLarge, "too_large", "big"), "validation"},
		{echo.NewHTTPError(http.StatusUnsupportedMediaType), "validation"},
		{notFound("inbox x"), ""},
		{&skuld.NotFoundError{Kind: "Inbox", ID: "x"}, ""},
		{&throttle.UnavailableError{Backend: "redis", Err: errors.New("down")}, ""},
		{skuld.ErrShuttingDown, ""},
		{context.Canceled, ""},
		{errors.New("disk full"), ""},
	} {
		if got := refusalReason(tt.err); got != tt.want {
			t.Errorf("refusalReason(%T %v) = %q, want %q", tt.err, tt.err, got, tt.want)
		}
	}
	counted := map[string]int{}
	a := &API{Options: Options{Activity: adder(counted)}}
	a.CountRefusal(nil)
	a.CountRefusal(errors.New("disk full"))
	a.CountRefusal(&skuld.SuppressedError{})
	if len(counted) != 1 || counted["suppressed"] != 1 {
		t.Errorf("counted %v, want one suppressed", counted)
	}
	(&API{}).CountRefusal(&skuld.SuppressedError{}) // no Activity: nothing to count, no panic
}

type adder map[string]int

func (a adder) Add(kind string) { a[kind]++ }
