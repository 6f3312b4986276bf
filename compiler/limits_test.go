package compiler_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
)

// TestBadInputIsBounded: "a size limit (1 MiB), a limit on YAML alias
// expansion and nesting depth, multi-document input refused; each answered
// with a clear diagnostic, never a panic or a hang."
func TestBadInputIsBounded(t *testing.T) {
	laughs := "name: x\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for i := 0; i < 9; i++ {
		n := string(rune('b' + i))
		laughs += n + ": &" + n + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = n
	}
	cases := []struct {
		name, src string
		line      int
		contains  string
	}{
		{"too large", "name: x\n" + strings.Repeat("# padding\n", compiler.MaxManifestSize/10+1), 1, "1 MiB"},
		{"empty", "", 1, "empty"},
		{"only comments", "# nothing\n", 1, "empty"},
		{"multi-document", "name: x\nbuckets: {f: {}}\n---\nname: y\n", 3, "more than one YAML document"},
		{"non-mapping root", "- a\n- b\n", 1, "must be a mapping"},
		{"syntax error", "name: x\napplications:\n  web: [\n", 3, "YAML syntax error"},
		{"invalid utf-8", "name: x\ndescription: \xff\xfe\n", 2, "UTF-8"},
		{"too deep", "name: x\ndescription: " + strings.Repeat("[", 80) + strings.Repeat("]", 80) + "\n", 2, "nests deeper"},
		{"billion laughs", laughs, 6, "aliases"},
		{"recursive alias", "name: x\na: &a [*a]\n", 2, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := compiler.Compile([]byte(tc.src))
			errs := res.Errors()
			if len(errs) == 0 {
				t.Fatalf("got no error, want one")
			}
			if errs[0].Line != tc.line || !strings.Contains(errs[0].Message, tc.contains) {
				t.Errorf("got %s, want line %d containing %q", errs[0], tc.line, tc.contains)
			}
			if res.Definition != nil || res.Hash != "" {
				t.Errorf("invalid input produced a definition")
			}
		})
	}
}

// FuzzCompile checks that no input makes Compile panic or break its own
// invariants.
func FuzzCompile(f *testing.F) {
	for _, name := range examples {
		f.Add(readExample(f, name))
	}
	f.Add([]byte(hashBase))
	f.Add([]byte("name: x\na: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		res := compiler.Compile(src)
		if d := compiler.Diagnose(src); !slices.Equal(d, res.Diagnostics) {
			t.Fatalf("Diagnose differs from Compile:\ngot  %v\nwant %v", d, res.Diagnostics)
		}
		if res.Valid() != (res.Definition != nil) {
			t.Fatalf("validity %v but definition %v", res.Valid(), res.Definition != nil)
		}
		for _, d := range res.Diagnostics {
			if d.Line < 1 || d.Column < 1 || d.Message == "" {
				t.Fatalf("malformed diagnostic %+v", d)
			}
		}
		if res.Valid() {
			again := compiler.Compile(src)
			if again.Hash != res.Hash {
				t.Fatalf("hash not deterministic")
			}
		}
	})
}

// largeMappings is a manifest with n ports, n routes each naming a port
// that does not exist, n environment entries, n applications with neither
// image nor build, and n CORS headers.
func largeMappings(n int) []byte {
	var b strings.Builder
	b.WriteString("name: a\napplications:\n  w:\n    image: x\n    ports:\n")
	for i := range n {
		fmt.Fprintf(&b, "      p%d: {port: 80}\n", i)
	}
	b.WriteString("    routes:\n")
	for i := range n {
		fmt.Fprintf(&b, "      r%d: {port: q%d}\n", i, i)
	}
	b.WriteString("    environment:\n")
	for i := range n {
		fmt.Fprintf(&b, "      K%d: v\n", i)
	}
	for i := range n {
		fmt.Fprintf(&b, "  a%d: {}\n", i) // no image or build: reported at the key
	}
	b.WriteString("buckets:\n  b:\n    cors:\n      allowedOrigins: ['*']\n      allowedHeaders:\n")
	for i := range n {
		fmt.Fprintf(&b, "        - h%d\n", i)
	}
	return []byte(b.String())
}

// Every problem of a large file is reported. How the cost grows with the
// size is measured by BenchmarkCompileLargeMappings, not timed here.
func TestLargeMappingsReportEveryProblem(t *testing.T) {
	res := compiler.Compile(largeMappings(3000))
	if res.Valid() || len(res.Errors()) < 6000 {
		t.Errorf("got %d errors, want at least 6000 (one per route, one per application)", len(res.Errors()))
	}
}

// TestTabIsReportedWhereItIs follows issue 26: "A YAML syntax error is
// reported on the line of the offending character (a tab on line 5 is line
// 5, not the line of the enclosing block)". The YAML library names the line
// of the key it was scanning; the diagnostic names the tab.
func TestTabIsReportedWhereItIs(t *testing.T) {
	cases := []struct {
		name, src string
		line, col int
	}{
		{"tab indenting a key in a block", "name: shop\napplications:\n  web:\n    image: nginx\n\tport: 80\n", 5, 1},
		{"tab after spaces", "name: shop\napplications:\n  web:\n    image: nginx\n    \tport: 80\n", 5, 5},
		{"tab in a list", "name: shop\napplications:\n  web:\n    image: nginx\n    env:\n      - a\n\t  - b\n", 7, 1},
		{"tab in a block scalar", "name: shop\napplications:\n  web:\n    image: nginx\n    command: |\n      x\n\ty\n", 7, 1},
		{"tab at the top level", "name: shop\n\tapplications: {}\n", 2, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := compiler.Compile([]byte(tc.src)).Errors()
			if len(errs) != 1 || !strings.Contains(errs[0].Message, "tab character") {
				t.Fatalf("got %v, want one error about a tab", errs)
			}
			if errs[0].Line != tc.line || errs[0].Column != tc.col {
				t.Errorf("got %d:%d, want %d:%d (%s)", errs[0].Line, errs[0].Column, tc.line, tc.col, errs[0])
			}
		})
	}
}
