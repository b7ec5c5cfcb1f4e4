package api

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Args are the arguments of an MCP tool call (api/mcp), read by the binder
// of the REST bodies, so that a tool validates exactly as its route does:
// the same rules, messages and codes, every problem at once, each located
// under "arguments". An Args is a view: its copies share the arguments and
// the problems found.
type Args struct{ obj object }

// DecodeArgs reads a tool's arguments as the REST API reads a body: one
// JSON object (absent or null: none), every problem at once, located
// under "arguments".
func DecodeArgs(raw json.RawMessage) (Args, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	obj, err := decodeBody(bytes.NewReader(raw))
	var ve *ValidationError
	if errors.As(err, &ve) {
		for i := range ve.Errors {
			if loc := ve.Errors[i].Loc; len(loc) > 0 && loc[0] == "body" {
				ve.Errors[i].Loc = append([]any{"arguments"}, loc[1:]...)
			}
		}
	}
	if err != nil {
		return Args{}, err
	}
	obj.loc = []any{"arguments"}
	return Args{obj}, nil
}

// Fields are the arguments by name, as sent (JSON). A tool may rewrite
// them before they are read: take one out, or give one under its REST
// name.
func (g Args) Fields() map[string]json.RawMessage { return g.obj.fields }

// Renamed is g where the field the REST body calls rest is read from the
// argument names[rest] (thread_id for reply_to_thread_id), and its
// problems are located there.
func (g Args) Renamed(names map[string]string) Args {
	g.obj.names = names
	return g
}

// Present is the argument name, unless it is absent or null.
func (g Args) Present(name string) (json.RawMessage, bool) { return g.obj.present(name) }

// String reads a string argument. A required one that is absent or null
// is a problem; minLen and maxLen count characters (0: no bound).
func (g Args) String(name string, required bool, minLen, maxLen int) string {
	return g.obj.str(name, required, minLen, maxLen)
}

// Int reads an integer argument in [min, max]; def when absent or null.
func (g Args) Int(name string, def, min, max int) int { return g.obj.integer(name, def, min, max) }

// Add records a problem at field: an argument's name, or a path below it
// ([]any{"to", 0}).
func (g Args) Add(field any, msg, typ string) { g.obj.add(field, msg, typ) }

// ForbidExtra records a problem for every argument not in allowed (REST
// names).
func (g Args) ForbidExtra(allowed ...string) { g.obj.forbidExtra(allowed...) }

// Err is the problems found so far, as one *ValidationError, or nil.
func (g Args) Err() error { return g.obj.err() }
