package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/core/address"
)

// FieldError is one schema problem, in the shape FastAPI clients parse:
// {"loc": ["body","to",0], "msg": "...", "type": "..."}.
type FieldError struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// ValidationError is a 422 with one FieldError per problem.
type ValidationError struct {
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fmt.Sprintf("%v: %s", fe.Loc, fe.Msg)
	}
	return "validation: " + strings.Join(parts, "; ")
}

// Sentence is the problems as one sentence, for a client that reads text
// rather than the list: "Invalid input: to.0: Invalid email address: x;
// subject: Field required". A location is named without its first part
// ("body", "arguments"), which the client knows.
func (e *ValidationError) Sentence() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		loc := fe.Loc
		if len(loc) > 1 {
			loc = loc[1:]
		}
		names := make([]string, len(loc))
		for j, l := range loc {
			names[j] = fmt.Sprint(l)
		}
		parts[i] = strings.Join(names, ".") + ": " + fe.Msg
	}
	return "Invalid input: " + strings.Join(parts, "; ")
}

// fieldError returns a ValidationError with a single problem.
func fieldError(msg, typ string, loc ...any) *ValidationError {
	return &ValidationError{Errors: []FieldError{{Loc: loc, Msg: msg, Type: typ}}}
}

// object reads the fields of one JSON object, collecting every problem
// instead of stopping at the first, so a client sees all of them at once.
type object struct {
	fields map[string]json.RawMessage
	loc    []any
	errs   *[]FieldError
	// names maps a field's name in the REST body to its name here, for
	// an MCP tool whose arguments name it differently (thread_id for
	// reply_to_thread_id); the readers use the REST names either way.
	// Nil: the same names.
	names map[string]string
}

// key is the name here of the field the REST body calls name.
func (o object) key(name string) string {
	if n, ok := o.names[name]; ok {
		return n
	}
	return name
}

// decodeBody parses a request body that must be a JSON object.
func decodeBody(r io.Reader) (object, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return object{}, ReadError(err)
	}
	if tooDeep(data, maxJSONDepth) {
		return object{}, fieldError(fmt.Sprintf("JSON nested deeper than %d levels", maxJSONDepth), "json_invalid", "body")
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&fields); err != nil || fields == nil {
		var errs []FieldError
		if len(bytes.TrimSpace(data)) == 0 {
			errs = []FieldError{{Loc: []any{"body"}, Msg: "Field required", Type: "missing"}}
		} else if _, isSyntax := err.(*json.SyntaxError); isSyntax || err == io.ErrUnexpectedEOF {
			errs = []FieldError{{Loc: []any{"body", 0}, Msg: "JSON decode error", Type: "json_invalid"}}
		} else {
			errs = []FieldError{{Loc: []any{"body"}, Msg: "Input should be a valid dictionary or object", Type: "model_attributes_type"}}
		}
		return object{}, &ValidationError{Errors: errs}
	}
	if errs := checkJSON(data); len(errs) > 0 {
		return object{}, &ValidationError{Errors: errs}
	}
	errs := []FieldError{}
	return object{fields: fields, loc: []any{"body"}, errs: &errs}, nil
}

// add records a problem at field: a key of this object, or a path below it
// ([]any{"to", 0}), which is spliced into the location as FastAPI writes it:
// ["body", "to", 0].
func (o object) add(field any, msg, typ string) {
	path, ok := field.([]any)
	if !ok {
		path = []any{field}
	}
	if name, ok := path[0].(string); ok {
		path = append([]any{o.key(name)}, path[1:]...)
	}
	o.report(o.at(path...), msg, typ)
}

// report records a problem at loc.
func (o object) report(loc []any, msg, typ string) {
	*o.errs = append(*o.errs, FieldError{Loc: loc, Msg: msg, Type: typ})
}

// at is the location of a field of this object: ["body", "to", 0].
func (o object) at(path ...any) []any {
	return append(append([]any{}, o.loc...), path...)
}

// err returns the collected problems, or nil.
func (o object) err() error {
	if len(*o.errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: *o.errs}
}

