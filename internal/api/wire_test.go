package api

import (
	"go/ast"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/apitypes"
)

// TestRespondTakesWireTypes pins the compile-time guard: respond, the only
// writer handlers have, accepts apitypes.Data, which only package
// apitypes implements. Widening it back to any would let a store record
// through again.
func TestRespondTakesWireTypes(t *testing.T) {
	got := reflect.TypeOf(respond).In(3)
	if want := reflect.TypeFor[apitypes.Data](); got != want {
		t.Fatalf("respond's data parameter is %v; want %v", got, want)
	}
}

// TestNoStoreRecordOnTheWire checks the handler sources for every other
// way a storage record could reach a client: only convert.go may import the
// store; httpx.Write is called once, inside respond; nothing else in the
// package writes to a response or encodes JSON itself.
func TestNoStoreRecordOnTheWire(t *testing.T) {
	const storePkg = "github.com/openclaw/occ/internal/store"
	files := parseSources(t, ".")
	if _, ok := files["convert.go"]; !ok {
		t.Fatal("internal/api has no convert.go; the wire conversion must live in one file")
	}
	httpxWrites := 0
	for name, f := range files {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case path == storePkg || strings.HasPrefix(path, storePkg+"/"):
				if name != "convert.go" {
					t.Errorf("%s imports %s; only convert.go may name store types", name, path)
				}
			case path == "encoding/json" || path == "io" || path == "fmt":
				t.Errorf("%s imports %s; handlers write only through respond", name, path)
			}
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, _ := sel.X.(*ast.Ident)
				switch m := sel.Sel.Name; {
				case pkg != nil && pkg.Name == "httpx" && m == "Write":
					httpxWrites++
					if fn.Name.Name != "respond" {
						t.Errorf("%s: %s calls httpx.Write; only respond may", name, fn.Name.Name)
					}
				case m == "Write" || m == "WriteHeader" || m == "WriteString" || strings.HasPrefix(m, "Fprint"):
					t.Errorf("%s: %s writes a response body itself (%s); use respond", name, fn.Name.Name, m)
				}
				return true
			})
		}
	}
	if httpxWrites != 1 {
		t.Errorf("found %d calls of httpx.Write in internal/api; want exactly 1 (in respond)", httpxWrites)
	}
}

// TestAuditParamsAreTheWireQuery keeps the query parameters GET
// /audit-events accepts equal to apitypes.AuditQuery's JSON names, which
// the Go client sends.
func TestAuditParamsAreTheWireQuery(t *testing.T) {
	typ := reflect.TypeFor[apitypes.AuditQuery]()
	wire := map[string]bool{}
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		wire[name] = true
	}
	if diff := cmp.Diff(wire, auditParams); diff != "" {
		t.Errorf("apitypes.AuditQuery and auditParams differ (-wire +accepted):\n%s", diff)
	}
}
