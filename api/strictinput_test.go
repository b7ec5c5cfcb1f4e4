package api

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseRFC3339(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // UTC, or "" for refused
	}{
		{"2026-01-02T10:00:00Z", "2026-01-02T10:00:00Z"},
		{"2026-01-02t10:00:00z", "2026-01-02T10:00:00Z"},
		{"2026-01-02T10:00:00.25+05:30", "2026-01-02T04:30:00.25Z"},
		{"2026-01-02T10:00:00-23:59", "2026-01-03T09:59:00Z"},
		{"2026-01-02T10:00:00+24:00", ""},
		{"2026-01-02T10:00:00+00:60", ""},
		{"2026-01-02T10:00:00,5Z", ""},
		{"2026-01-02T10:00:00.Z", ""},
		{"2026-01-02T10:00:00+0100", ""},
		{"2026-01-02 10:00:00Z", ""},
		{"2026-01-02T10:00:00", ""},
		{"2026-02-30T10:00:00Z", ""},
		{"2026-01-02T24:00:00Z", ""},
		{"2026-01-02T10:00:60Z", ""},
		{"+2026-01-02T10:00:00Z", ""},
	} {
		got, err := parseRFC3339(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("parseRFC3339(%q) = %v, want refused", tc.in, got)
		case tc.want != "" && err != nil:
			t.Errorf("parseRFC3339(%q): %v, want %s", tc.in, err, tc.want)
		case tc.want != "" && got.UTC().Format(time.RFC3339Nano) != tc.want:
			t.Errorf("parseRFC3339(%q) = %s, want %s", tc.in, got.UTC().Format(time.RFC3339Nano), tc.want)
		}
	}
}

func TestCheckRawQuery(t *testing.T) {
	for _, tc := range []struct{ raw, param string }{
		{"inbox_id=a&q=x", ""},
		{"", ""},
		{"a=1&&b=2", ""},
		{"inbox_id=a&q=x;", "q"},
		{"inbox_id=a&status=%", "status"},
		{"q%zz=1", "q%zz"},
		{"a=1;b=2", "a"},
	} {
		err := checkRawQuery(tc.raw)
		var ve *ValidationError
		switch {
		case tc.param == "" && err != nil:
			t.Errorf("?%s: %v, want accepted", tc.raw, err)
		case tc.param != "" && !errors.As(err, &ve):
			t.Errorf("?%s: %v, want a validation error", tc.raw, err)
		case tc.param != "" && !strings.Contains(ve.Sentence(), tc.param):
			t.Errorf("?%s: %q, want it to name %q", tc.raw, ve.Sentence(), tc.param)
		}
	}
}

func TestMethodLabelIsClosed(t *testing.T) {
	for in, want := range map[string]string{"GET": "GET", "DELETE": "DELETE", "OPTIONS": "OPTIONS", "get": "other",
		"PUT": "other", "PROPFIND": "other", strings.Repeat("X", 30<<10): "other"} {
		if got := methodLabel(in); got != want {
			t.Errorf("methodLabel(%.20q) = %q, want %q", in, got, want)
		}
	}
	if got := clip(strings.Repeat("a", 10000)); len(got) > maxLoggedField+len("...(cut)") {
		t.Errorf("clip kept %d bytes", len(got))
	}
}
