package compiler

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Image references follow the OCI / Docker distribution reference grammar:
//
//	reference        := name [ ":" tag ] [ "@" digest ]
//	name             := [ host [ ":" port ] "/" ] path-component [ "/" path-component ]*
//	host             := domain-component [ "." domain-component ]* | "[" IPv6 "]"
//	domain-component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
//	port             := [0-9]+
//	path-component   := [a-z0-9]+ ( ( [._] | "__" | "-"+ ) [a-z0-9]+ )*
//	tag              := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
//	digest           := algorithm ":" encoded
//	algorithm        := [a-z0-9]+ ( [.+_-] [a-z0-9]+ )*
//	encoded          := [a-zA-Z0-9=_-]+ (sha256: 64 lowercase hex, sha512: 128)
//
// The name (host and path, without tag or digest) is at most 255 characters.
// The checks below scan the string by hand instead of matching a regular
// expression, so that a valid reference costs no allocation and an invalid
// one is reported with the part that is wrong.
const (
	maxImageNameLength = 255
	maxImageTagLength  = 128
	// maxQuotedPart bounds how much of a manifest value a message repeats.
	maxQuotedPart = 80
)

// imageProblem returns what is wrong with the image reference s, or "" when
// it follows the reference grammar. s has no whitespace or control characters.
func imageProblem(s string) string {
	rest, digest, hasDigest := s, "", false
	if i := strings.IndexByte(s, '@'); i >= 0 {
		rest, digest, hasDigest = s[:i], s[i+1:], true
	}
	// A tag follows the first colon after the last slash; colons before it
	// belong to the registry host's port.
	slash := strings.LastIndexByte(rest, '/')
	name, tag, hasTag := rest, "", false
	if i := strings.IndexByte(rest[slash+1:], ':'); i >= 0 {
		name, tag, hasTag = rest[:slash+1+i], rest[slash+2+i:], true
	}
	switch {
	case name == "" && hasTag:
		return "the repository name before `:` is empty"
	case name == "":
		return "the repository name before `@` is empty"
	case slash < 0 && strings.HasPrefix(rest, "["):
		return "registry host " + quote(rest) + " must be followed by `/` and a repository path, as in `[::1]:5000/app`"
	}
	if p := nameProblem(name); p != "" {
		return p
	}
	if len(name) > maxImageNameLength {
		return "the repository name has " + strconv.Itoa(len(name)) + " characters; at most " + strconv.Itoa(maxImageNameLength)
	}
	if hasTag {
		if p := tagProblem(tag); p != "" {
			return p
		}
	}
	if hasDigest {
		return digestProblem(digest)
	}
	return ""
}

// nameProblem checks the repository name: an optional registry host and the
// slash-separated path.
func nameProblem(name string) string {
	switch {
	case strings.HasPrefix(name, "/"):
		return "the repository name must not start with `/`"
	case strings.HasSuffix(name, "/"):
		return "the repository name must not end with `/`; name the repository after the last `/`"
	case strings.Contains(name, "//"):
		return "the repository name has an empty part between slashes (`//`)"
	}
	path := name
	if i := strings.IndexByte(name, '/'); i >= 0 {
		// The first of several components is a registry host when it
		// looks like one (a dot, a port, brackets or localhost), as Docker
		// reads references; otherwise it starts the path, so `Acme/app`
		// is an uppercase repository name, not a registry called Acme.
		first := name[:i]
		if !isPathComponent(first) && looksLikeHost(first) {
			if hp := hostProblem(first); hp != "" {
				return hp
			}
			path = name[i+1:]
		}
	}
	for path != "" {
		c := path
		if i := strings.IndexByte(path, '/'); i >= 0 {
			c, path = path[:i], path[i+1:]
		} else {
			path = ""
		}
		if !isPathComponent(c) {
			return pathComponentProblem(c)
		}
	}
	return ""
}

// looksLikeHost says whether the first component of a name is a registry
// host rather than the start of the repository path.
func looksLikeHost(s string) bool {
	return strings.ContainsAny(s, ".:[]") || s == "localhost"
}

func isLowerAlnum(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }

func isAlnum(b byte) bool { return isLowerAlnum(b) || b >= 'A' && b <= 'Z' }

