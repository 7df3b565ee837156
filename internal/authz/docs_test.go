package authz

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// permRowRE matches one row of the permission table in
// docs/authorization.md: | `kind` | action, action, ... |
var permRowRE = regexp.MustCompile("^\\| `([a-z_]+)` \\| ([a-z_, ]+) \\|$")

// TestDocsListEveryPermission keeps docs/authorization.md in step with
// Table: every resource kind with exactly its grantable actions, and the
// action list in the prose names every action that appears in the table.
func TestDocsListEveryPermission(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "authorization.md"))
	if err != nil {
		t.Fatalf("reading docs/authorization.md: %v", err)
	}
	documented := map[string][]string{}
	var actionsLine string
	for _, line := range strings.Split(string(data), "\n") {
		if m := permRowRE.FindStringSubmatch(line); m != nil {
			var actions []string
			for _, a := range strings.Split(m[2], ",") {
				actions = append(actions, strings.TrimSpace(a))
			}
			slices.Sort(actions)
			documented[m[1]] = actions
		}
		if strings.HasPrefix(line, "Actions: ") {
			actionsLine = line
		}
	}
	want := map[string][]string{}
	every := map[string]bool{}
	for kind, actions := range Table {
		var names []string
		for _, a := range actions {
			names = append(names, string(a))
			every[string(a)] = true
		}
		slices.Sort(names)
		want[string(kind)] = names
	}
	if diff := cmp.Diff(want, documented); diff != "" {
		t.Errorf("docs/authorization.md permission table and authz.Table disagree (-Table +docs):\n%s", diff)
	}
	if actionsLine == "" {
		t.Fatal(`docs/authorization.md: no "Actions: " line`)
	}
	for a := range every {
		if !strings.Contains(actionsLine, "`"+a+"`") {
			t.Errorf("docs/authorization.md: the Actions line does not name %q", a)
		}
	}
}
