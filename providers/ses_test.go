package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/internal/testkit/providertest"
)

func TestSESRequest(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "ses")
	p := newProvider(t, "ses", f.URL, HTTPConfig{})
	id, err := p.Send(context.Background(), fullMessage())
	if err != nil || id != f.ID(1) {
		t.Fatalf("Send = %q, %v; want %q", id, err, f.ID(1))
	}
	r := f.Requests()[0]
	if r.Method != "POST" || r.Path != "/v2/email/outbound-emails" {
		t.Errorf("request %s %s, want POST /v2/email/outbound-emails", r.Method, r.Path)
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+testAWSKeyID+"/") ||
		!strings.Contains(auth, "/eu-west-1/ses/aws4_request") || !strings.Contains(auth, "Signature=") {
		t.Errorf("Authorization = %q, want a SigV4 signature for ses in eu-west-1", auth)
	}
	if r.Header.Get("X-Amz-Date") == "" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Errorf("headers %v, want X-Amz-Date and a JSON body", r.Header)
	}
	// The SDK announces its retry budget: one attempt, no retryer.
	if got := r.Header.Get("Amz-Sdk-Request"); got != "attempt=1; max=1" {
		t.Errorf("amz-sdk-request = %q, want attempt=1; max=1", got)
	}
	var body struct {
		FromEmailAddress string
		Destination      map[string][]string
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.FromEmailAddress != "support@acme.test" {
		t.Errorf("FromEmailAddress = %q", body.FromEmailAddress)
	}
	for field, want := range map[string][]string{"ToAddresses": {"ann@customer.test"},
		"CcAddresses": {"cc@customer.test"}, "BccAddresses": {"audit@acme.test"}} {
		if got := body.Destination[field]; !slices.Equal(got, want) {
			t.Errorf("Destination.%s = %v, want %v", field, got, want)
		}
	}
	checkMIME(t, f.Message(t, 0))
}

func TestSESThrottlingIsTemporaryWhateverTheStatus(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "ses")
	f.Respond(f.Reject(400, "Maximum sending rate exceeded.", "X-Amzn-ErrorType", "Throttling"))
	p := newProvider(t, "ses", f.URL, HTTPConfig{})
	_, err := p.Send(context.Background(), fullMessage())
	se := mustSendError(t, err)
	if !se.Temporary || se.Unknown || !strings.Contains(se.Error(), "Maximum sending rate exceeded") {
		t.Errorf("got %+v (%q), want temporary", se, se)
	}
}

// Not parallel: sets the process's environment (AWS credentials).
func TestSESDefaultCredentialChain(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENVIRONMENT")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	f := providertest.Start(t, "ses")
	p, err := NewSES(context.Background(), SESConfig{Endpoint: f.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(context.Background(), fullMessage()); err != nil {
		t.Fatal(err)
	}
	auth := f.Requests()[0].Header.Get("Authorization")
	if !strings.Contains(auth, "Credential=AKIDFROMENVIRONMENT/") || !strings.Contains(auth, "/us-east-1/ses/") {
		t.Errorf("Authorization = %q, want the chain's key in the default region", auth)
	}
}

func TestSESRefusesHalfTheKeys(t *testing.T) {
	t.Parallel()
	if _, err := NewSES(context.Background(), SESConfig{AccessKeyID: "AKID"}); err == nil {
		t.Error("NewSES with a key id and no secret = nil error")
	}
}

// TestSESCannotKeepOurMessageID records a limit of SES, not of this code:
// SES replaces the Message-ID header of a raw message with its own (AWS,
// "Amazon SES header fields"). We hand ours over in the MIME; the id that
// comes back, and that recipients see, is SES's.
func TestSESCannotKeepOurMessageID(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "ses")
	p := newProvider(t, "ses", f.URL, HTTPConfig{})
	m := fullMessage()
	id, err := p.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Message(t, 0).Headers["Message-Id"]; got != m.MessageID {
		t.Errorf("Message-ID handed to SES = %q, want ours %q", got, m.MessageID)
	}
	if id == m.MessageID || id != f.ID(1) {
		t.Errorf("provider id = %q, want SES's MessageId %q, not ours", id, f.ID(1))
	}
}

// Not parallel: sets the process's environment (AWS credentials).
func TestSESLogsWhichCredentials(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	for _, tt := range []struct {
		name, keyID, secret, want string
	}{
		{"explicit", testAWSKeyID, testAWSSecret, "aws_credentials=AWS_ACCESS_KEY_ID"},
		{"chain", "", "", `aws_credentials="default credential chain"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			p, err := NewSES(context.Background(), SESConfig{AccessKeyID: tt.keyID, SecretAccessKey: tt.secret,
				HTTPConfig: HTTPConfig{Logger: slog.New(slog.NewTextHandler(&log, nil))}})
			if err != nil {
				t.Fatal(err)
			}
			p.Close()
			if !strings.Contains(log.String(), tt.want) {
				t.Errorf("start-up log %q, want %s", log.String(), tt.want)
			}
			if strings.Contains(log.String(), testAWSSecret) || strings.Contains(log.String(), testAWSKeyID) {
				t.Errorf("start-up log leaks a key: %s", log.String())
			}
		})
	}
}
