package compiler

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file exports the few pieces of the skali.yaml checker that the other
// manifest kinds (sub-packages of compiler) share, so every kind parses YAML
// under the same limits and words its diagnostics the same way.

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

// QuoteList renders allowed values as `a`, `b` or `c` for messages.
func QuoteList(words []string) string { return quoteList(words) }

// Closest returns the candidate nearest to word when it is close enough to
// be a plausible typo, or "".
func Closest(word string, candidates []string) string { return closest(word, candidates) }

// ResolveAlias follows YAML alias nodes to the node they name.
func ResolveAlias(n *yaml.Node) *yaml.Node { return resolve(n) }

// KindName names a node's type for "expected X, got Y" messages ("a
// mapping", "a list", "an integer", ...), as every kind words them.
func KindName(n *yaml.Node) string { return kindName(n) }
