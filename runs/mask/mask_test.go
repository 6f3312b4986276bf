package mask_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/skali-dev/studio/runs/mask"
)

// The values under test. Failure messages never print them nor a line
// that may still hold one: they say which case failed, what was wanted
// (built with masks only) and where the output differs.
var (
	session  = "s3cr3t-Sess10n-K3y/+=?&ü"
	password = "hunter2!xyz"
	inner    = "hunter2!" // a value inside another
	short    = "ab"       // below mask.MinLength
	pem      = "-----BEGIN KEY-----\nMIIBVgIBADANBgkqhkiG9w0BAQEFAASCAUAwggE8\nAgEAAkEAq7BFUpkGp3+LQmlQ\n-----END KEY-----"
)

// check asserts that m turns line into want, reporting differences by
// position only.
func check(t *testing.T, m *mask.Masker, name, line, want string) {
	t.Helper()
	same(t, name, m.Mask(line), want)
}

// same asserts that a masked line got is want, reporting differences by
// position only.
func same(t *testing.T, name, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	at := 0
	for at < len(got) && at < len(want) && got[at] == want[at] {
		at++
	}
	t.Errorf("%s: masked line differs from %q from byte %d on (got %d bytes, want %d; output not shown: it may hold a value)",
		name, want, at, len(got), len(want))
}

// lowerEscapes writes the %XX escapes of s in lower case, as some
// encoders do.
func lowerEscapes(s string) string {
	parts := strings.Split(s, "%")
	for i := 1; i < len(parts); i++ {
		if len(parts[i]) >= 2 {
			parts[i] = strings.ToLower(parts[i][:2]) + parts[i][2:]
		}
	}
	return strings.Join(parts, "%")
}

func b64(enc *base64.Encoding, s string) string { return enc.EncodeToString([]byte(s)) }

func TestMaskHidesEveryEncodingOfEveryValue(t *testing.T) {
	m := mask.New([]string{session, password, inner, short, pem})
	M := mask.Mask
	cases := []struct{ name, line, want string }{
		{"raw alone", session, M},
		{"raw at the line's end", "SESSION_SECRET=" + session, "SESSION_SECRET=" + M},
		{"raw inside a word", "xx" + session + "yy", "xx" + M + "yy"},
		{"raw twice", session + " and " + session, M + " and " + M},
		{"two values side by side", session + password, M},
		{"a value inside another", "pw=" + password, "pw=" + M},
		{"the inner value alone", "pw=" + inner + ".", "pw=" + M + "."},
		{"base64 std padded", "b64: " + b64(base64.StdEncoding, session), "b64: " + M},
		{"base64 std unpadded", "b64: " + b64(base64.RawStdEncoding, session) + " end", "b64: " + M + " end"},
		{"base64 url padded", "token=" + b64(base64.URLEncoding, session), "token=" + M},
		{"base64 url unpadded", "[" + b64(base64.RawURLEncoding, session) + "]", "[" + M + "]"},
		{"base64 of a shorter value", "x " + b64(base64.StdEncoding, password), "x " + M},
		{"url query escape", "https://db/?password=" + url.QueryEscape(session) + "&ssl=1", "https://db/?password=" + M + "&ssl=1"},
		{"url path escape", "postgres://app:" + url.PathEscape(session) + "@db:5432/app", "postgres://app:" + M + "@db:5432/app"},
		{"url lower-case hex", "p=" + lowerEscapes(url.QueryEscape(session)), "p=" + M},
		{"a short value stays", "ab cd ab", "ab cd ab"},
		{"a line without values", "1 of 3 replicas ready", "1 of 3 replicas ready"},
		{"a line of a multi-line value", "  MIIBVgIBADANBgkqhkiG9w0BAQEFAASCAUAwggE8", "  " + M},
	}
	for _, c := range cases {
		check(t, m, c.name, c.line, c.want)
	}
}

