// Package mask hides the values of an environment in log lines before they
// are stored or streamed: every form in which a value may appear in a line
// (as it is, base64-encoded, URL-encoded, JSON- or C-escaped, and as the
// cleaning of a stored line leaves it) is replaced by Mask.
package mask

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"html"
	"net/url"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
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
	// public are hostnames shown as they are where they stand as a
	// hostname (see Public), in lower case.
	public []string
}

// Public returns a masker that hides what m hides except where one of
// hostnames stands whole as a hostname in a line (not inside a longer
// name or word): hostnames are public (DNS, certificates, the edge's
// logs) even when the values that build them are secrets, so the lines a
// step writes about a hostname (its DNS answers, its probe, its
// certificate) print it. The same value anywhere else in the line, or in
// another form (base64, escaped), stays masked. m is left as it is.
func (m *Masker) Public(hostnames ...string) *Masker {
	if m == nil {
		return nil
	}
	out := &Masker{forms: m.forms, public: slices.Clone(m.public)}
	for _, h := range hostnames {
		if h = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(h), ".")); h != "" && !slices.Contains(out.public, h) {
			out.public = append(out.public, h)
		}
	}
	return out
}

// hostnameByte reports whether c may be part of a hostname.
func hostnameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// uncoverPublic clears covered over each place a public hostname stands
// whole in line: neither preceded nor followed by a hostname's byte (a
// full stop ending a sentence excepted).
func (m *Masker) uncoverPublic(line string, covered []bool) {
	if covered == nil || len(m.public) == 0 {
		return
	}
	lower := strings.ToLower(line)
	for _, h := range m.public {
		for i := 0; i+len(h) <= len(lower); {
			j := strings.Index(lower[i:], h)
			if j < 0 {
				break
			}
			from, to := i+j, i+j+len(h)
			i = from + 1
			if from > 0 && hostnameByte(lower[from-1]) {
				continue
			}
			if to < len(lower) && hostnameByte(lower[to]) && !(lower[to] == '.' && (to+1 == len(lower) || !hostnameByte(lower[to+1]))) {
				continue
			}
			for k := from; k < to; k++ {
				covered[k] = false
			}
		}
	}
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
	addAll := func(v string) {
		for _, c := range variants(v) {
			for _, f := range Forms(c) {
				add(f)
			}
		}
	}
	for _, v := range values {
		if len(v) < MinLength {
			continue
		}
		addAll(v)
		// A value of several lines (a key in PEM) reaches a log a line at
		// a time.
		if strings.Contains(v, "\n") {
			for _, line := range strings.Split(v, "\n") {
				if line = strings.TrimSpace(line); len(line) >= MinLength {
					addAll(line)
				}
			}
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return &Masker{forms: forms}
}

// Clean is what a log line becomes before it is stored: valid UTF-8 (each
// run of invalid bytes one U+FFFD) without NUL bytes or carriage returns.
// The store cleans every line so; the masker hides the cleaned form of
// each value too, since a value holding such bytes no longer appears as it
// is in a cleaned line.
func Clean(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	if strings.ContainsAny(text, "\x00\r") {
		text = strings.NewReplacer("\x00", "", "\r", "").Replace(text)
	}
	return text
}

// variants returns v and what it becomes in a line that was cleaned
// (Clean) or decoded by a program that reads each invalid byte as U+FFFD
// (as JSON encoders write it), without duplicates.
func variants(v string) []string {
	out := []string{v}
	perByte := string([]rune(v))
	for _, c := range []string{Clean(v), perByte, Clean(perByte)} {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// Forms returns the texts under which v may appear in a line: v itself
// and v without surrounding blanks, its base64 encodings (standard and URL
// alphabets, padded and not, wrapped at 64 or 76 columns, and the part of
// its encoding that is the same wherever it starts inside a longer base64
// text), its JSON string escapes, its HTML escapes and its URL encodings
// (query and path escaping, upper- and lower-case hex).
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
	// A value in an HTML page a program printed (an error page).
	if h := html.EscapeString(v); h != v {
		out = append(out, h)
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

// cover marks the bytes of line that a form covers (nil: none): a form
// found as it is, or found once the line's backslash escapes are read
// (once, or twice for a JSON document inside a JSON string), which covers
// the escapes it was written with.
func (m *Masker) cover(line string) []bool {
	var covered []bool
	mark := func(from, to int) {
		if covered == nil {
			covered = make([]bool, len(line))
		}
		for k := from; k < to; k++ {
			covered[k] = true
		}
	}
	m.find(line, mark)
	var lo, hi []int
	text := line
	for range 2 {
		if strings.IndexByte(text, '\\') < 0 {
			break
		}
		text, lo, hi = unescape(text, lo, hi)
		m.find(text, func(from, to int) { mark(lo[from], hi[to-1]) })
	}
	m.uncoverPublic(line, covered)
	return covered
}

// find calls mark with the start and end of each place a form is found
// in text.
func (m *Masker) find(text string, mark func(from, to int)) {
	for _, f := range m.forms {
		if len(f) > len(text) {
			continue
		}
		for i := 0; i+len(f) <= len(text); {
			j := strings.Index(text[i:], f)
			if j < 0 {
				break
			}
			mark(i+j, i+j+len(f))
			i += j + 1
		}
	}
}

// simpleEscapes are the escapes of one character after the backslash.
var simpleEscapes = map[byte]byte{'"': '"', '\\': '\\', '/': '/', '\'': '\'', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'a': '\a', 'v': '\v'}

// unescape reads the backslash escapes of s: JSON's (\" \\ \/ \b \f \n \r
// \t and \uXXXX, surrogate pairs joined, a lone surrogate read as U+FFFD)
// and those of C-like quoting (\' \a \v \xHH \UXXXXXXXX, as Go's %q and
// %+q and Python's repr write bytes and characters); a backslash that
// starts none of them is kept. Each byte of the text it returns comes from
// the bytes lo[i] to hi[i] (exclusive) of the original line: s's own
// positions when lo and hi are nil, else those lo and hi give for s.
func unescape(s string, lo, hi []int) (string, []int, []int) {
	var b []byte
	var nlo, nhi []int
	emit := func(from, to int, bs ...byte) {
		for _, c := range bs {
			b = append(b, c)
			if lo == nil {
				nlo, nhi = append(nlo, from), append(nhi, to)
			} else {
				nlo, nhi = append(nlo, lo[from]), append(nhi, hi[to-1])
			}
		}
	}
	for i := 0; i < len(s); {
		if s[i] != '\\' || i+1 == len(s) {
			emit(i, i+1, s[i])
			i++
			continue
		}
		if c, ok := simpleEscapes[s[i+1]]; ok {
			emit(i, i+2, c)
			i += 2
			continue
		}
		switch s[i+1] {
		case 'x':
			if h, ok := hex(s, i+2, 2); ok {
				emit(i, i+4, byte(h))
				i += 4
				continue
			}
		case 'U':
			if r, ok := hex(s, i+2, 8); ok {
				emit(i, i+10, utf8.AppendRune(nil, rune(r))...)
				i += 10
				continue
			}
		case 'u':
			if r, ok := hex(s, i+2, 4); ok {
				end := i + 6
				if utf16.IsSurrogate(rune(r)) {
					r2, ok2 := -1, false
					if end+6 <= len(s) && s[end] == '\\' && s[end+1] == 'u' {
						r2, ok2 = hex(s, end+2, 4)
					}
					if joined := utf16.DecodeRune(rune(r), rune(r2)); ok2 && joined != utf8.RuneError {
						r, end = int(joined), end+6
					} else {
						r = utf8.RuneError
					}
				}
				emit(i, end, utf8.AppendRune(nil, rune(r))...)
				i = end
				continue
			}
		}
		emit(i, i+1, s[i])
		i++
	}
	return string(b), nlo, nhi
}

// hex reads n hexadecimal digits of s at i.
func hex(s string, i, n int) (int, bool) {
	if i+n > len(s) {
		return 0, false
	}
	v := 0
	for _, c := range []byte(s[i : i+n]) {
		switch {
		case c >= '0' && c <= '9':
			v = v*16 + int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v*16 + int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v*16 + int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
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
