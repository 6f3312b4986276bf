package runs

import (
	"maps"
	"regexp"
	"slices"
	"sort"

	"github.com/skali-dev/studio/compiler"
)

// valueReference matches ${NAME} and ${NAME:-default}.
var valueReference = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)(:-([^}]*))?\}`)

// ContractOf derives the value contract of a stored definition: the same
// rule the compiler applies to the source (a reference without a default
// makes a value required), read from the fields that take expressions
// (application environment, route domains and aliases, bucket route
// domains). Pages and runs use it so that they never recompile a source.
func ContractOf(def *compiler.Definition) compiler.ValueContract {
	vc := compiler.ValueContract{Required: []string{}, Optional: map[string]string{}}
	if def == nil {
		return vc
	}
	required := map[string]bool{}
	defaults := map[string]string{}
	scan := func(s string) {
		for _, m := range valueReference.FindAllStringSubmatch(s, -1) {
			if m[2] == "" {
				required[m[1]] = true
			} else if _, ok := defaults[m[1]]; !ok {
				defaults[m[1]] = m[3]
			}
		}
	}
	for _, a := range def.Applications {
		for _, k := range slices.Sorted(maps.Keys(a.Environment)) {
			scan(a.Environment[k])
		}
		for _, rt := range a.Routes {
			scan(rt.Domain)
			for _, al := range rt.Aliases {
				scan(al)
			}
		}
	}
	for _, b := range def.Buckets {
		if b.Route != nil {
			scan(b.Route.Domain)
		}
	}
	for n := range required {
		vc.Required = append(vc.Required, n)
	}
	sort.Strings(vc.Required)
	for n, d := range defaults {
		if !required[n] {
			vc.Optional[n] = d
		}
	}
	return vc
}
