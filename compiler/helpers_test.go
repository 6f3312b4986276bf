package compiler_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
)

// want is one expected diagnostic: severity, path, line and column.
type want struct {
	sev  compiler.Severity
	path string
	line int
	col  int
}

func errAt(path string, line, col int) want  { return want{compiler.SeverityError, path, line, col} }
func warnAt(path string, line, col int) want { return want{compiler.SeverityWarning, path, line, col} }

// ruleCase is one manifest and the complete set of diagnostics it must
// produce. cite quotes the sentence of the reference the case enforces.
type ruleCase struct {
	name string
	cite string
	src  string
	want []want
	// contains, when set, must appear in the first diagnostic's message.
	contains string
}

// runRules compiles each case and compares every diagnostic's severity,
// path, line and column with the expected set.
func runRules(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := compiler.Compile([]byte(dedent(tc.src)))
			var got []want
			for _, d := range res.Diagnostics {
				got = append(got, want{d.Severity, d.Path, d.Line, d.Column})
			}
			if !sameWants(got, tc.want) {
				t.Errorf("%s\n(reference: %s)\ngot  %v\nwant %v\nmessages:\n%s", tc.name, tc.cite, got, tc.want, messages(res))
			}
			if tc.contains != "" && (len(res.Diagnostics) == 0 || !strings.Contains(res.Diagnostics[0].Message, tc.contains)) {
				t.Errorf("first message: got %q, want it to contain %q", messages(res), tc.contains)
			}
			hasErr := false
			for _, w := range tc.want {
				if w.sev == compiler.SeverityError {
					hasErr = true
				}
			}
			if res.Valid() == hasErr {
				t.Errorf("Valid(): got %v, want %v", res.Valid(), !hasErr)
			}
			if res.Valid() != (res.Definition != nil) || res.Valid() != (res.Hash != "") {
				t.Errorf("Definition/Hash presence does not follow validity: valid=%v def=%v hash=%q", res.Valid(), res.Definition != nil, res.Hash)
			}
			// The live editor's check answers the same diagnostics.
			if d := compiler.Diagnose([]byte(dedent(tc.src))); !slices.Equal(d, res.Diagnostics) {
				t.Errorf("Diagnose differs from Compile:\ngot  %v\nwant %v", d, res.Diagnostics)
			}
			// Every manifest the compiler accepts, the JSON Schema accepts.
			if res.Valid() {
				if err := validateAgainstSchema(t, []byte(dedent(tc.src))); err != nil {
					t.Errorf("the JSON Schema refuses a valid manifest: %v", err)
				}
			}
		})
	}
}

func sameWants(got, want []want) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func messages(res *compiler.Result) string {
	var b strings.Builder
	for _, d := range res.Diagnostics {
		b.WriteString("  " + d.String() + "\n")
	}
	return b.String()
}

// dedent removes the common leading tabs of a raw-string manifest and
// turns them into a YAML document; tabs are not valid YAML indentation.
func dedent(s string) string {
	s = strings.TrimPrefix(s, "\n")
	lines := strings.Split(s, "\n")
	prefix := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if prefix < 0 || n < prefix {
			prefix = n
		}
	}
	for i, l := range lines {
		if len(l) >= prefix && prefix > 0 {
			lines[i] = l[prefix:]
		}
	}
	return strings.Join(lines, "\n")
}

func readExample(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".skali.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
