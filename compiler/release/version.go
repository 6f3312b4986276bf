package release

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/skali-dev/studio/compiler/internal/check"
)

// version is a manager or release version, major.minor.patch.
type version [3]int

// parseVersion reads a semantic version; ok is false when s is not one.
func parseVersion(s string) (version, bool) {
	m := check.Semver.FindStringSubmatch(s)
	if m == nil {
		return version{}, false
	}
	var v version
	for i := range 3 {
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return version{}, false
		}
		v[i] = n
	}
	return v, true
}

func (v version) less(w version) bool {
	for i := range 3 {
		if v[i] != w[i] {
			return v[i] < w[i]
		}
	}
	return false
}

func (v version) String() string {
	return strconv.Itoa(v[0]) + "." + strconv.Itoa(v[1]) + "." + strconv.Itoa(v[2])
}

// constraintTermRE is one term of a version constraint: an optional
// operator and a version of one to three numeric parts (x or * allowed as
// wildcards), such as >=2.30, <2.0.0, ~1.4 or 1.x.
var constraintTermRE = regexp.MustCompile(`^(>=|<=|!=|==|>|<|=|~>|~|\^)?\s*v?(\*|x|X|[0-9]+)(\.(\*|x|X|[0-9]+)){0,2}(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// validConstraint accepts the constraint spellings the reference uses
// (">=2.30", ">=1.0.0 <2.0.0"): terms separated by spaces or commas, and
// alternatives separated by ||. A lone * means any version.
func validConstraint(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" {
		return false
	}
	for _, alt := range strings.Split(s, "||") {
		alt = strings.TrimSpace(alt)
		if alt == "" {
			return false
		}
		// Join an operator separated from its version by a space (">= 2").
		fields := strings.FieldsFunc(alt, func(r rune) bool { return r == ' ' || r == ',' })
		var terms []string
		for i := 0; i < len(fields); i++ {
			f := fields[i]
			if strings.Trim(f, "<>=!~^") == "" && i+1 < len(fields) {
				f += fields[i+1]
				i++
			}
			terms = append(terms, f)
		}
		for _, t := range terms {
			if !constraintTermRE.MatchString(t) {
				return false
			}
		}
	}
	return true
}
