package handlers

import (
	"net/url"
	"strings"
)

// maxNextLength bounds the page to return to after signing in: it travels in
// the sign-in URL and the session.
const maxNextLength = 2048

// SignInTarget returns the path and query on this Studio that next leads to
// when a browser follows it as a redirect from origin (the public URL), and
// false when it leads anywhere else or nowhere sensible.
//
// A browser cleans a Location before resolving it: it drops ASCII tabs and
// newlines anywhere, trims leading and trailing C0 controls and spaces, and
// reads a backslash as a slash in http and https URLs. So "/\t/evil.example"
// and "/\evil.example" both mean //evil.example, another site. SignInTarget
// does that clean-up first, resolves the result against origin, accepts it
// only when the resolved scheme and host are origin's, and then returns the
// resolved path and query serialized again (percent-encoded, never starting
// with // or /\), so what the browser is sent is a path it cannot read as
// another site. A nil origin accepts paths only.
func SignInTarget(origin *url.URL, next string) (string, bool) {
	if next == "" || len(next) > maxNextLength {
		return "", false
	}
	cleaned := browserClean(next)
	if cleaned == "" {
		return "", false
	}
	ref, err := url.Parse(cleaned)
	if err != nil || ref.Opaque != "" || ref.User != nil {
		return "", false
	}
	base := origin
	if base == nil {
		if ref.Scheme != "" || ref.Host != "" || !strings.HasPrefix(cleaned, "/") {
			return "", false
		}
		base = &url.URL{Scheme: "http", Host: "studio.invalid"}
	}
	if ref.Scheme == "" && ref.Host == "" && !strings.HasPrefix(cleaned, "/") {
		// A relative path would resolve against the page that redirects
		// (the sign-in callback), not against the root: not a page asked for.
		return "", false
	}
	u := base.ResolveReference(ref)
	if !strings.EqualFold(u.Scheme, base.Scheme) || !sameHost(u, base) || u.User != nil {
		return "", false
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	target := path
	if q := encodeQuery(u.RawQuery); q != "" {
		target += "?" + q
	}
	// The same clean-up must leave the answer as it is and read it as a
	// path of this site: otherwise a browser would read it differently.
	if !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "//") || browserClean(target) != target {
		return "", false
	}
	return target, true
}

// browserClean does to s what the WHATWG URL parser does before it reads
// a URL of a special scheme: trailing and leading C0 controls and spaces
// go, tabs and newlines go wherever they are, and \ is /.
func browserClean(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= 0x20 })
	s = strings.NewReplacer("\t", "", "\n", "", "\r", "", `\`, "/").Replace(s)
	return s
}

// sameHost reports whether a and b name the same host and port, with a
// default port written or not.
func sameHost(a, b *url.URL) bool {
	return strings.EqualFold(a.Hostname(), b.Hostname()) && portOrDefault(a) == portOrDefault(b)
}

func portOrDefault(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// encodeQuery percent-encodes what may not appear bare in a query (spaces,
// controls, quotes, angle brackets, backslashes, non-ASCII bytes), keeping
// valid escapes as they are.
func encodeQuery(q string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '%' && i+2 < len(q) && isHex(q[i+1]) && isHex(q[i+2]):
			b.WriteByte(c)
		case c <= 0x20 || c >= 0x7f || strings.IndexByte(`"'<>\^`+"`{|}%#", c) >= 0:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
