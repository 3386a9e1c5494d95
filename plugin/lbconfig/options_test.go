package lbconfig

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOptionsREADME: the README's Syntax block and its list of options
// name the options of the table, in its order.
func TestOptionsREADME(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, syntax, ok := strings.Cut(string(b), "\n## Syntax\n")
	if !ok {
		t.Fatal("README.md has no Syntax section")
	}
	syntax, _, _ = strings.Cut(syntax, "\n#")
	_, block, ok := strings.Cut(syntax, "~~~ txt\nlbconfig {\n")
	block, rest, ok2 := strings.Cut(block, "\n}\n~~~\n")
	if !ok || !ok2 {
		t.Fatal("README.md's Syntax section has no ~~~ txt block of lbconfig { ... }")
	}
	var inBlock, listed, want []string
	for _, l := range strings.Split(block, "\n") {
		inBlock = append(inBlock, strings.Fields(l)[0])
	}
	for _, l := range strings.Split(rest, "\n") {
		if name, ok := strings.CutPrefix(l, "* `"); ok {
			name, _, _ = strings.Cut(name, "`")
			listed = append(listed, name)
		}
	}
	for _, o := range options {
		want = append(want, o.name)
	}
	if !slices.Equal(inBlock, want) {
		t.Errorf("README Syntax block:\n  %v\noption table:\n  %v", inBlock, want)
	}
	if !slices.Equal(listed, want) {
		t.Errorf("README option list:\n  %v\noption table:\n  %v", listed, want)
	}
}

// TestClusterKeysHaveOptions: every key the cluster model can name in an
// error is set by exactly one option, so the error names that option and
// points at its line. The keys are read from internal/cluster's source, so
// a key added there fails here until the table has it.
func TestClusterKeysHaveOptions(t *testing.T) {
	// Keys the Corefile cannot set, so cluster.New never reports them here.
	notInCorefile := map[string]string{
		"domain": "lbconfig serves no names; Spec.Domain stays empty, which the model does not check",
		// Spec.Services (internal/cluster/servicegroups.go): the layout and
		// render exist, the controller does not follow the Services in VRRP
		// mode yet, so no option sets them; 'services' will, with them.
		"services":          "the Services over VRRP: not settable until lbconfig follows them in VRRP mode",
		"services.groups":   "the Services over VRRP: not settable until lbconfig follows them in VRRP mode",
		"services.localIDs": "the Services over VRRP: not settable until lbconfig follows them in VRRP mode",
	}
	keys := clusterKeys(t)
	if len(keys) < 20 {
		t.Fatalf("found only %d Key* constants in internal/cluster: %v", len(keys), keys)
	}
	for _, k := range keys {
		var setBy []string
		for _, o := range options {
			if slices.Contains(o.keys, k) {
				setBy = append(setBy, o.name)
			}
		}
		_, exempt := notInCorefile[k]
		switch {
		case exempt && len(setBy) != 0:
			t.Errorf("cluster key %q is set by %v but listed as not in the Corefile", k, setBy)
		case !exempt && len(setBy) != 1:
			t.Errorf("cluster key %q is set by %d options %v, want 1", k, len(setBy), setBy)
		}
	}
	for _, o := range options {
		for _, k := range o.keys {
			if !slices.Contains(keys, k) {
				t.Errorf("option %s names %q, which is no cluster key", o.name, k)
			}
		}
	}
}

// clusterKeys are the values of internal/cluster's exported Key* constants.
func clusterKeys(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../internal/cluster/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Key") || !n.IsExported() {
						continue
					}
					if i >= len(vs.Values) {
						t.Fatalf("%s: %s has no value of its own", fset.Position(n.Pos()), n.Name)
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: %s is not a string literal", fset.Position(n.Pos()), n.Name)
					}
					v, _ := strconv.Unquote(lit.Value)
					keys = append(keys, v)
				}
			}
		}
	}
	return keys
}
