package compiler

import (
	"maps"
	"slices"
	"sort"
)

// ValueContract derives the value contract of a compiled definition, by the
// rule Compile applies to the source: a ${NAME} without an inline default in
// an application's environment, a route domain or alias, or a bucket route
// domain makes NAME required; a name used only with defaults is optional
// with its default. Pages and runs read stored definitions, so they use this
// and never recompile a source.
func (d *Definition) ValueContract() ValueContract {
	vc := ValueContract{Required: []string{}, Optional: map[string]string{}}
	if d == nil {
		return vc
	}
	required := map[string]bool{}
	defaults := map[string]string{}
	scan := func(s string) {
		refs, _ := scanValueRefs(s, nil)
		for _, r := range refs {
			if !r.hasDefault {
				required[r.name] = true
			} else if _, ok := defaults[r.name]; !ok {
				defaults[r.name] = r.def
			}
		}
	}
	for _, an := range slices.Sorted(maps.Keys(d.Applications)) {
		a := d.Applications[an]
		for _, k := range slices.Sorted(maps.Keys(a.Environment)) {
			scan(a.Environment[k])
		}
		for _, rn := range slices.Sorted(maps.Keys(a.Routes)) {
			rt := a.Routes[rn]
			scan(rt.Domain)
			for _, al := range rt.Aliases {
				scan(al)
			}
		}
	}
	for _, bn := range slices.Sorted(maps.Keys(d.Buckets)) {
		if r := d.Buckets[bn].Route; r != nil {
			scan(r.Domain)
		}
	}
	for n := range required {
		vc.Required = append(vc.Required, n)
	}
	sort.Strings(vc.Required)
	for n, def := range defaults {
		if !required[n] {
			vc.Optional[n] = def
		}
	}
	return vc
}