func (o object) present(name string) (json.RawMessage, bool) {
	raw, ok := o.fields[o.key(name)]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// forbidExtra reports every key not in allowed (REST names).
func (o object) forbidExtra(allowed ...string) {
	for k := range o.fields {
		if !slices.ContainsFunc(allowed, func(name string) bool { return o.key(name) == k }) {
			o.report(o.at(k), "Extra inputs are not permitted", "extra_forbidden")
		}
	}
}

// str reads a string field. A required field that is absent or null is
// reported; minLen/maxLen count characters (0 = no bound).
func (o object) str(name string, required bool, minLen, maxLen int) string {
	raw, ok := o.present(name)
	if !ok {
		if required {
			o.add(name, "Field required", "missing")
		}
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		o.add(name, "Input should be a valid string", "string_type")
		return ""
	}
	o.checkLen(name, s, minLen, maxLen)
	return s
}

func (o object) checkLen(field any, s string, minLen, maxLen int) {
	n := len([]rune(s))
	if minLen > 0 && n < minLen {
		o.add(field, fmt.Sprintf("String should have at least %d character%s", minLen, plural(minLen)), "string_too_short")
	}
	if maxLen > 0 && n > maxLen {
		o.add(field, fmt.Sprintf("String should have at most %d character%s", maxLen, plural(maxLen)), "string_too_long")
	}
}

// strItems reads a list of strings with at least minItems items, and each
// string's index in the JSON list, so that later problems point at the
// right item even when an earlier one was not a string.
func (o object) strItems(name string, required bool, minItems int) ([]string, []int) {
	raw, ok := o.present(name)
	if !ok {
		if required {
			o.add(name, "Field required", "missing")
		}
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		o.add(name, "Input should be a valid list", "list_type")
		return nil, nil
	}
	if len(items) < minItems {
		o.add(name, fmt.Sprintf("List should have at least %d item%s after validation, not %d", minItems, plural(minItems), len(items)), "too_short")
	}
	out, idx := make([]string, 0, len(items)), make([]int, 0, len(items))
	for i, item := range items {
		var s string
		if err := json.Unmarshal(item, &s); err != nil {
			o.add([]any{name, i}, "Input should be a valid string", "string_type")
			continue
		}
		out, idx = append(out, s), append(idx, i)
	}
	return out, idx
}

// addresses reads a list of email addresses, each parsed once into its
// canonical form; every address that does not parse is reported with why.
func (o object) addresses(name string, required bool, minItems int) []address.Address {
	raw, idx := o.strItems(name, required, minItems)
	if raw == nil {
		return nil
	}
	out := make([]address.Address, 0, len(raw))
	for j, s := range raw {
		i := idx[j]
		a, err := address.Parse(s)
		if err != nil {
			msg := "Invalid email address: " + s
			if pe := (*address.ParseError)(nil); errors.As(err, &pe) && !errors.Is(err, address.ErrSyntax) {
				msg += " (" + pe.Err.Error() + ")"
			}
			o.add([]any{name, i}, msg, "value_error")
			continue
		}
		out = append(out, a)
	}
	return out
}

// objects reads a list of JSON objects; each comes back as an object whose
// problems are reported under this one's location.
func (o object) objects(name string) []object {
	raw, ok := o.present(name)
	if !ok {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		o.add(name, "Input should be a valid list", "list_type")
		return nil
	}
	out := make([]object, 0, len(items))
	for i, item := range items {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(item, &fields); err != nil || fields == nil {
			o.add([]any{name, i}, "Input should be a valid dictionary or object", "model_attributes_type")
			continue
		}
		loc := o.at(o.key(name), i)
		out = append(out, object{fields: fields, loc: loc, errs: o.errs, names: o.names})
	}
	return out
}

// integer reads a non-negative integer field with a default.
func (o object) integer(name string, def, min, max int) int {
	raw, ok := o.present(name)
	if !ok {
		return def
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		o.add(name, "Input should be a valid integer", "int_type")
		return def
	}
	o.checkRange(name, n, min, max)
	return n
}

func (o object) checkRange(field string, n, min, max int) {
	if n < min {
		o.add(field, fmt.Sprintf("Input should be greater than or equal to %d", min), "greater_than_equal")
	}
	if n > max {
		o.add(field, fmt.Sprintf("Input should be less than or equal to %d", max), "less_than_equal")
	}
}

// queryInt parses an integer query parameter with a default and bounds.
func queryInt(value, name string, def, min, max int) (int, error) {
	if value == "" {
		return def, nil
	}
	n, err := strconv.Atoi(value)
	if err != nil {
		return 0, fieldError("Input should be a valid integer, unable to parse string as an integer", "int_parsing", "query", name)
	}
	if n < min {
		return 0, fieldError(fmt.Sprintf("Input should be greater than or equal to %d", min), "greater_than_equal", "query", name)
	}
	if n > max {
		return 0, fieldError(fmt.Sprintf("Input should be less than or equal to %d", max), "less_than_equal", "query", name)
	}
	return n, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// ReadError sorts a failure to read the body: the client's doing (it went
// away, or was too slow for the read timeout, or sent less than it
// announced) is a 4xx logged at INFO, not a 500 at ERROR.
func ReadError(err error) error {
	var he *echo.HTTPError
	var ne net.Error
	switch {
	case errors.As(err, &he):
		return err // the body limit's 413
	case errors.Is(err, errUploadTooSlow):
		return newError(http.StatusRequestTimeout, "request_timeout", fmt.Sprintf(
			"Request body arrived slower than %d KiB/s (after the first %s); it was cut off", minUploadRate>>10, uploadGrace))
	case errors.Is(err, context.Canceled):
		return newError(statusClientClosedRequest, "client_closed_request", "Client closed the request")
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return newError(http.StatusRequestTimeout, "request_timeout", "Request body not received in time")
	}
	return newError(http.StatusBadRequest, "incomplete_body", "Request body could not be read: "+err.Error())
}

// statusClientClosedRequest is nginx's code for a client that went away
// before the answer; it is only ever seen in the log.
const statusClientClosedRequest = 499
