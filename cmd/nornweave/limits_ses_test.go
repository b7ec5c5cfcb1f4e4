package main

import (
	"os"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/internal/testkit/providertest"
)

// sesEnv points the SES client at the fake with explicit keys.
func sesEnv(f *providertest.Fake) map[string]string {
	return map[string]string{"SES_ENDPOINT": f.URL, "AWS_ACCESS_KEY_ID": "AKIDLIMITSTEST",
		"AWS_SECRET_ACCESS_KEY": "limits-secret", "AWS_REGION": "us-east-1"}
}

// limits from-ses prints lines for an env file from SES's GetAccount,
// read with the configured key and region, and opens no database.
// Not parallel: sets the process's environment or working directory, which run reads.
func TestLimitsFromSES(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		region string
		quota  providertest.SESQuota
		want   string
	}{
		{"documented example", []string{"limits", "from-ses", "--margin", "0.9"}, "us-east-1", providertest.DefaultSESQuota,
			"# from SES GetAccount (region us-east-1): MaxSendRate 14/s, Max24HourSend 50000, SentLast24Hours 120; margin 0.9\n" +
				"THROTTLE_UNIT=recipient\nGLOBAL_SEND_RATE_LIMIT_PER_SECOND=12\nGLOBAL_SEND_RATE_LIMIT_PER_DAY=45000\n"},
		{"default margin, another region", []string{"limits", "from-ses"}, "eu-west-1", providertest.DefaultSESQuota,
			"# from SES GetAccount (region eu-west-1): MaxSendRate 14/s, Max24HourSend 50000, SentLast24Hours 120; margin 0.9\n" +
				"THROTTLE_UNIT=recipient\nGLOBAL_SEND_RATE_LIMIT_PER_SECOND=12\nGLOBAL_SEND_RATE_LIMIT_PER_DAY=45000\n"},
		{"margin before the command", []string{"--margin=1", "limits", "from-ses"}, "us-east-1",
			providertest.SESQuota{MaxSendRate: 1, Max24HourSend: 1000000, SentLast24Hours: 0},
			"# from SES GetAccount (region us-east-1): MaxSendRate 1/s, Max24HourSend 1000000, SentLast24Hours 0; margin 1\n" +
				"THROTTLE_UNIT=recipient\nGLOBAL_SEND_RATE_LIMIT_PER_SECOND=1\nGLOBAL_SEND_RATE_LIMIT_PER_DAY=1000000\n"},
		{"no 24-hour quota", []string{"limits", "from-ses", "--margin", "0.5"}, "us-east-1",
			providertest.SESQuota{MaxSendRate: 1, Max24HourSend: -1, SentLast24Hours: 3},
			"# from SES GetAccount (region us-east-1): MaxSendRate 1/s, Max24HourSend -1, SentLast24Hours 3; margin 0.5\n" +
				"THROTTLE_UNIT=recipient\nGLOBAL_SEND_RATE_LIMIT_PER_SECOND=1\n" +
				"# SES reports no 24-hour quota (Max24HourSend -1): 0 is unlimited\nGLOBAL_SEND_RATE_LIMIT_PER_DAY=0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := providertest.Start(t, "ses")
			f.SetSESQuota(tt.quota)
			env := sesEnv(f)
			env["AWS_REGION"] = tt.region
			code, stdout, stderr := runIn(t, env, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d, want 0; stderr: %s", code, stderr)
			}
			if stdout != tt.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tt.want)
			}
			reqs := f.Requests()
			if len(reqs) != 1 || reqs[0].Method != "GET" || reqs[0].Path != "/v2/email/account" {
				t.Fatalf("fake received %v, want one GET /v2/email/account", reqs)
			}
			if auth := reqs[0].Header.Get("Authorization"); !strings.Contains(auth, "Credential=AKIDLIMITSTEST/") ||
				!strings.Contains(auth, "/"+tt.region+"/ses/aws4_request") {
				t.Errorf("Authorization = %q, want the configured key and %s", auth, tt.region)
			}
			// The working directory is where the default SQLite database
			// would be created.
			if entries, _ := os.ReadDir("."); len(entries) != 0 {
				t.Errorf("from-ses left %v in its working directory, want nothing: no database opened", entries)
			}
			if strings.Contains(stdout+stderr, "limits-secret") {
				t.Error("the secret key reached the output")
			}
		})
	}
}

// A margin outside (0, 1], or a flag elsewhere, is a usage error (exit 2)
// naming --margin, before anything is asked of SES.
// Not parallel: sets the process's environment or working directory, which run reads.
func TestLimitsFromSESUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"above 1", []string{"limits", "from-ses", "--margin", "1.5"}, `--margin: want a number more than 0 and at most 1 (the share of SES's quota to use), got "1.5"`},
		{"zero", []string{"limits", "from-ses", "--margin=0"}, `--margin: want a number more than 0 and at most 1`},
		{"negative", []string{"limits", "from-ses", "--margin=-0.9"}, `--margin: want a number more than 0 and at most 1`},
		{"not a number", []string{"limits", "from-ses", "--margin", "most"}, `--margin: want a number more than 0 and at most 1 (the share of SES's quota to use), got "most"`},
		{"no value", []string{"limits", "from-ses", "--margin"}, "flag --margin needs a value"},
		{"stray argument", []string{"limits", "from-ses", "now"}, "usage: nornweave limits from-ses [--margin 0.9]"},
		{"margin of another command", []string{"serve", "--margin", "0.9"}, "--margin is a flag of limits from-ses, not of serve"},
		{"margin of limits set", []string{"limits", "set", "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=5", "--margin=0.9"}, "--margin is a flag of limits from-ses, not of limits set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := providertest.Start(t, "ses")
			code, stdout, stderr := runIn(t, sesEnv(f), tt.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, tt.want)
			}
			if stdout != "" || f.Count() != 0 {
				t.Errorf("a usage error printed %q and made %d requests to SES, want nothing", stdout, f.Count())
			}
		})
	}
}

// A read SES refuses is exit 1 with SES's answer, and no lines to paste.
// Not parallel: sets the process's environment or working directory, which run reads.
func TestLimitsFromSESReadFails(t *testing.T) {
	f := providertest.Start(t, "ses")
	f.Respond(f.Reject(403, "User is not authorized to perform ses:GetAccount", "X-Amzn-ErrorType", "AccessDeniedException"))
	code, stdout, stderr := runIn(t, sesEnv(f), "limits", "from-ses")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr: %s", code, stderr)
	}
	if want := "nornweave limits from-ses: ses: read the send quota"; !strings.Contains(stderr, want) ||
		!strings.Contains(stderr, "AccessDeniedException") {
		t.Errorf("stderr = %q, want %q and SES's error code", stderr, want)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing to paste", stdout)
	}
}
