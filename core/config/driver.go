package config

import (
	"fmt"
	"regexp"
	"strings"
)

// inferDriver is DB_DRIVER when it is not set: postgres when DATABASE_URL
// is a PostgreSQL URL (postgres://, postgresql://, postgresql+asyncpg://)
// or pgx's "host=... dbname=..." keywords, else sqlite. A PostgreSQL URL
// used to become the path of a SQLite file ("./postgres:/postgres@...")
// that `check` called fine.
func inferDriver(databaseURL string) string {
	if isPostgresDSN(databaseURL) {
		return "postgres"
	}
	return "sqlite"
}

// urlScheme matches the scheme of a URL: two characters or more, so that a
// Windows drive ("C:/data/nw.db") is a path.
var urlScheme = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]+)://`)

func isPostgresDSN(s string) bool {
	s = strings.TrimSpace(s)
	if m := urlScheme.FindStringSubmatch(s); m != nil {
		base, _, _ := strings.Cut(strings.ToLower(m[1]), "+")
		return base == "postgres" || base == "postgresql"
	}
	return isPostgresKeywords(s)
}

// isPostgresKeywords reports pgx's keyword form: every word key=value, one
// of them a connection keyword.
func isPostgresKeywords(s string) bool {
	words, known := strings.Fields(s), false
	for _, w := range words {
		k, _, ok := strings.Cut(w, "=")
		if !ok {
			return false
		}
		switch k {
		case "host", "hostaddr", "dbname", "user", "port", "password", "sslmode":
			known = true
		}
	}
	return known
}

// checkSQLitePath refuses, for DB_DRIVER=sqlite, a DATABASE_URL that is no
// file path: a PostgreSQL URL (the driver must say so) or any other URL but
// the sqlite:/// forms. The message never repeats the value.
func checkSQLitePath(s string) error {
	if isPostgresDSN(s) {
		return fmt.Errorf("is a PostgreSQL URL but DB_DRIVER=sqlite: set DB_DRIVER=postgres " +
			"(or leave DB_DRIVER unset: the driver is then taken from DATABASE_URL)")
	}
	if m := urlScheme.FindStringSubmatch(strings.TrimSpace(s)); m != nil && !strings.HasPrefix(strings.ToLower(m[1]), "sqlite") {
		return fmt.Errorf("scheme %q is not a SQLite file path or sqlite:///path", m[1])
	}
	return nil
}
