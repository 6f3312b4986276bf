// Package check holds what the checkers of every manifest kind share
// whatever their format: skali.yaml in package compiler, release manifests
// and secret schemas in compiler/release (YAML), agent recipes and plans in
// compiler/recipe (TOML). It builds diagnostic paths, words the messages
// each kind gives for the same mistake (an unknown key, a missing one, a
// value outside a list or a range) and names the shapes they all accept,
// so a diagnostic reads the same whichever document it is about.
//
// Reading values stays with each format: a YAML node and a TOML value type
// their scalars differently, and forcing them into one reader would change
// what each accepts.
package check

import (
	"regexp"
	"strconv"
	"strings"
)

// Join appends a key to a dotted diagnostic path; the key alone is the
// path of a top-level key.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Index appends a list index to a diagnostic path, as in ports[0].
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// QuoteList renders allowed values as `a`, `b` or `c` for messages.
func QuoteList(words []string) string {
	var b strings.Builder
	for i, w := range words {
		switch {
		case i == 0:
		case i == len(words)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteByte('`')
		b.WriteString(w)
		b.WriteByte('`')
	}
	return b.String()
}

// MaxSuggestCandidates is the most candidates Closest weighs: suggestions
// are bounded so that a hostile manifest of thousands of long names cannot
// make them quadratic, and a caller listing the names that exist instead
// lists no more than this.
const MaxSuggestCandidates = 64

// maxSuggestLength is the longest word or candidate Closest weighs.
const maxSuggestLength = 128

// Closest returns the candidate nearest to word by edit distance when it is
// close enough to be a plausible typo, or "".
func Closest(word string, candidates []string) string {
	if len(candidates) > MaxSuggestCandidates || len(word) > maxSuggestLength {
		return ""
	}
	best, bestDist := "", -1
	lw := strings.ToLower(word)
	for _, c := range candidates {
		if len(c) > maxSuggestLength {
			continue
		}
		d := editDistance(lw, strings.ToLower(c))
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := len(word) / 2
	if limit < 2 {
		limit = 2
	}
	if bestDist < 0 || bestDist > limit {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Suggestion is what follows "unknown field `word`": the known name word
// is probably a typo of ("; did you mean `name`?"), else every known name
// after listed, which says what they are ("; allowed fields are `a` or
// `b`" for listed "allowed fields").
func Suggestion(word string, known []string, listed string) string {
	if s := Closest(word, known); s != "" {
		return "; did you mean `" + s + "`?"
	}
	return "; " + listed + " are " + QuoteList(known)
}

// Missing words a required key that is absent: noun is what the document
// calls its keys ("field", "key"), what says what the key holds, if not "".
func Missing(noun, key, what string) string {
	msg := "missing required " + noun + " `" + key + "`"
	if what != "" {
		msg += ": " + what
	}
	return msg
}

// NotOneOf words a value outside an enumeration, suggesting the allowed
// value it is probably a typo of.
func NotOneOf(s string, allowed []string) string {
	msg := "`" + s + "` is not one of " + QuoteList(allowed)
	if m := Closest(s, allowed); m != "" {
		msg += "; did you mean `" + m + "`?"
	}
	return msg
}

// OutOfRange says which integers a field accepts, given the lowest and
// highest it allows and the one it got; a bound of 2^53 or more is "no
// upper bound".
func OutOfRange(lo, hi, got int64) string {
	g := ", got " + strconv.FormatInt(got, 10)
	switch {
	case hi >= 1<<53 && lo == 0:
		return "must not be negative" + g
	case hi >= 1<<53:
		return "must be at least " + strconv.FormatInt(lo, 10) + g
	}
	return "must be between " + strconv.FormatInt(lo, 10) + " and " + strconv.FormatInt(hi, 10) + g
}

// Semver matches a semantic version such as 1.4.2, v2.0.0-rc.1 or
// 1.0.0+build.5; submatches 1 to 3 are its major, minor and patch numbers.
var Semver = regexp.MustCompile(`^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
