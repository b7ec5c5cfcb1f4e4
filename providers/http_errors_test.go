package providers

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestClassifyByStatusAndWrite is the rule for a server error: only a 429
// or a 503 says "not accepted"; any other 5xx to a request that was
// written may have come after the provider took it.
func TestClassifyByStatusAndWrite(t *testing.T) {
	t.Parallel()
	b, err := newHTTPBase("test", "TEST_KEY", HTTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	tests := []struct {
		status int
		wrote  bool
		want   outcome
	}{
		{429, true, temporary},
		{503, true, temporary},
		{500, true, unknown},
		{502, true, unknown},
		{504, true, unknown},
		{507, true, unknown},
		// Answered before the whole request was written: the provider
		// cannot have taken a message it did not read to the end.
		{500, false, temporary},
		{504, false, temporary},
		{400, true, permanent},
		{0, false, temporary},
		{0, true, unknown},
	}
	for _, tt := range tests {
		a := &attempt{status: tt.status, header: http.Header{}}
		a.requests.Store(1)
		a.wrote.Store(tt.wrote)
		se := b.classify(a, errors.New("failed"), "detail")
		if got := outcomeOf(se); got != tt.want {
			t.Errorf("status %d, written %v: got %s (%q), want %s", tt.status, tt.wrote, got, se, tt.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"30", 30 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{"Thu, 01 Jan 2026 12:02:00 GMT", 2 * time.Minute},
		{"Thu, 01 Jan 2026 11:00:00 GMT", 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