func isWord(b byte) bool { return isAlnum(b) || b == '_' }

// isPathComponent says whether c is a valid component of the repository
// path, without building a message.
func isPathComponent(c string) bool {
	if c == "" || !isLowerAlnum(c[0]) || !isLowerAlnum(c[len(c)-1]) {
		return false
	}
	for i := 0; i < len(c); {
		if isLowerAlnum(c[i]) {
			i++
			continue
		}
		j := i
		for j < len(c) && (c[j] == '.' || c[j] == '_' || c[j] == '-') {
			j++
		}
		if j == i {
			return false
		}
		if sep := c[i:j]; sep != "." && sep != "_" && sep != "__" && strings.Trim(sep, "-") != "" {
			return false
		}
		i = j
	}
	return true
}

// pathComponentProblem checks one component of the repository path.
func pathComponentProblem(c string) string {
	for i := 0; i < len(c); i++ {
		if b := c[i]; b >= 'A' && b <= 'Z' {
			return "repository names are lowercase: " + quote(c)
		}
	}
	for i := 0; i < len(c); i++ {
		if b := c[i]; !isLowerAlnum(b) && b != '.' && b != '_' && b != '-' {
			return quote(runeAt(c, i)) + " is not allowed in repository name " + quote(c) + "; use lowercase letters, digits, `.`, `_` and `-`"
		}
	}
	if !isLowerAlnum(c[0]) || !isLowerAlnum(c[len(c)-1]) {
		return "repository name " + quote(c) + " must start and end with a lowercase letter or digit"
	}
	for i := 0; i < len(c); {
		if isLowerAlnum(c[i]) {
			i++
			continue
		}
		j := i
		for j < len(c) && !isLowerAlnum(c[j]) {
			j++
		}
		if sep := c[i:j]; sep != "." && sep != "_" && sep != "__" && strings.Trim(sep, "-") != "" {
			return "separator " + quote(sep) + " in repository name " + quote(c) + " is not allowed; letters and digits are joined by one `.`, one `_`, `__` or dashes"
		}
		i = j
	}
	return ""
}

// hostProblem checks a registry host with its optional port.
func hostProblem(h string) string {
	host, port, hasPort := h, "", false
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "registry host " + quote(h) + " opens `[` for an IPv6 address but does not close it with `]`"
		}
		host = h[:end+1]
		switch after := h[end+1:]; {
		case after == "":
		case after[0] == ':':
			port, hasPort = after[1:], true
		default:
			return "registry host " + quote(h) + " continues after `]`; only `:` and a port may follow an IPv6 address"
		}
		addr := host[1 : len(host)-1]
		ok := addr != ""
		for i := 0; i < len(addr) && ok; i++ {
			b := addr[i]
			ok = b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F' || b == ':'
		}
		if ip, err := netip.ParseAddr(addr); !ok || err != nil || !ip.Is6() {
			return "registry host " + quote(host) + " is not an IPv6 address"
		}
	} else {
		if i := strings.IndexByte(h, ':'); i >= 0 {
			host, port, hasPort = h[:i], h[i+1:], true
		}
		if host == "" {
			return "the registry host before `:` is empty"
		}
		for rest := host; rest != ""; {
			label := rest
			if i := strings.IndexByte(rest, '.'); i >= 0 {
				label, rest = rest[:i], rest[i+1:]
				if rest == "" {
					return "registry host " + quote(host) + " must not end with `.`"
				}
			} else {
				rest = ""
			}
			if label == "" {
				return "registry host " + quote(host) + " has an empty part between dots"
			}
			for i := 0; i < len(label); i++ {
				if b := label[i]; !isAlnum(b) && b != '-' {
					return quote(runeAt(label, i)) + " is not allowed in registry host " + quote(host) + "; use letters, digits, `-` and `.`"
				}
			}
			if label[0] == '-' || label[len(label)-1] == '-' {
				return "registry host " + quote(host) + ": " + quote(label) + " must start and end with a letter or digit"
			}
		}
	}
	if hasPort {
		if port == "" {
			return "the port after `:` in registry host " + quote(h) + " is empty"
		}
		for i := 0; i < len(port); i++ {
			if port[i] < '0' || port[i] > '9' {
				return "port " + quote(port) + " of registry host " + quote(host) + " must be a number"
			}
		}
	}
	return ""
}

