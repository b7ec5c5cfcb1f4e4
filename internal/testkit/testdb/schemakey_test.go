package testdb

import (
	"regexp"
	"testing"
)

// A template of a part of the schema (the store's, the throttle's) and
// the app's whole template name the same migrations, so a build of one
// keeps the others; a template of other migrations is left over.
func TestSchemaKeyNamesTheMigrationsOfEveryPart(t *testing.T) {
	t.Parallel()
	k := SchemaKey(t)
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(k) || SchemaKey(t) != k {
		t.Fatalf("SchemaKey = %q then %q, want one 16-digit hex key", k, SchemaKey(t))
	}
	app, store := templatePrefix+k, templatePrefix+"store_"+k
	if schemaOf(app) != k || schemaOf(store) != k {
		t.Errorf("schemaOf(%q) = %q, schemaOf(%q) = %q; want both %q", app, schemaOf(app), store, schemaOf(store), k)
	}
	if old := templatePrefix + "store_0123456789abcdef"; schemaOf(old) == k {
		t.Errorf("schemaOf(%q) = %q, want it told apart from %q", old, schemaOf(old), k)
	}
}
