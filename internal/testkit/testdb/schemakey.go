package testdb

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

var (
	keyOnce sync.Once
	key     string
	keyErr  error
)

// SchemaKey names the schemas a template database may hold: a hash of the
// SQL this module applies (the app's migrations and the PostgreSQL
// throttle's schema, read from the module's source) and of River's
// version, whose migrations the app also applies. A change to any of them
// makes new templates. A caller whose template holds part of that schema
// (the store's alone, the throttle's alone) names it in front: the key
// passed to PostgresMigratedURL is "part_" + SchemaKey, so that each key
// ends with the schema's hash, which is how a template build knows which
// templates are left over from other migrations.
func SchemaKey(tb testing.TB) string {
	tb.Helper()
	keyOnce.Do(func() { key, keyErr = computeSchemaKey() })
	if keyErr != nil {
		tb.Fatalf("schema key for the template databases: %v", keyErr)
	}
	return key
}

func computeSchemaKey() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("no source path for testdb")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	h := sha256.New()
	var paths []string
	for _, glob := range []string{"migrations/*/*.sql", "skuld/throttle/pgthrottle/*.sql"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			return "", err
		}
		paths = append(paths, m...)
	}
	if len(paths) == 0 {
		return "", fmt.Errorf("no migrations found under %s", root)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(strings.TrimPrefix(p, root)), len(b))
		h.Write(b)
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("no build information for River's version")
	}
	for _, d := range info.Deps {
		if strings.HasPrefix(d.Path, "github.com/riverqueue/river") {
			fmt.Fprintf(h, "%s %s\n", d.Path, d.Version)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// schemaOf is the part of a template's key (or name) that names its
// schema: what follows its last "_".
func schemaOf(key string) string { return key[strings.LastIndexByte(key, '_')+1:] }