// TestMaskHidesAValueInsideLongerBase64 encodes the value after 0, 1 and 2
// other bytes (as in an HTTP Basic header's user:password): no run of the
// value's own encoding of more than a few characters may remain.
func TestMaskHidesAValueInsideLongerBase64(t *testing.T) {
	m := mask.New([]string{session})
	for _, prefix := range []string{"", "a", "ab", "app:", "user1:", "abcdefg:"} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
			line := "Authorization: Basic " + b64(enc, prefix+session+":tail")
			got := m.Mask(line)
			if !strings.Contains(got, mask.Mask) {
				t.Errorf("prefix of %d bytes: nothing masked in the header", len(prefix))
				continue
			}
			// The middle of the value's encoding depends on the value
			// alone: no 8 characters of it may remain.
			own := b64(enc, strings.Repeat("\x00", len(prefix)%3)+session)
			middle := own[4 : len(own)-4]
			for i := 0; i+8 <= len(middle); i++ {
				if strings.Contains(got, middle[i:i+8]) {
					t.Fatalf("prefix of %d bytes: characters %d to %d of the value's encoding remain after masking", len(prefix), 4+i, 12+i)
				}
			}
		}
	}
}

func TestMaskOfNothing(t *testing.T) {
	var nilMasker *mask.Masker
	if got := nilMasker.Mask("plain"); got != "plain" {
		t.Errorf("a nil masker changed a line")
	}
	m := mask.New([]string{"", "a", "ab"})
	if m.Len() != 0 {
		t.Errorf("values shorter than %d bytes give %d forms, want none", mask.MinLength, m.Len())
	}
	if got := m.Mask("a ab abc"); got != "a ab abc" {
		t.Errorf("short values masked: %q", got)
	}
}

// BenchmarkMask masks a typical log line with 20 values of 24 bytes.
func BenchmarkMask(b *testing.B) {
	values := make([]string, 20)
	for i := range values {
		values[i] = strings.Repeat(string(rune('a'+i)), 12) + "-value-" + strings.Repeat("9", 5)
	}
	m := mask.New(values)
	line := "2026-12-01T17:01:02Z INFO connecting to postgres://app:" + values[7] + "@db:5432/app?sslmode=require attempt=1"
	b.ReportAllocs()
	for b.Loop() {
		_ = m.Mask(line)
	}
}

// wrap cuts s into lines of width characters, as base64(1) (76) and PEM
// or openssl (64) print a long encoding.
func wrap(s string, width int) []string {
	var lines []string
	for len(s) > width {
		lines = append(lines, s[:width])
		s = s[width:]
	}
	return append(lines, s)
}

func TestMaskHidesBase64WrappedAcrossLines(t *testing.T) {
	v := "postgres://app:s3cr3t-P4ssw0rd-that-is-long-enough@db.internal:5432/app?sslmode=require"
	m := mask.New([]string{v})
	for _, enc := range []struct {
		name string
		enc  *base64.Encoding
	}{{"standard", base64.StdEncoding}, {"URL", base64.URLEncoding}} {
		for _, width := range []int{64, 76} {
			for i, line := range wrap(b64(enc.enc, v), width) {
				if len(line) < 6 {
					continue
				}
				check(t, m, fmt.Sprintf("%s base64 wrapped at %d, line %d", enc.name, width, i+1), line, mask.Mask)
				check(t, m, fmt.Sprintf("%s base64 wrapped at %d, line %d indented", enc.name, width, i+1), "    "+line, "    "+mask.Mask)
			}
		}
	}
}

func TestMaskHidesJSONEscapedValues(t *testing.T) {
	v := `pa"ss<w>rd&1\x`
	m := mask.New([]string{v})
	b, err := json.Marshal(map[string]string{"DB_PASSWORD": v})
	if err != nil {
		t.Fatal(err)
	}
	check(t, m, "json.Marshal", string(b), `{"DB_PASSWORD":"`+mask.Mask+`"}`)
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(map[string]string{"DB_PASSWORD": v}); err != nil {
		t.Fatal(err)
	}
	check(t, m, "encoder without HTML escapes", strings.TrimSpace(buf.String()), `{"DB_PASSWORD":"`+mask.Mask+`"}`)
}

