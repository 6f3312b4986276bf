// Package mask hides the values of an environment in log lines before they
// are stored or streamed: every form in which a value may appear in a line
// (as it is, base64-encoded, URL-encoded) is replaced by Mask.
package mask

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

// Mask is what a hidden value reads as.
const Mask = "••••"

// MinLength is the shortest value, in bytes, that is masked: hiding every
// "a" or "on" of a log would make it unreadable and hide nothing worth
// hiding.
const MinLength = 3

// minEmbedded is the shortest base64 text masked for a value encoded
// inside a longer base64 string (such as user:password in an HTTP Basic
// header), where only the middle of its encoding depends on the value
// alone: shorter pieces would match too much of any base64 text.
const minEmbedded = 6

// minTail is the shortest base64 text masked for a value that ends a
// longer base64 text at an offset (the padding that follows it makes a
// shorter piece specific enough).
const minTail = 5

// Masker hides a fixed set of values. It is safe for concurrent use.
type Masker struct {
	// forms are the texts to hide, longest first, without duplicates.
	forms []string
}

// New returns a masker of values (values shorter than MinLength are not
// masked). The masker keeps the forms it derives, not the slice.
func New(values []string) *Masker {
	seen := map[string]bool{}
	var forms []string
	add := func(s string) {
		if len(s) >= MinLength && !seen[s] {
			seen[s] = true
			forms = append(forms, s)
		}
	}
	for _, v := range values {
		if len(v) < MinLength {
			continue
		}
		for _, f := range Forms(v) {
			add(f)
		}
		// A value of several lines (a key in PEM) reaches a log a line at
		// a time.
		if strings.Contains(v, "\n") {
			for _, line := range strings.Split(v, "\n") {
				if line = strings.TrimSpace(line); len(line) >= MinLength {
					for _, f := range Forms(line) {
						add(f)
					}
				}
			}
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return &Masker{forms: forms}
}

// Forms returns the texts under which v may appear in a line: v itself
// and v without surrounding blanks, its base64 encodings (standard and URL
// alphabets, padded and not, wrapped at 64 or 76 columns, and the part of
// its encoding that is the same wherever it starts inside a longer base64
// text), its JSON string escapes and its URL encodings (query and path
// escaping, upper- and lower-case hex).
func Forms(v string) []string {
	out := []string{v}
	if t := strings.TrimSpace(v); t != v && len(t) >= MinLength {
		out = append(out, t)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		padded := enc.EncodeToString([]byte(v))
		out = append(out, padded, strings.TrimRight(padded, "="))
		// base64(1) wraps its output at 76 columns, PEM and openssl at
		// 64: a long value reaches a log a chunk a line.
		if len(padded) > 64 {
			for _, width := range []int{64, 76} {
				for i := 0; i < len(padded); i += width {
					chunk := padded[i:min(i+width, len(padded))]
					if len(chunk) >= minEmbedded {
						out = append(out, chunk)
					}
				}
			}
		}
		// Inside a longer base64 text the value starts 0, 1 or 2 bytes
		// into a group of three: the characters made of its bits alone.
		for k, start := range []int{0, 2, 3} {
			in := append(make([]byte, k), v...)
			e := enc.EncodeToString(in)
			end := len(in) * 8 / 6
			if end-start >= minEmbedded {
				out = append(out, e[start:end])
			}
			// Where the value ends that text (user:password in an HTTP
			// Basic header), the rest of its encoding, padding included,
			// is made of its bits alone too: a short value is found there.
			if k > 0 {
				if tail := e[start:]; len(tail) >= minTail {
					out = append(out, tail)
				}
				if raw := strings.TrimRight(e[start:], "="); len(raw) >= minEmbedded {
					out = append(out, raw)
				}
			}
		}
	}
	// A value in a JSON document: json.Marshal's escapes (\", \u003c
	// for <, >, &) and those of an encoder that leaves HTML alone.
	if b, err := json.Marshal(v); err == nil {
		out = append(out, string(b[1:len(b)-1]))
	}
	var buf bytes.Buffer
	je := json.NewEncoder(&buf)
	je.SetEscapeHTML(false)
	if je.Encode(v) == nil {
		b := bytes.TrimSpace(buf.Bytes())
		out = append(out, string(b[1:len(b)-1]))
	}
	for _, e := range []string{url.QueryEscape(v), url.PathEscape(v)} {
		out = append(out, e)
		if low := lowerHex(e); low != e {
			out = append(out, low)
		}
	}
	return out
}

// lowerHex writes the %XX escapes of s in lower case.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			for j := i + 1; j <= i+2; j++ {
				if b[j] >= 'A' && b[j] <= 'F' {
					b[j] += 'a' - 'A'
				}
			}
		}
	}
	return string(b)
}

// Mask returns line with every form of every value replaced by Mask. Where
// forms overlap or touch (two values side by side, one inside another),
// the whole stretch they cover becomes one Mask, so no part of either is
// left.
func (m *Masker) Mask(line string) string {
	if m == nil || len(m.forms) == 0 || line == "" {
		return line
	}
	return render(line, m.cover(line))
}

// cover marks the bytes of line that a form covers (nil: none).
func (m *Masker) cover(line string) []bool {
	var covered []bool
	for _, f := range m.forms {
		if len(f) > len(line) {
			continue
		}
		for i := 0; i+len(f) <= len(line); {
			j := strings.Index(line[i:], f)
			if j < 0 {
				break
			}
			if covered == nil {
				covered = make([]bool, len(line))
			}
			for k := i + j; k < i+j+len(f); k++ {
				covered[k] = true
			}
			i += j + 1
		}
	}
	return covered
}

// render writes line with each covered stretch replaced by one Mask.
func render(line string, covered []bool) string {
	if covered == nil {
		return line
	}
	var b strings.Builder
	b.Grow(len(line))
	for i := 0; i < len(line); {
		if !covered[i] {
			b.WriteByte(line[i])
			i++
			continue
		}
		b.WriteString(Mask)
		for i < len(line) && covered[i] {
			i++
		}
	}
	return b.String()
}

// MaskCut is Mask for a line cut short at its end: a value cut with it
// (the line ends with the start of one of its forms) is masked too.
func (m *Masker) MaskCut(line string) string {
	if m == nil || len(m.forms) == 0 || line == "" {
		return line
	}
	covered := m.cover(line)
	tail := 0
	for _, f := range m.forms {
		for p := min(len(f)-1, len(line)); p > tail; p-- {
			if strings.HasSuffix(line, f[:p]) {
				tail = p
				break
			}
		}
	}
	if tail > 0 {
		if covered == nil {
			covered = make([]bool, len(line))
		}
		for k := len(line) - tail; k < len(line); k++ {
			covered[k] = true
		}
	}
	return render(line, covered)
}

// Len is how many forms the masker hides (for tests and metrics).
func (m *Masker) Len() int {
	if m == nil {
		return 0
	}
	return len(m.forms)
}