// tagProblem checks the tag after the name's colon.
func tagProblem(t string) string {
	if t == "" {
		return "the tag after `:` is empty; remove the `:` or name a tag"
	}
	for i := 0; i < len(t); i++ {
		if b := t[i]; !isWord(b) && b != '.' && b != '-' {
			return quote(runeAt(t, i)) + " is not allowed in tag " + quote(t) + "; tags use letters, digits, `_`, `.` and `-`"
		}
	}
	if !isWord(t[0]) {
		return "tag " + quote(t) + " must start with a letter, digit or `_`"
	}
	if len(t) > maxImageTagLength {
		return "the tag has " + strconv.Itoa(len(t)) + " characters; at most " + strconv.Itoa(maxImageTagLength)
	}
	return ""
}

// digestProblem checks the digest after `@`.
func digestProblem(d string) string {
	if d == "" {
		return "the digest after `@` is empty; remove the `@` or give a digest such as `sha256:` and 64 hex digits"
	}
	if strings.IndexByte(d, '@') >= 0 {
		return "`@` may appear only once, before the digest"
	}
	i := strings.IndexByte(d, ':')
	if i < 0 {
		return "digest " + quote(d) + " must be `algorithm:encoded`, such as `sha256:` and 64 hex digits"
	}
	alg, enc := d[:i], d[i+1:]
	if alg == "" {
		return "the digest algorithm before `:` is empty; write `sha256:` and 64 hex digits"
	}
	if p := algorithmProblem(alg); p != "" {
		return p
	}
	if enc == "" {
		return "the digest after `" + alg + ":` is empty"
	}
	for j := 0; j < len(enc); j++ {
		if b := enc[j]; !isAlnum(b) && b != '=' && b != '_' && b != '-' {
			return quote(runeAt(enc, j)) + " is not allowed in digest " + quote(d) + "; use letters, digits, `=`, `_` and `-`"
		}
	}
	want := 0
	switch alg {
	case "sha256":
		want = 64
	case "sha512":
		want = 128
	default:
		return ""
	}
	if len(enc) != want {
		return "a " + alg + " digest has " + strconv.Itoa(want) + " hex digits; " + quote(enc) + " has " + strconv.Itoa(len(enc))
	}
	for j := 0; j < len(enc); j++ {
		if b := enc[j]; !(b >= '0' && b <= '9' || b >= 'a' && b <= 'f') {
			return "a " + alg + " digest is lowercase hex (0-9, a-f): " + quote(runeAt(enc, j)) + " is not allowed"
		}
	}
	return ""
}

// algorithmProblem checks a digest algorithm such as sha256.
func algorithmProblem(alg string) string {
	ok := true
	prevSep := true // the algorithm must not start with a separator
	for i := 0; i < len(alg) && ok; i++ {
		switch b := alg[i]; {
		case isLowerAlnum(b):
			prevSep = false
		case b == '.' || b == '+' || b == '_' || b == '-':
			ok = !prevSep
			prevSep = true
		default:
			ok = false
		}
	}
	if ok && !prevSep {
		return ""
	}
	return "digest algorithm " + quote(alg) + " must be lowercase letters and digits, joined by single `.`, `+`, `_` or `-`, such as `sha256`"
}

// runeAt returns the character that starts at byte i of s.
func runeAt(s string, i int) string {
	_, n := utf8.DecodeRuneInString(s[i:])
	return s[i : i+n]
}

// quote renders part of a manifest value in backticks for a message,
// shortened when it is long.
func quote(s string) string {
	if len(s) > maxQuotedPart {
		cut := maxQuotedPart
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return "`" + s + "`"
}

// literalImageExpression returns the first ${...} in an image reference,
// for the warning that it is not interpolated.
func literalImageExpression(s string) string {
	i := strings.Index(s, "${")
	if i < 0 {
		return ""
	}
	e := s[i:]
	if j := strings.IndexByte(e, '}'); j >= 0 {
		e = e[:j+1]
	}
	return e
}