func TestMaskHidesShortValuesAtTheEndOfABasicHeader(t *testing.T) {
	for _, user := range []string{"u:", "admin:", "root:", "deploy-user:"} {
		for _, v := range []string{"abc", "abcd", "hunter", "hunter2", "hunter22"} {
			m := mask.New([]string{v})
			line := "Authorization: Basic " + b64(base64.StdEncoding, user+v)
			if got := m.Mask(line); got == line || !strings.HasSuffix(got, mask.Mask) {
				t.Errorf("user %q, value of %d bytes: the end of the Basic header is not masked", user, len(v))
			}
		}
	}
}

func TestMaskHidesValuesOfFiveBytesAnywhereInABase64Text(t *testing.T) {
	v := "s3cr3"
	m := mask.New([]string{v})
	for k := 0; k < 3; k++ {
		for _, after := range []string{"", ":and-more-text"} {
			line := b64(base64.StdEncoding, strings.Repeat("x", k+3)+v+after)
			got := m.Mask(line)
			if !strings.Contains(got, mask.Mask) {
				t.Errorf("offset %d, followed by %d bytes: not masked", k, len(after))
			}
		}
	}
}

func TestMaskHidesAValueWithoutItsSurroundingBlanks(t *testing.T) {
	m := mask.New([]string{"  s3cr3t-token "})
	check(t, m, "trimmed value in a line", "token=s3cr3t-token;", "token="+mask.Mask+";")
}

func TestMaskCutHidesAValueCutAtTheLinesEnd(t *testing.T) {
	v := "a-long-secret-value-of-forty-bytes-12345"
	m := mask.New([]string{v})
	same(t, "value cut after 10 bytes", m.MaskCut("prefix "+v[:10]), "prefix "+mask.Mask)
	same(t, "copies then a cut one", m.MaskCut(strings.Repeat(v, 3)+v[:25]), mask.Mask)
	same(t, "line without a cut value", m.MaskCut("key="+v+" and more text"), "key="+mask.Mask+" and more text")
}

// hostile are values with what a line's cleaning or an encoder rewrites,
// by the name a failure gives them.
var hostile = map[string]string{
	"carriage return": "cr-s3cr3t\rand-more",
	"NUL":             "nul-s3cr3t\x00and-more",
	"invalid UTF-8":   "bad-s3cr3t\xff\xfe\xc3and-more",
	"quotes":          `quo"te's3cr3t\back-slash`,
	"<>&":             "<s3cr3t>&amp;more",
	"non-ASCII":       "ünïcødé-s3cr3t-€-𝄞",
	"everything":      "a\r\x00\xff\"<&>é𝄞\x1b[31m-s3cr3t",
}

