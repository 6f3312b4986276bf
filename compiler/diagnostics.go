package compiler

import (
	"fmt"
	"sort"

	"go.yaml.in/yaml/v3"
)

// Severity says whether a diagnostic blocks compilation.
type Severity string

const (
	// SeverityError marks a problem that makes the manifest invalid.
	SeverityError Severity = "error"
	// SeverityWarning marks a manifest that compiles but that a deploy will refuse
	// or that deserves attention.
	SeverityWarning Severity = "warning"
)

// Diagnostic is one problem found in a manifest, positioned at the YAML node it
// concerns. Line and Column are 1-based.
type Diagnostic struct {
	Severity Severity `json:"severity"`
	Path     string   `json:"path"`
	Line     int      `json:"line"`
	Column   int      `json:"column"`
	Message  string   `json:"message"`
}

// String formats the diagnostic as LINE:COLUMN: SEVERITY: PATH: MESSAGE.
func (d Diagnostic) String() string {
	if d.Path == "" {
		return fmt.Sprintf("%d:%d: %s: %s", d.Line, d.Column, d.Severity, d.Message)
	}
	return fmt.Sprintf("%d:%d: %s: %s: %s", d.Line, d.Column, d.Severity, d.Path, d.Message)
}

// sortDiagnostics orders diagnostics by position, then path, and drops exact
// duplicates, so that the same problem reached twice (for example through a
// YAML alias) is reported once.
func sortDiagnostics(ds []Diagnostic) []Diagnostic {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Severity != b.Severity {
			return a.Severity < b.Severity
		}
		return a.Message < b.Message
	})
	out := ds[:0]
	for i, d := range ds {
		if i > 0 && d == ds[i-1] {
			continue
		}
		out = append(out, d)
	}
	return out
}

// checker walks one manifest's node tree and collects diagnostics.
type checker struct {
	diags []Diagnostic
	exprs *expressionIndex
	// root is the document's root mapping, used to find the key that names
	// an object when a diagnostic must point at it (see missing).
	root *yaml.Node
	// keyIndex caches key positions of large mappings for mappingLookup.
	keyIndex map[*yaml.Node]map[string]int
}

func (c *checker) add(sev Severity, n *yaml.Node, path pathT, msg string) {
	line, col := 1, 1
	if n != nil {
		line, col = n.Line, n.Column
		// A block mapping or list starts on the line after its key, at its
		// first entry; a problem with the field as a whole belongs on the
		// line that names it (`build:`), as a missing key does (see missing).
		if (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && n.Style&yaml.FlowStyle == 0 {
			if k := c.lookupKey(c.root, path.String(), n); k != nil {
				line, col = k.Line, k.Column
			}
		}
	}
	c.diags = append(c.diags, Diagnostic{Severity: sev, Path: path.String(), Line: line, Column: col, Message: msg})
}

func (c *checker) errorf(n *yaml.Node, path pathT, msg string) { c.add(SeverityError, n, path, msg) }

func (c *checker) warnf(n *yaml.Node, path pathT, msg string) { c.add(SeverityWarning, n, path, msg) }
