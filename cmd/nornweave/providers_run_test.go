package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRunRefusesAHostedProviderWithoutCredentials: a server that would
// fail every send must not start; the error names what to set.
// Not parallel: sets the process's environment or working directory, which run reads.
func TestRunRefusesAHostedProviderWithoutCredentials(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"mailgun", map[string]string{"EMAIL_PROVIDER": "mailgun", "MAILGUN_API_KEY": "k"}, []string{"MAILGUN_DOMAIN"}},
		{"mailgun without anything", map[string]string{"EMAIL_PROVIDER": "mailgun"}, []string{"MAILGUN_API_KEY", "MAILGUN_DOMAIN"}},
		{"sendgrid", map[string]string{"EMAIL_PROVIDER": "sendgrid"}, []string{"SENDGRID_API_KEY"}},
		{"resend", map[string]string{"EMAIL_PROVIDER": "resend"}, []string{"RESEND_API_KEY"}},
		{"ses with half the keys", map[string]string{"EMAIL_PROVIDER": "ses", "AWS_ACCESS_KEY_ID": "AKID"},
			[]string{"AWS_SECRET_ACCESS_KEY"}},
		{"bad base URL", map[string]string{"EMAIL_PROVIDER": "sendgrid", "SENDGRID_API_KEY": "k",
			"SENDGRID_API_BASE": "api.eu.sendgrid.com"}, []string{"SENDGRID_API_BASE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			for _, k := range []string{"MAILGUN_API_KEY", "MAILGUN_DOMAIN", "SENDGRID_API_KEY", "RESEND_API_KEY",
				"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
				t.Setenv(k, "")
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{"serve"}, nil, &stdout, &stderr); code != 1 {
				t.Fatalf("exit code = %d, want 1; stderr: %s", code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr = %q, want it to name %s", stderr.String(), w)
				}
			}
		})
	}
}
