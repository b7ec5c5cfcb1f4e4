package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// module is the import path every package of ours starts with.
const module = "github.com/nornweave/nornweave/"

// floors says, for a package prefix of ours, which of ours its non-test
// code may import: data flows one way (api → skuld → providers and store →
// core), so no package imports one on a higher floor. The longest matching
// prefix decides.
var floors = map[string][]string{
	"core/":          {"core/"},
	"migrations":     {},
	"store":          {"core/", "migrations"},
	"providers":      {"core/", "providers"}, // bounce reads DSNs into webhook's event model
	"skuld/render":   {},
	"skuld/filter":   {"core/"},
	"skuld/throttle": {"core/", "skuld/throttle"},
	"skuld":          {"core/", "migrations", "store", "providers", "skuld"},
	"api":            {"core/", "migrations", "store", "providers", "skuld", "api"},
	"internal/app":   {"core/", "migrations", "store", "providers", "skuld", "api", "internal/app", "internal/metrics", "internal/mcpstdio"},
}

// never lists what a package must not import though a floor allows it:
// the send pipeline knows nothing of held mail, which is built on it.
var never = map[string][]string{
	"skuld": {"skuld/hold"},
}

// Issue 28: the layout says what depends on what, and nothing ships that
// only tests use. Read from the packages' own imports (go list), not from
// a list kept by hand beside them.
func TestPackagesImportOnlyLowerFloors(t *testing.T) {
	t.Parallel()
	list := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../...")
	list.Env = append(os.Environ(), "GOFLAGS=") // GOFLAGS=-json make test would refuse -f
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			checked++
			if strings.HasPrefix(imp, "internal/testkit/") && !strings.HasPrefix(pkg, "internal/testkit/") {
				t.Errorf("%s imports %s: test support in code that ships", pkg, imp)
			}
			for _, n := range never[pkg] {
				if imp == n {
					t.Errorf("%s imports %s, which is built on it", pkg, imp)
				}
			}
			allowed, ok := floorOf(pkg)
			if !ok {
				continue // cmd/, internal/: the top floors
			}
			if !under(imp, allowed) {
				t.Errorf("%s imports %s, on a higher floor (it may import %v)", pkg, imp, allowed)
			}
		}
	}
	if checked == 0 {
		t.Fatal("go list showed no import between our packages")
	}
}

// floorOf is what pkg may import, by the longest prefix of floors it has.
func floorOf(pkg string) ([]string, bool) {
	best, found := "", false
	for prefix := range floors {
		if (pkg == prefix || strings.HasPrefix(pkg, strings.TrimSuffix(prefix, "/")+"/")) && len(prefix) >= len(best) {
			best, found = prefix, true
		}
	}
	return floors[best], found
}

func under(imp string, prefixes []string) bool {
	for _, p := range prefixes {
		if imp == strings.TrimSuffix(p, "/") || strings.HasPrefix(imp, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}
