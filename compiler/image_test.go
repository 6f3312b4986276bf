package compiler

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// referenceGrammar is the distribution reference grammar written as one
// regular expression, as the distribution project does, to check the
// hand-written scanner against.
var referenceGrammar = func() *regexp.Regexp {
	const (
		alnum     = `[a-z0-9]+`
		separator = `(?:[._]|__|[-]+)`
		component = alnum + `(?:` + separator + alnum + `)*`
		domainC   = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
		host      = `(?:` + domainC + `(?:\.` + domainC + `)*|\[[a-fA-F0-9:]+\])`
		domain    = host + `(?::[0-9]+)?`
		name      = `(?:` + domain + `/)?` + component + `(?:/` + component + `)*`
		tag       = `[\w][\w.-]{0,127}`
		digest    = `([a-z0-9]+(?:[.+_-][a-z0-9]+)*):([a-zA-Z0-9=_-]+)`
	)
	return regexp.MustCompile(`^(` + name + `)(?::` + tag + `)?(?:@` + digest + `)?$`)
}()

var pathComponent = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*$`)

func grammarAccepts(s string) bool {
	m := referenceGrammar.FindStringSubmatch(s)
	if m == nil || len(m[1]) > maxImageNameLength {
		return false
	}
	// Docker's reading: a first component is a registry host only when it
	// has a dot, a port or brackets, or is localhost.
	if first, _, ok := strings.Cut(m[1], "/"); ok && !pathComponent.MatchString(first) &&
		!strings.ContainsAny(first, ".:[") && first != "localhost" {
		return false
	}
	lowerHex := func(e string, n int) bool {
		return len(e) == n && strings.Trim(e, "0123456789abcdef") == ""
	}
	switch m[2] {
	case "sha256":
		return lowerHex(m[3], 64)
	case "sha512":
		return lowerHex(m[3], 128)
	}
	return true
}

// TestImageProblemAgreesWithGrammar compares the scanner with the regular
// expression on generated references, valid and not.
func TestImageProblemAgreesWithGrammar(t *testing.T) {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	parts := [][]string{
		{"", "ghcr.io/", "localhost:5000/", "Reg-1.example.com:443/", "[::1]:5000/", "[fe80::1]/", "a_b/", "Acme/", "-x/", "x-/", "ghcr.io:/", "ghcr..io/", "[1:2]/", "[::1/", "a:b/"},
		{"app", "team/app", "a.b_c__d---e/f", "App", "a._b", "-app", "app-", "a/", "a//b", "", "é", strings.Repeat("a", 250)},
		{"", ":v1", ":_", ":", "::1", ":.x", ":a-b.c_D", ":" + strings.Repeat("t", 128), ":" + strings.Repeat("t", 129), ":x/y"},
		{"", "@sha256:" + hex64, "@sha256:" + strings.ToUpper(hex64), "@sha256:abc", "@sha512:" + hex64 + hex64, "@sha512:" + hex64, "@", "@sha256:", "@:x", "@b3:Zz=_-", "@a..b:x", "@a+b.c:x", "@SHA:x", "@x:a:b", "@x:y@z:w"},
	}
	check := func(s string) {
		t.Helper()
		want := grammarAccepts(s)
		p := imageProblem(s)
		if want == (p == "") {
			return
		}
		// The scanner is stricter than the grammar in one place: a
		// bracketed host must parse as an IPv6 address.
		if want && strings.Contains(p, "is not an IPv6 address") {
			return
		}
		t.Errorf("%q: grammar accepts %v, scanner says %q", s, want, p)
	}
	var walk func(prefix string, i int)
	walk = func(prefix string, i int) {
		if i == len(parts) {
			check(prefix)
			return
		}
		for _, p := range parts[i] {
			walk(prefix+p, i+1)
		}
	}
	walk("", 0)

	const alphabet = "aAz09._-/:@[]+=é"
	r := rand.New(rand.NewPCG(1, 2))
	runes := []rune(alphabet)
	for range 200000 {
		n := 1 + r.IntN(12)
		var b strings.Builder
		for range n {
			b.WriteRune(runes[r.IntN(len(runes))])
		}
		check(b.String())
	}
}

func TestImageProblemDoesNotAllocateForValidReferences(t *testing.T) {
	ref := "registry.example.com:443/team/app:v1@sha256:" + strings.Repeat("0123456789abcdef", 4)
	if p := imageProblem(ref); p != "" {
		t.Fatal(p)
	}
	if n := testing.AllocsPerRun(100, func() { imageProblem(ref) }); n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}