// asciiJSON writes v as a JSON string's content with every byte that is
// not printable ASCII escaped as \uXXXX (surrogate pairs past U+FFFF, an
// invalid byte as the lone surrogate U+DCxx, as Python's json.dumps of a
// surrogate-escaped string writes it), hex digits in upper or lower case.
func asciiJSON(v string, upper bool) string {
	var b strings.Builder
	u := func(r rune) {
		s := fmt.Sprintf(`\u%04x`, r)
		if upper {
			s = `\u` + strings.ToUpper(s[2:])
		}
		b.WriteString(s)
	}
	for i := 0; i < len(v); {
		r, n := utf8.DecodeRuneInString(v[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			u(0xdc00 + rune(v[i]))
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			u(r1)
			u(r2)
		default:
			u(r)
		}
		i += n
	}
	return b.String()
}

// hostileEncodings are the ways a program may print a value, by name.
func hostileEncodings(v string) map[string]string {
	inner := func(b []byte) string { return string(b[1 : len(b)-1]) }
	marshal := func(s string) string {
		b, _ := json.Marshal(s)
		return inner(b)
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(v)
	return map[string]string{
		"raw":                  v,
		"base64":               b64(base64.StdEncoding, v),
		"url query":            url.QueryEscape(v),
		"HTML":                 html.EscapeString(v),
		"JSON":                 marshal(v),
		"JSON without HTML":    inner(bytes.TrimSpace(buf.Bytes())),
		"JSON \\u00xx":         asciiJSON(v, false),
		"JSON \\u00XX":         asciiJSON(v, true),
		"JSON inside JSON":     marshal(`{"v":"` + marshal(v) + `"}`),
		"JSON \\u inside JSON": marshal(`{"v":"` + asciiJSON(v, false) + `"}`),
		"Go %q":                inner([]byte(fmt.Sprintf("%q", v))),
		"Go %+q":               inner([]byte(fmt.Sprintf("%+q", v))),
	}
}

// TestMaskHidesHostileValuesInEveryEncodingAfterCleaning masks each line
// as a run's log does (as printed, cleaned as the store cleans it, masked
// again), and also cleaned first then masked, and finds no form of the
// value left: neither any encoding of it,
// nor what cleaning makes of one; the text around it stays.
func TestMaskHidesHostileValuesInEveryEncodingAfterCleaning(t *testing.T) {
	for vname, v := range hostile {
		m := mask.New([]string{v})
		var forms []string
		for _, f := range hostileEncodings(v) {
			forms = append(forms, f, mask.Clean(f))
		}
		for ename, enc := range hostileEncodings(v) {
			line := `{"msg":"connecting", "password":"` + enc + `", "attempt":1}`
			stored := m.Mask(mask.Clean(m.Mask(line)))
			for pipeline, got := range map[string]string{"masked, cleaned, masked": stored, "cleaned, masked": m.Mask(mask.Clean(line))} {
				for _, f := range forms {
					if at := strings.Index(got, f); at >= 0 && len(f) >= mask.MinLength {
						t.Errorf("value with %s printed as %s, %s: a form of it is left at byte %d of the stored line", vname, ename, pipeline, at)
						break
					}
				}
			}
			if !strings.HasPrefix(stored, `{"msg":"connecting", "password":"`) || !strings.HasSuffix(stored, `", "attempt":1}`) || !strings.Contains(stored, mask.Mask) {
				t.Errorf("value with %s printed as %s: the stored line lost its text around the value or its mask (%d bytes)", vname, ename, len(stored))
			}
		}
	}
}

func TestCleanIsWhatTheStoreKeeps(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"NUL and CR":          {"a\x00b\rc", "abc"},
		"a run of bad bytes":  {"a\xff\xfeb", "a\uFFFDb"},
		"valid text stays":    {"ü\t<&>", "ü\t<&>"},
		"CR before a newline": {"a\r\nb", "a\nb"},
	} {
		if got := mask.Clean(c.in); got != c.want {
			t.Errorf("%s: Clean = %q, want %q", name, got, c.want)
		}
	}
}

// TestPublicHostnameIsShownWhereItStandsAsAHostname: a hostname built from
// a value reads as itself where it stands whole, and the value stays
// masked inside a longer name, a word, or encoded.
func TestPublicHostnameIsShownWhereItStandsAsAHostname(t *testing.T) {
	m := mask.New([]string{"wiki.test"}).Public("wiki.test")
	for line, want := range map[string]string{
		"DNS wiki.test: no A or AAAA records":                           "DNS wiki.test: no A or AAAA records",
		"wiki.test points elsewhere.":                                   "wiki.test points elsewhere.",
		"GET / (Host WIKI.TEST): 404":                                   "GET / (Host WIKI.TEST): 404",
		"www.wiki.test points here":                                     "www.•••• points here",
		"token xwiki.test":                                              "token x••••",
		"b64 " + base64.StdEncoding.EncodeToString([]byte("wiki.test")): "b64 ••••",
	} {
		if got := m.Mask(line); got != want {
			t.Errorf("Mask(%q) = %q, want %q", line, got, want)
		}
	}
	if got := mask.New([]string{"wiki.test"}).Mask("DNS wiki.test: no A"); got != "DNS ••••: no A" {
		t.Errorf("without Public the value is masked: %q", got)
	}
}
