// Package termsafe makes text from a server safe to print on a terminal:
// the bytes a terminal would act on instead of showing (escape sequences
// that move the cursor, rewrite the title or the clipboard, hide text) and
// the characters that reorder what is shown (bidirectional overrides) are
// written out as visible escapes.
package termsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Visible returns s with what a terminal would not show as it is written
// as a visible escape: ESC and the other C0 controls as \x1b and the like
// (a newline as \n, a carriage return as \r; a tab stays), DEL as \x7f,
// the C1 controls U+0080–U+009F and the bidirectional embeddings,
// overrides and isolates (U+202A–U+202E, U+2066–U+2069) as \u009b and the
// like, and each byte that is not UTF-8 as \xff and the like. A text
// without any of them is returned as it is. A backslash is left alone, so
// a text may read like an escape without being one: what matters is that
// none of those bytes reaches the terminal.
func Visible(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if hidden(r, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case !hidden(r, n):
			b.WriteString(s[i : i+n])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 || n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

// hidden reports whether the rune r, n bytes long in its text, is one
// Visible writes out.
func hidden(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return true
	case r == '\t':
		return false
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
