package config

import (
	"strings"
	"testing"
)

// With DB_DRIVER unset the driver follows DATABASE_URL: a PostgreSQL URL
// no longer becomes the name of a SQLite file that `check` calls fine.
func TestDriverFollowsDatabaseURL(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"", "sqlite"},
		{"./data/nw.db", "sqlite"},
		{"sqlite+aiosqlite:///data/nw.db", "sqlite"},
		{"C:/data/nw.db", "sqlite"},
		{"postgres://postgres@127.0.0.1:5432/nw", "postgres"},
		{"postgresql://u:p@db/nw?sslmode=disable", "postgres"},
		{"postgresql+asyncpg://u:p@db/nw", "postgres"},
		{"POSTGRES://db/nw", "postgres"},
		{"host=/var/run/postgresql dbname=nw", "postgres"},
	} {
		t.Run(tt.url, func(t *testing.T) {
			t.Setenv("DB_DRIVER", "")
			t.Setenv("DATABASE_URL", tt.url)
			c, err := Load("")
			if err != nil {
				t.Fatal(err)
			}
			if c.DBDriver != tt.want {
				t.Errorf("DB_DRIVER unset, DATABASE_URL=%q: driver %q, want %q", tt.url, c.DBDriver, tt.want)
			}
			c.EmailProvider, c.Environment, c.LogLevel = "demo", "development", "info"
			c.Port, c.SMTPPort, c.AttachmentMaxSizeMB, c.AttachmentMaxTotalSizeMB = 8000, 587, 25, 35
			if err := c.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

// DB_DRIVER=sqlite with a URL that is not a file is refused, saying which
// variable to set, and without repeating the URL.
func TestSQLiteDriverRefusesURLs(t *testing.T) {
	for _, url := range []string{"postgres://postgres:SECRET@127.0.0.1:5432/nw", "postgresql+asyncpg://u:SECRET@db/nw",
		"host=db password=SECRET dbname=nw", "mysql://u:SECRET@db/nw"} {
		c := valid() // DB_DRIVER=sqlite
		c.DatabaseURL = url
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("DB_DRIVER=sqlite DATABASE_URL=%s: Validate() = %v, want a DATABASE_URL error without the secret", url, err)
		}
		if strings.HasPrefix(url, "postgres") && !strings.Contains(err.Error(), "set DB_DRIVER=postgres") {
			t.Errorf("Validate() = %v, want it to say: set DB_DRIVER=postgres", err)
		}
	}
}
