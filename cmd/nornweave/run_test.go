package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Not parallel: sets the process's environment or working directory, which run reads.
func TestRunCommands(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stdout string
		stderr string
	}{
		{"version", []string{"version"}, nil, 0, "nornweave dev", ""},
		{"help", []string{"--help"}, nil, 0, "Usage: nornweave", ""},
		{"unknown command", []string{"launch"}, nil, 2, "", `unknown command "launch"`},
		{"bad throttle", []string{"serve"}, map[string]string{"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE": "-1"}, 1, "",
			"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE"},
		{"bad blocklist", []string{"migrate"}, map[string]string{"OUTBOUND_DOMAIN_BLOCKLIST": "("}, 1, "",
			`OUTBOUND_DOMAIN_BLOCKLIST: invalid pattern "("`},
		{"production with demo", nil, map[string]string{"ENVIRONMENT": "production", "API_KEY": "k"}, 1, "",
			"EMAIL_PROVIDER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir()) // no stray .env, and any database lands in the temp dir
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, nil, &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit code = %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tt.stdout)
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.stderr)
			}
		})
	}
}

// Not parallel: sets the process's environment or working directory, which run reads.
func TestRunMigrateOnTheEmbeddedDefault(t *testing.T) {
	t.Chdir(t.TempDir())
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"migrate"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("migrate exit code = %d; stderr: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "migrations applied") {
		t.Errorf("stderr = %q, want the migrations logged", stderr.String())
	}
}
