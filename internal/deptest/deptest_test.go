package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/openclaw/occ"

// rule is one row of the table: packages matching From must not depend,
// directly or transitively, on any package matching an entry of Not.
type rule struct {
	From string
	Not  []string
}

var (
	rowRE  = regexp.MustCompile("^\\| `([^`]+)` \\| (.+) \\|$")
	cellRE = regexp.MustCompile("`([^`]+)`")
)

// readRules parses the dependency table of docs/architecture.md.
func readRules(t *testing.T) []rule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatalf("reading docs/architecture.md: %v", err)
	}
	_, table, ok := strings.Cut(string(data), "| Package | Must not depend on |")
	if !ok {
		t.Fatal(`docs/architecture.md: no table headed "| Package | Must not depend on |"`)
	}
	var rules []rule
	for _, line := range strings.Split(table, "\n")[2:] {
		m := rowRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			break // the table ends at the first line that is not a row
		}
		r := rule{From: m[1]}
		for _, c := range cellRE.FindAllStringSubmatch(m[2], -1) {
			r.Not = append(r.Not, c[1])
		}
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		t.Fatal("docs/architecture.md: the dependency table has no rows")
	}
	return rules
}

// ownRoots are the module's top-level directories: internal/, cmd/ and the
// public packages.
var ownRoots = []string{"internal", "cmd", "apitypes", "client"}

// importPath turns a table entry into a full import path pattern: paths
// under one of ownRoots are this module's, anything else is as written.
func importPath(p string) string {
	root, _, _ := strings.Cut(p, "/")
	if slices.Contains(ownRoots, root) {
		return module + "/" + p
	}
	return p
}

// match reports whether path matches pattern ("x/..." is x and below).
func match(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

type pkg struct {
	ImportPath string
	Deps       []string
}

// listPackages returns every package of the module with its transitive
// non-test dependencies.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps", module+"/...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// violations lists "from -> dep" for every dependency a rule forbids.
func violations(rules []rule, pkgs []pkg) []string {
	var out []string
	for _, r := range rules {
		from := importPath(r.From)
		for _, p := range pkgs {
			if !match(from, p.ImportPath) {
				continue
			}
			for _, dep := range p.Deps {
				for _, not := range r.Not {
					if dep != p.ImportPath && match(importPath(not), dep) {
						out = append(out, p.ImportPath+" -> "+dep+" (rule: "+r.From+" must not depend on "+not+")")
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestDependencyRule(t *testing.T) {
	rules := readRules(t)
	pkgs := listPackages(t)
	// Every row must name packages that exist, or a renamed package would
	// silently escape its rule.
	for _, r := range rules {
		from := importPath(r.From)
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return match(from, p.ImportPath) }) {
			t.Errorf("docs/architecture.md: the rule for %s matches no package of the module", r.From)
		}
	}
	for _, v := range violations(rules, pkgs) {
		t.Error(v)
	}
}

// TestViolationsDetects proves the checker can fail: a synthetic graph
// that breaks each kind of rule is reported, one that keeps it is not.
func TestViolationsDetects(t *testing.T) {
	rules := []rule{
		{From: "internal/store", Not: []string{"net/http"}},
		{From: "internal/compute/...", Not: []string{"internal/store"}},
		{From: "internal/errkind", Not: []string{"internal/..."}},
	}
	pkgs := []pkg{
		{ImportPath: module + "/internal/store", Deps: []string{"context", "net/http"}},
		{ImportPath: module + "/internal/compute/kube", Deps: []string{module + "/internal/store"}},
		{ImportPath: module + "/internal/compute", Deps: []string{module + "/internal/storex"}},
		{ImportPath: module + "/internal/errkind", Deps: []string{"errors", "internal/bytealg"}},
		{ImportPath: module + "/internal/worker", Deps: []string{module + "/internal/store", "net/http"}},
	}
	got := violations(rules, pkgs)
	want := []string{
		module + "/internal/compute/kube -> " + module + "/internal/store (rule: internal/compute/... must not depend on internal/store)",
		module + "/internal/store -> net/http (rule: internal/store must not depend on net/http)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n got %q\nwant %q", got, want)
	}
}

// TestPackageMapListsEveryPackage: the package map of docs/architecture.md
// has one row for every package of the module (a package under another
// listed one, such as a driver's subpackage, may be described in its
// parent's row only if the parent's row names it), and no row for a
// package that does not exist.
func TestPackageMapListsEveryPackage(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "| Package | Owns |")
	if !ok {
		t.Fatal(`docs/architecture.md: no table headed "| Package | Owns |"`)
	}
	rows := map[string]string{} // package -> its row's text
	for _, line := range strings.Split(table, "\n")[2:] {
		m := rowRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			break
		}
		rows[importPath(m[1])] = m[2]
	}
	pkgs := listPackages(t)
	have := map[string]bool{}
	for _, p := range pkgs {
		have[p.ImportPath] = true
	}
	for path := range rows {
		if !have[path] {
			t.Errorf("docs/architecture.md: the package map lists %s, which does not exist", path)
		}
	}
	for _, p := range pkgs {
		if _, ok := rows[p.ImportPath]; ok {
			continue
		}
		// A package described in its parent's row, by its path relative
		// to the module.
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		parent := p.ImportPath[:max(0, strings.LastIndex(p.ImportPath, "/"))]
		if row, ok := rows[parent]; ok && strings.Contains(row, "`"+rel+"`") {
			continue
		}
		t.Errorf("docs/architecture.md: the package map has no row for %s", p.ImportPath)
	}
}
