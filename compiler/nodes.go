package compiler

// Walking the YAML node tree: aliases, mappings as ordered fields with
// duplicate and merge-key handling, objects with known fields.

import (
	"slices"

	"github.com/skali-dev/studio/compiler/internal/check"
	"go.yaml.in/yaml/v3"
)

// field is one key/value pair of a YAML mapping.
type field struct {
	key *yaml.Node
	val *yaml.Node
}

// resolve follows alias nodes to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// kindName names a node's type for "expected X, got Y" messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!str":
			return "a string"
		}
		return "a scalar"
	}
	return "an unsupported node"
}

// entries returns the pairs of a mapping node, reporting duplicate keys at
// their second occurrence and expanding YAML merge keys (<<). It reports a
// type error and returns ok=false when n is not a mapping. A null node (an
// empty value such as `ports:`) is an empty mapping.
func (c *checker) entries(n *yaml.Node, path pathT) (fs []field, ok bool) {
	n = resolve(n)
	if n == nil {
		return nil, true
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		c.errorf(n, path, "expected a mapping, got "+kindName(n))
		return nil, false
	}
	fs = make([]field, 0, len(n.Content)/2)
	var merged []field
	// Small mappings (nearly all of them) are scanned; large ones get a set,
	// so a mapping of many thousand keys is not quadratic.
	var seen map[string]bool
	if len(n.Content) > 64 {
		seen = make(map[string]bool, len(n.Content)/2)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			c.errorf(k, path, "mapping keys must be plain strings, got "+kindName(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			merged = append(merged, c.mergeSources(v, path)...)
			continue
		}
		dup := false
		if seen != nil {
			dup = seen[k.Value]
			seen[k.Value] = true
		} else {
			for _, f := range fs {
				if f.key.Value == k.Value {
					dup = true
					break
				}
			}
		}
		if dup {
			c.errorf(k, join(path, k.Value), "duplicate key `"+k.Value+"`; each key may appear once in a mapping")
			continue
		}
		fs = append(fs, field{key: k, val: v})
	}
	for _, m := range merged {
		present := false
		if seen != nil {
			present = seen[m.key.Value]
		} else {
			for _, f := range fs {
				if f.key.Value == m.key.Value {
					present = true
					break
				}
			}
		}
		if !present {
			fs = append(fs, m)
			if seen != nil {
				seen[m.key.Value] = true
			}
		}
	}
	return fs, true
}

// mergeSources returns the pairs a YAML merge key brings in: explicit keys win
// over merged ones, and earlier merge sources win over later ones.
func (c *checker) mergeSources(v *yaml.Node, path pathT) []field {
	v = resolve(v)
	var srcs []*yaml.Node
	switch v.Kind {
	case yaml.MappingNode:
		srcs = []*yaml.Node{v}
	case yaml.SequenceNode:
		srcs = v.Content
	default:
		c.errorf(v, path, "a merge key (<<) must name a mapping or a list of mappings")
		return nil
	}
	var out []field
	var seen map[string]bool
	for _, s := range srcs {
		s = resolve(s)
		if s.Kind != yaml.MappingNode {
			c.errorf(s, path, "a merge key (<<) must name a mapping or a list of mappings")
			continue
		}
		fs, _ := c.entries(s, path)
		for _, f := range fs {
			if seen[f.key.Value] {
				continue
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[f.key.Value] = true
			out = append(out, f)
		}
	}
	return out
}

// object is a mapping whose keys come from a fixed vocabulary.
type object struct {
	node   *yaml.Node
	path   pathT // materialised
	fields []field
}

// get returns the value node of key, or nil when absent.
func (o object) get(key string) *yaml.Node {
	for _, f := range o.fields {
		if f.key.Value == key {
			return resolve(f.val)
		}
	}
	return nil
}

// at returns the path of key inside the object.
func (o object) at(key string) pathT { return pathT{base: o.path.base, key: key} }

// object checks that n is a mapping with only known keys, reporting unknown
// keys with the closest known one. ok is false when n is not a mapping.
func (c *checker) object(n *yaml.Node, path pathT, known []string) (object, bool) {
	n = resolve(n)
	fs, ok := c.entries(n, path)
	o := object{node: n, path: path.materialize()}
	if !ok {
		return o, false
	}
	kept := fs[:0]
	for _, f := range fs {
		if slices.Contains(known, f.key.Value) {
			kept = append(kept, f)
			continue
		}
		c.unknownField(f.key, join(path, f.key.Value), known)
	}
	o.fields = kept
	return o, true
}

func (c *checker) unknownField(k *yaml.Node, path pathT, known []string) {
	c.errorf(k, path, "unknown field `"+k.Value+"`"+check.Suggestion(k.Value, known, "allowed fields"))
}

// missing reports a required key absent from o. DESIGN.md: "a missing
// required key is reported at the line of its parent", so the diagnostic sits
// on the key that names o (`http:` for a port without `port`); see parentKey.
func (c *checker) missing(o object, key, what string) {
	c.errorf(c.parentKey(o), o.at(key), check.Missing("field", key, what))
}
