package compiler

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file exports the few pieces of the skali.yaml checker that the other
// manifest kinds (sub-packages of compiler) share, so every kind parses and
// walks YAML under the same limits and rules. The wording they share,
// whatever their format, is in compiler/internal/check.

// NotChecked is a rule that cannot be decided from the document alone (for
// example that a declared file exists in the bundle). It is reported, never
// silently passed, and does not make a document invalid.
type NotChecked struct {
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

// ParseYAML parses src as a single YAML document under the limits Compile
// applies (MaxManifestSize, MaxDepth, MaxAliases, MaxExpandedNodes) and
// returns its root mapping, or nil with the diagnostics saying why not.
// what names the document in messages ("release manifest").
func ParseYAML(src []byte, what string) (*yaml.Node, []Diagnostic) {
	c := &checker{}
	root := c.parseDocument(src)
	for i, d := range c.diags {
		switch {
		case strings.HasPrefix(d.Message, "manifest is empty"):
			c.diags[i].Message = "the " + what + " is empty"
		case strings.HasPrefix(d.Message, "the manifest must be a mapping"):
			_, got, _ := strings.Cut(d.Message, ", got ")
			c.diags[i].Message = "the " + what + " must be a mapping of top-level fields, got " + got
		case strings.HasPrefix(d.Message, "manifest "):
			c.diags[i].Message = "the " + what + strings.TrimPrefix(d.Message, "manifest")
		}
	}
	return root, c.diags
}

// SortDiagnostics orders diagnostics by line, column and path and drops
// exact duplicates, as Compile does.
func SortDiagnostics(ds []Diagnostic) []Diagnostic {
	ds = sortDiagnostics(ds)
	if ds == nil {
		ds = []Diagnostic{}
	}
	return ds
}

// ResolveAlias follows YAML alias nodes to the node they name.
func ResolveAlias(n *yaml.Node) *yaml.Node { return resolve(n) }

// KindName names a node's type for "expected X, got Y" messages ("a
// mapping", "a list", "an integer", ...), as every kind words them.
func KindName(n *yaml.Node) string { return kindName(n) }

// Field is one key/value pair of a YAML mapping, as MappingEntries returns
// it.
type Field struct {
	Key   *yaml.Node
	Value *yaml.Node
}

// MappingEntries returns the pairs of the YAML mapping n the way Compile
// reads every mapping of skali.yaml: a key that is not a plain string or
// that appears twice is reported and left out, and merge keys (<<) are
// expanded, explicit keys winning over merged ones and earlier merge
// sources over later ones. path names n in the diagnostics. The caller
// checks that n is a mapping, in its own words, before calling.
func MappingEntries(n *yaml.Node, path string) ([]Field, []Diagnostic) {
	c := &checker{}
	fs, _ := c.entries(n, pathT{base: path})
	out := make([]Field, len(fs))
	for i, f := range fs {
		out[i] = Field{Key: f.key, Value: f.val}
	}
	return out, c.diags
}
