package config

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"https://api.mailgun.net", "https://api.mailgun.net"},
		{"http://u:SECRET@h/%zz", "http://xxxxx@h/%zz"},
		{"https://TOKEN@h", "https://xxxxx@h"},
		{"https://u:p@ss@h:8/x?y", "https://xxxxx@h:8/x?xxxxx"},
		{"https://h/path?key=SECRET#frag", "https://h/path?xxxxx#frag"},
		{"u:SECRET@h:4566", "xxxxx@h:4566"},
		{"redis://:SECRET@h:6379/0", "redis://xxxxx@h:6379/0"},
		{"http://h/a@b", "http://h/a@b"},
	} {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A configuration error names the variable, never the secret inside it,
// for every variable that holds a URL.
func TestConfigErrorsMaskURLSecrets(t *testing.T) {
	for _, tt := range []struct {
		variable string
		set      func(*Config, string)
		value    string
	}{
		{"MAILGUN_API_BASE", func(c *Config, v string) { c.MailgunAPIBase = v }, "http://u:SECRET@mg.example/%zz"},
		{"MAILGUN_API_BASE", func(c *Config, v string) { c.MailgunAPIBase = v }, "ftp://u:SECRET@mg.example"},
		{"RESEND_API_BASE", func(c *Config, v string) { c.ResendAPIBase = v }, "https://u:SECRET@"},
		{"SENDGRID_API_BASE", func(c *Config, v string) { c.SendgridAPIBase = v }, "sg.example?api_key=SECRET"},
		{"SES_ENDPOINT", func(c *Config, v string) { c.SESEndpoint = v }, "AKID:SECRET@localhost:4566"},
		{"REDIS_URL", func(c *Config, v string) { c.ThrottleBackend, c.RedisURL = "redis", v }, "redis2://:SECRET@h:6379/%zz"},
		{"DATABASE_URL", func(c *Config, v string) { c.DBDriver, c.DatabaseURL = "postgres", v }, "mysql://u:SECRET@db/x"},
		{"DATABASE_URL", func(c *Config, v string) { c.DBDriver, c.DatabaseURL = "postgres", v }, "postgres://u:SECRET@db/%zz"},
		{"ALLOWED_HOSTS", func(c *Config, v string) { c.AllowedHosts = v }, "https://u:SECRET@api.example"},
	} {
		c := valid()
		tt.set(&c, tt.value)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.variable) {
			t.Errorf("%s=%s: Validate() = %v, want an error naming %s", tt.variable, tt.value, err, tt.variable)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s=%s: Validate() = %q shows the secret", tt.variable, tt.value, err)
		}
	}
}
