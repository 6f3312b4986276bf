package compiler

import (
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// valueRef is one ${NAME} or ${NAME:-default} occurrence.
type valueRef struct {
	name       string
	def        string
	hasDefault bool
}

// scanValueRefs finds the ${...} references in an expression-bearing string.
// problem is non-empty when the string holds a malformed reference; it never
// quotes the string itself, which may be a secret.
func scanValueRefs(s string, refs []valueRef) ([]valueRef, string) {
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			return refs, ""
		}
		s = s[i+2:]
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return refs, "has a `${` without a closing `}`; write ${NAME} or ${NAME:-default}"
		}
		body := s[:end]
		s = s[end+1:]
		name, def, hasDefault := strings.Cut(body, ":-")
		if !IsValueName(name) {
			if hasDefault || !strings.ContainsAny(name, ":-=?+") {
				return refs, "has a malformed value reference: names inside ${...} must match ^[A-Z_][A-Z0-9_]*$"
			}
			return refs, "has an unsupported ${...} form; only ${NAME} and ${NAME:-default} are allowed"
		}
		if strings.Contains(def, "${") {
			return refs, "has a nested `${` inside an inline default"
		}
		refs = append(refs, valueRef{name: name, def: def, hasDefault: hasDefault})
	}
}

// serviceOutputs lists the outputs each managed service kind provides.
var serviceOutputs = map[string][]string{
	"databases": {"host", "port", "name", "username", "password", "url"},
	"buckets":   {"endpoint", "internal_endpoint", "name", "region", "access_key", "secret_key"},
}

// serviceRef is a parsed {{collection.key.output}} reference.
type serviceRef struct {
	collection, key, output string
}

// parseServiceRef parses a whole-value service output. ok is false when s
// is not exactly one {{...}}.
func parseServiceRef(s string) (serviceRef, bool) {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "{{") || !strings.HasSuffix(t, "}}") || len(t) < 4 {
		return serviceRef{}, false
	}
	body := strings.TrimSpace(t[2 : len(t)-2])
	if strings.Contains(body, "{{") || strings.Contains(body, "}}") {
		return serviceRef{}, false
	}
	parts := strings.Split(body, ".")
	if len(parts) != 3 {
		return serviceRef{collection: body}, true
	}
	return serviceRef{collection: parts[0], key: parts[1], output: parts[2]}, true
}

// expressionIndex collects ${NAME} uses across the manifest for the value
// contract and the conflicting-default rule.
type expressionIndex struct {
	uses     []refUse
	required map[string]bool
	defaults map[string]string
}

// refUse is one reference and the node it was written in.
type refUse struct {
	node *yaml.Node
	path pathT
	ref  valueRef
}

func newExpressionIndex() *expressionIndex {
	return &expressionIndex{required: map[string]bool{}, defaults: map[string]string{}}
}

// checkExpression validates a field that accepts ${NAME} expressions (but not
// service outputs) and records its references. quote says whether the field's
// text may appear in messages.
func (c *checker) checkExpression(n *yaml.Node, path pathT, s string) bool {
	if strings.Contains(s, "{{") {
		c.errorf(n, path, "service outputs ({{...}}) are allowed only as a whole value in an application's environment")
		return false
	}
	refs, problem := scanValueRefs(s, nil)
	if problem != "" {
		c.errorf(n, path, "expression "+problem)
		return false
	}
	c.recordRefs(n, path, refs)
	return true
}

// recordRefs adds references to the value contract. Conflicting defaults
// are checked once every reference is known (see finishRefs), so the
// conflict is reported where it is written second in the file, not where
// the checker happens to reach it second.
func (c *checker) recordRefs(n *yaml.Node, path pathT, refs []valueRef) {
	for _, r := range refs {
		c.exprs.uses = append(c.exprs.uses, refUse{node: n, path: path, ref: r})
	}
}

// finishRefs builds the value contract from every recorded reference in
// file order and reports a second, different inline default for the same
// name at the later of the two.
func (c *checker) finishRefs() {
	x := c.exprs
	before := func(a, b refUse) bool {
		if a.node.Line != b.node.Line {
			return a.node.Line < b.node.Line
		}
		return a.node.Column < b.node.Column
	}
	sorted := true
	for i := 1; i < len(x.uses); i++ {
		if before(x.uses[i], x.uses[i-1]) {
			sorted = false
			break
		}
	}
	if !sorted {
		sort.SliceStable(x.uses, func(i, j int) bool { return before(x.uses[i], x.uses[j]) })
	}
	for _, u := range x.uses {
		r := u.ref
		if !r.hasDefault {
			x.required[r.name] = true
			continue
		}
		if prev, ok := x.defaults[r.name]; ok {
			if prev != r.def {
				c.errorf(u.node, u.path, "value `"+r.name+"` has two different inline defaults; use the same default everywhere or declare it once")
			}
			continue
		}
		x.defaults[r.name] = r.def
	}
	x.uses = nil
}

// ValueContract is the set of project values a manifest needs, derived only
// from its ${NAME} references: a name used anywhere without an inline
// default is required; a name always used with a default is optional.
type ValueContract struct {
	Required []string          `json:"required"`
	Optional map[string]string `json:"optional"`
}

func (x *expressionIndex) contract() ValueContract {
	vc := ValueContract{Required: []string{}, Optional: map[string]string{}}
	for name := range x.required {
		vc.Required = append(vc.Required, name)
	}
	sort.Strings(vc.Required)
	for name, def := range x.defaults {
		if !x.required[name] {
			vc.Optional[name] = def
		}
	}
	return vc
}

// ExpandValues replaces ${NAME} and ${NAME:-default} in an expression-bearing
// string with values. Following shell semantics of `:-`, the default is used
// when the name has no value or an empty one. It returns the expanded string
// and, sorted and without repeats, the names that had neither a value nor a
// default; those references expand to the empty string. Malformed references
// are left as written.
func ExpandValues(expr string, values map[string]string) (string, []string) {
	return expandValues(expr, values, nil)
}

// ValueRefs returns the names of the values expr references with ${NAME}
// or ${NAME:-default}, in order of first appearance and without repeats;
// malformed references are not names.
func ValueRefs(expr string) []string {
	var names []string
	expandValues(expr, nil, func(name string) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	})
	return names
}

// expandValues implements ExpandValues, calling ref (when not nil) with the
// name of each well-formed reference.
func expandValues(expr string, values map[string]string, ref func(name string)) (string, []string) {
	var b strings.Builder
	var missing []string
	s := expr
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			b.WriteString(s)
			break
		}
		body := s[i+2 : i+end]
		name, def, hasDefault := strings.Cut(body, ":-")
		if !IsValueName(name) {
			b.WriteString(s[:i+end+1])
			s = s[i+end+1:]
			continue
		}
		if ref != nil {
			ref(name)
		}
		b.WriteString(s[:i])
		v, ok := values[name]
		switch {
		case ok && (v != "" || !hasDefault):
			b.WriteString(v)
		case hasDefault:
			b.WriteString(def)
		default:
			if !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
		}
		s = s[i+end+1:]
	}
	sort.Strings(missing)
	return b.String(), missing
}
