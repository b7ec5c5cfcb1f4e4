package app

import "testing"

// Go binds HOST=0.0.0.0 dual-stack and reports "[::]"; the start-up line
// says what the operator configured, with the port actually bound.
func TestListenAddr(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ host, bound, want string }{
		{"0.0.0.0", "[::]:8000", "0.0.0.0:8000"},
		{"::", "[::]:8000", "[::]:8000"},
		{"", "[::]:8000", "[::]:8000"},
		{"127.0.0.1", "127.0.0.1:41234", "127.0.0.1:41234"},
		{"localhost", "127.0.0.1:8000", "127.0.0.1:8000"},
		{"0.0.0.0", "0.0.0.0:8000", "0.0.0.0:8000"},
	} {
		if got := ListenAddr(tt.host, tt.bound); got != tt.want {
			t.Errorf("ListenAddr(%q, %q) = %q, want %q", tt.host, tt.bound, got, tt.want)
		}
	}
}

func TestMaskURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://:hunter2@redis:6379/1", "redis://…@redis:6379/1"},
		{"rediss://user:pw@cache.example:6380", "rediss://…@cache.example:6380"},
		{"unix:///run/redis.sock", "unix:///run/redis.sock"},
		{"https://gw.example/mailgun?token=abc", "https://gw.example/mailgun?…"},
		{"https://api.eu.mailgun.net", "https://api.eu.mailgun.net"},
		{"%zz", "(not a URL)"},
	} {
		if got := MaskURL(tt.in); got != tt.want {
			t.Errorf("MaskURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
