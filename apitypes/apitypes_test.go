package apitypes_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// sources parses the package's non-test files with their comments.
func sources(t *testing.T) map[string]*ast.File {
	t.Helper()
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]*ast.File{}
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(".", n), nil, parser.ParseComments)
		if err != nil {
			t.Fatalf("parse %s: %v", n, err)
		}
		out[n] = f
	}
	if len(out) == 0 {
		t.Fatal("no Go source in apitypes")
	}
	return out
}

// TestImports keeps the package importable by programs outside this module
// at no cost: the standard library's encoding/json and time only, so no OCC
// package (and no store record) can appear in a wire type.
func TestImports(t *testing.T) {
	allowed := map[string]bool{"encoding/json": true, "time": true}
	for name, f := range sources(t) {
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !allowed[p] {
				t.Errorf("%s imports %q; apitypes may import only encoding/json and time", name, p)
			}
		}
	}
}

// TestDocumented requires a doc comment on the package, on every exported
// type, constant, variable and function, and on every exported struct field,
// and a JSON name on every field: these comments are what the OpenAPI
// document and the Go client describe the API with.
func TestDocumented(t *testing.T) {
	files := sources(t)
	pkgDoc := false
	types := 0
	for name, f := range files {
		if f.Doc != nil {
			pkgDoc = true
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && d.Doc == nil {
					t.Errorf("%s: func %s has no doc comment", name, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						types++
						if d.Doc == nil && s.Doc == nil {
							t.Errorf("%s: type %s has no doc comment", name, s.Name.Name)
						}
						if st, ok := s.Type.(*ast.StructType); ok {
							checkFields(t, name, s.Name.Name, st)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
								t.Errorf("%s: %s has no doc comment", name, n.Name)
							}
						}
					}
				}
			}
		}
	}
	if !pkgDoc {
		t.Error("package apitypes has no package doc comment")
	}
	// A floor, so that a parse that finds nothing cannot pass.
	if types < 30 {
		t.Errorf("found %d exported types; the API has more than 30, so the source walk is broken", types)
	}
}

func checkFields(t *testing.T, file, typ string, st *ast.StructType) {
	t.Helper()
	for _, fl := range st.Fields.List {
		if len(fl.Names) == 0 {
			t.Errorf("%s: %s embeds a type; wire types spell out their members", file, typ)
			continue
		}
		for _, n := range fl.Names {
			if !n.IsExported() {
				t.Errorf("%s: %s.%s is unexported; wire types carry only exported members", file, typ, n.Name)
				continue
			}
			if fl.Doc == nil {
				t.Errorf("%s: %s.%s has no doc comment", file, typ, n.Name)
			}
			tag := ""
			if fl.Tag != nil {
				raw, _ := strconv.Unquote(fl.Tag.Value)
				tag, _ = reflect.StructTag(raw).Lookup("json")
			}
			if jsonName, _, _ := strings.Cut(tag, ","); jsonName == "" || jsonName == "-" {
				t.Errorf("%s: %s.%s has no JSON name", file, typ, n.Name)
			}
		}
	}
}
