package server

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// routeRowRE matches one row of the route table in docs/api.md:
// | `METHOD` | `/path` | needs | success |
var routeRowRE = regexp.MustCompile("^\\| `([A-Z]+)` \\| `(/[^`]*)` \\|")

// TestDocsListEveryRoute keeps docs/api.md true: its route table names
// exactly the routes the server serves, no more (a documented route that
// does not exist is a defect too) and no fewer.
func TestDocsListEveryRoute(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatalf("reading docs/api.md: %v", err)
	}
	var documented []string
	for _, line := range regexp.MustCompile(`\r?\n`).Split(string(data), -1) {
		if m := routeRowRE.FindStringSubmatch(line); m != nil {
			documented = append(documented, m[1]+" "+m[2])
		}
	}
	// Method values on a nil *api.API are never called here; the table
	// is only read for its methods and paths.
	var served []string
	for _, rt := range Routes(nil, &Health{}) {
		served = append(served, rt.Method+" "+rt.Path)
	}
	slices.Sort(documented)
	slices.Sort(served)
	if len(documented) == 0 {
		t.Fatal("docs/api.md: found no route rows of the form | `METHOD` | `/path` |")
	}
	if diff := cmp.Diff(served, documented); diff != "" {
		t.Errorf("docs/api.md route table and internal/server/routes.go disagree (-served +documented):\n%s", diff)
	}
}
