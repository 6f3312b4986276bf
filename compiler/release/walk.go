package release

import (
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/internal/check"
)

// checker walks one document's node tree and collects diagnostics and the
// rules it could not decide from the document alone.
type checker struct {
	diags []compiler.Diagnostic
	notes []compiler.NotChecked
}

// field is one key/value pair of a mapping.
type field struct {
	key *yaml.Node
	val *yaml.Node
}

// object is a checked mapping: its node, the key that names it (nil for the
// document root and list items) and its known fields.
type object struct {
	node   *yaml.Node
	key    *yaml.Node
	path   string
	fields []field
}

func (o object) get(k string) *yaml.Node {
	for _, f := range o.fields {
		if f.key.Value == k {
			return compiler.ResolveAlias(f.val)
		}
	}
	return nil
}

func (o object) keyOf(k string) *yaml.Node {
	for _, f := range o.fields {
		if f.key.Value == k {
			return f.key
		}
	}
	return nil
}

func (o object) at(k string) string { return check.Join(o.path, k) }

// anchor is where a diagnostic about o as a whole goes: the key naming it,
// else the mapping itself.
func (o object) anchor() *yaml.Node {
	if o.key != nil {
		return o.key
	}
	return o.node
}

func (c *checker) add(sev compiler.Severity, n *yaml.Node, path, msg string) {
	line, col := 1, 1
	if n != nil {
		line, col = n.Line, n.Column
	}
	c.diags = append(c.diags, compiler.Diagnostic{Severity: sev, Path: path, Line: line, Column: col, Message: msg})
}

func (c *checker) errorf(n *yaml.Node, path, msg string) { c.add(compiler.SeverityError, n, path, msg) }

func (c *checker) warnf(n *yaml.Node, path, msg string) {
	c.add(compiler.SeverityWarning, n, path, msg)
}

func (c *checker) notChecked(n *yaml.Node, path, msg string) {
	line, col := 1, 1
	if n != nil {
		line, col = n.Line, n.Column
	}
	c.notes = append(c.notes, compiler.NotChecked{Path: path, Line: line, Column: col, Message: msg})
}

// where picks the node a diagnostic about a value goes to: a block mapping
// or list is reported at the key naming it, like skali.yaml diagnostics.
func where(key, val *yaml.Node) *yaml.Node {
	val = compiler.ResolveAlias(val)
	if val == nil {
		return key
	}
	if key != nil && (val.Kind == yaml.MappingNode || val.Kind == yaml.SequenceNode) && val.Style&yaml.FlowStyle == 0 {
		return key
	}
	return val
}

func isNull(n *yaml.Node) bool {
	n = compiler.ResolveAlias(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// entries returns the pairs of a mapping as skali.yaml reads them (see
// compiler.MappingEntries: duplicate keys reported, merge keys expanded).
// A null value is an empty mapping. ok is false, after a diagnostic, when
// n is not a mapping.
func (c *checker) entries(key, n *yaml.Node, path string) ([]field, bool) {
	n = compiler.ResolveAlias(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		c.errorf(where(key, n), path, "expected a mapping, got "+compiler.KindName(n))
		return nil, false
	}
	pairs, diags := compiler.MappingEntries(n, path)
	c.diags = append(c.diags, diags...)
	fs := make([]field, len(pairs))
	for i, p := range pairs {
		fs[i] = field{key: p.Key, val: p.Value}
	}
	return fs, true
}

// object checks that n is a mapping of known fields, reporting every
// unknown key at the key itself with the closest known one.
func (c *checker) object(key, n *yaml.Node, path string, known []string) (object, bool) {
	fs, ok := c.entries(key, n, path)
	o := object{node: compiler.ResolveAlias(n), key: key, path: path}
	if !ok {
		return o, false
	}
	for _, f := range fs {
		if slices.Contains(known, f.key.Value) {
			o.fields = append(o.fields, f)
			continue
		}
		c.unknownField(f.key, check.Join(path, f.key.Value), known)
	}
	return o, true
}

func (c *checker) unknownField(k *yaml.Node, path string, known []string) {
	c.errorf(k, path, "unknown field `"+k.Value+"`"+check.Suggestion(k.Value, known, "allowed fields"))
}

// missing reports a required field absent from o at the key naming o
// (DESIGN.md: "a missing required key is reported at the line of its
// parent").
func (c *checker) missing(o object, k, what string) {
	c.errorf(o.anchor(), o.at(k), check.Missing("field", k, what))
}

// list returns the items of a sequence; null is an empty list.
func (c *checker) list(key, n *yaml.Node, path string) ([]*yaml.Node, bool) {
	n = compiler.ResolveAlias(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		c.errorf(where(key, n), path, "expected a list, got "+compiler.KindName(n))
		return nil, false
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, it := range n.Content {
		out[i] = compiler.ResolveAlias(it)
	}
	return out, true
}

// str returns a scalar's text. Like the manager's decoder, any non-null
// scalar reads as a string where a string is expected; fields whose
// reference insists on quotes (mode, owner) check the tag themselves.
func (c *checker) str(n *yaml.Node, path string) (string, bool) {
	n = compiler.ResolveAlias(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		c.errorf(n, path, "expected a string, got "+compiler.KindName(n))
		return "", false
	}
	return n.Value, true
}

// nonEmpty is str that also refuses an empty string.
func (c *checker) nonEmpty(n *yaml.Node, path string) (string, bool) {
	s, ok := c.str(n, path)
	if ok && strings.TrimSpace(s) == "" {
		c.errorf(n, path, "must not be empty")
		return "", false
	}
	return s, ok
}

func (c *checker) boolean(n *yaml.Node, path string) (bool, bool) {
	n = compiler.ResolveAlias(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		c.errorf(n, path, "expected true or false, got "+compiler.KindName(n))
		return false, false
	}
	return n.Value == "true", true
}

func (c *checker) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	n = compiler.ResolveAlias(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		c.errorf(n, path, "expected an integer, got "+compiler.KindName(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		c.errorf(n, path, "integer out of range")
		return 0, false
	}
	if v < lo || v > hi {
		c.errorf(n, path, check.OutOfRange(lo, hi, v))
		return v, false
	}
	return v, true
}

// stringList checks a list of non-empty strings, refusing duplicates.
func (c *checker) stringList(key, n *yaml.Node, path string) ([]string, bool) {
	items, ok := c.list(key, n, path)
	if !ok {
		return nil, false
	}
	var out []string
	seen := map[string]bool{}
	for i, it := range items {
		s, ok := c.nonEmpty(it, check.Index(path, i))
		if !ok {
			continue
		}
		if seen[s] {
			c.errorf(it, check.Index(path, i), "`"+s+"` is listed twice")
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, true
}

// duration checks a Go duration such as 90s, 10m or 2160h that is more
// than zero.
func (c *checker) duration(n *yaml.Node, path string) (time.Duration, bool) {
	s, ok := c.str(n, path)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		c.errorf(n, path, "`"+s+"` is not a duration; write a number with a unit, such as `90s`, `10m` or `2h`")
		return 0, false
	}
	if d <= 0 {
		c.errorf(n, path, "must be longer than zero")
		return 0, false
	}
	return d, true
}

func (c *checker) enum(n *yaml.Node, path string, allowed []string) (string, bool) {
	s, ok := c.str(n, path)
	if !ok {
		return "", false
	}
	if !slices.Contains(allowed, s) {
		c.errorf(n, path, check.NotOneOf(s, allowed))
		return s, false
	}
	return s, true
}
