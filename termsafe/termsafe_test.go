package termsafe_test

import (
	"testing"

	"github.com/skali-dev/studio/termsafe"
)

func TestVisibleWritesOutWhatATerminalWouldActOn(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"plain text stays":           {"Build web ✓ ünï €", "Build web ✓ ünï €"},
		"a tab stays":                {"a\tb", "a\tb"},
		"ESC of a colour":            {"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		"OSC title with BEL":         {"\x1b]0;pwned\a", `\x1b]0;pwned\x07`},
		"OSC 52 clipboard":           {"\x1b]52;c;Y3VybA==\x1b\\", `\x1b]52;c;Y3VybA==\x1b\`},
		"newline and CR":             {"ok\r\nfake line", `ok\r\nfake line`},
		"NUL, backspace, DEL":        {"a\x00b\bc\x7f", `a\x00b\x08c\x7f`},
		"C1 CSI as UTF-8":            {"x\u009b31my", `x\u009b31my`},
		"C1 range ends":              {"\u0080\u009f\u00a0", `\u0080\u009f` + "\u00a0"},
		"bidi override":              {"abc\u202edcba\u202c", `abc\u202edcba\u202c`},
		"bidi isolates":              {"\u2066x\u2069\u2067\u2068", `\u2066x\u2069\u2067\u2068`},
		"a byte that is not UTF-8":   {"a\x9bb\xffc", `a\x9bb\xffc`},
		"a cut UTF-8 character":      {"ü"[:1] + "z", `\xc3z`},
		"a backslash stays as it is": {`C:\new`, `C:\new`},
	} {
		if got := termsafe.Visible(c.in); got != c.want {
			t.Errorf("%s: Visible = %q, want %q", name, got, c.want)
		}
	}
}
