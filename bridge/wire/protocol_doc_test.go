package wire_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// documented are the prefixes of the constants whose values a client sees
// on the wire and docs/protocol.md must name: message types, error codes,
// command statuses, turn end reasons, sandbox exit reasons, roles and
// terminal detach reasons.
var documented = []string{"Type", "Code", "Status", "Reason", "Exit", "Role", "Detach"}

// TestProtocolDocNamesEverything fails when a message type (or another
// value of the list above) defined in this package is not in
// docs/protocol.md, written as `value`.
func TestProtocolDocNamesEverything(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	consts := wireConstants(t)
	if len(consts) < len(wire.Types()) {
		t.Fatalf("found %d constants, fewer than the %d types", len(consts), len(wire.Types()))
	}
	for name, value := range consts {
		if !strings.Contains(string(doc), "`"+value+"`") {
			t.Errorf("docs/protocol.md does not name %s (`%s`)", name, value)
		}
	}
	for _, typ := range wire.Types() {
		if !strings.Contains(string(doc), "`"+string(typ)+"`") {
			t.Errorf("docs/protocol.md does not name message type `%s`", typ)
		}
	}
}

// wireConstants returns the string constants of this package (its non-test
// files) whose names start with one of documented, by name.
func wireConstants(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !hasAnyPrefix(name.Name, documented) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					value, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[name.Name] = value
				}
			}
		}
	}
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
