package providers

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/internal/testkit/providertest"
)

// Quota reads GetAccount's three numbers, with a request signed for ses in
// the configured region with the configured key.
func TestSESQuota(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "ses")
	f.SetSESQuota(providertest.SESQuota{Max24HourSend: 200, MaxSendRate: 1, SentLast24Hours: 7.5})
	p := newProvider(t, "ses", f.URL, HTTPConfig{}).(*SES)
	got, err := p.Quota(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (SESQuota{MaxSendRate: 1, Max24HourSend: 200, SentLast24Hours: 7.5}); got != want {
		t.Errorf("Quota = %+v, want %+v", got, want)
	}
	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("fake received %d requests, want 1", len(reqs))
	}
	if r := reqs[0]; r.Method != "GET" || r.Path != "/v2/email/account" {
		t.Errorf("request %s %s, want GET /v2/email/account", r.Method, r.Path)
	}
	auth := reqs[0].Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+testAWSKeyID+"/") ||
		!strings.Contains(auth, "/eu-west-1/ses/aws4_request") {
		t.Errorf("Authorization = %q, want a SigV4 signature with %s for ses in eu-west-1", auth, testAWSKeyID)
	}
}

// The fake refuses what is not signed, so TestSESQuota's success means
// the request was.
func TestSESFakeRefusesAnUnsignedAccountRead(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "ses")
	res, err := http.Get(f.URL + "/v2/email/account")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("unsigned GetAccount: status %d, want 403", res.StatusCode)
	}
}

// A refusal is an error naming ses and carrying SES's answer, never a
// zero quota (which limits read as unlimited).
func TestSESQuotaErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		code   string // X-Amzn-ErrorType
		msg    string
	}{
		{"access denied", 403, "AccessDeniedException", "User is not authorized to perform ses:GetAccount"},
		{"throttled", 429, "TooManyRequestsException", "Too many requests"},
		{"throttling code", 400, "Throttling", "Rate exceeded"},
		{"unavailable", 503, "ServiceUnavailable", "Service unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := providertest.Start(t, "ses")
			f.Respond(f.Reject(tt.status, tt.msg, "X-Amzn-ErrorType", tt.code))
			p := newProvider(t, "ses", f.URL, HTTPConfig{}).(*SES)
			got, err := p.Quota(context.Background())
			if err == nil {
				t.Fatalf("Quota = %+v, nil error; want an error", got)
			}
			if got != (SESQuota{}) {
				t.Errorf("Quota with an error = %+v, want the zero value", got)
			}
			if !strings.HasPrefix(err.Error(), "ses: ") || !strings.Contains(err.Error(), tt.code) ||
				!strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q, want it to start with ses: and carry %s: %s", err, tt.code, tt.msg)
			}
		})
	}
}

func TestSESQuotaAfterClose(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "ses")
	p := newProvider(t, "ses", f.URL, HTTPConfig{}).(*SES)
	p.Close()
	if _, err := p.Quota(context.Background()); !errors.Is(err, ErrProviderClosed) {
		t.Errorf("Quota after Close: error %v, want ErrProviderClosed", err)
	}
	if n := f.Count(); n != 0 {
		t.Errorf("fake received %d requests after Close, want 0", n)
	}
}
