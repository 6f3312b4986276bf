package views

import (
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/kinds"
	"github.com/skali-dev/studio/compiler/release"
)

// KindOption is one choice of the validator's kind selector.
type KindOption struct {
	Value    string
	Label    string
	Selected bool
}

// KindOptions lists "Detect automatically" and every kind, marking the
// selected one ("" for detection).
func KindOptions(selected string) []KindOption {
	opts := []KindOption{{Value: "", Label: "Detect automatically", Selected: selected == ""}}
	for _, k := range kinds.All {
		opts = append(opts, KindOption{Value: string(k), Label: k.Label(), Selected: selected == string(k)})
	}
	return opts
}

// NotCheckedItem is a rule that needs more than the pasted document.
type NotCheckedItem struct {
	Diagnostic
}

// NewKindReport builds the report of src validated as res.Kind: for a
// skali.yaml manifest the report NewManifestReport builds, for the other
// kinds the same diagnostics and source with a summary that fits the kind
// and the rules that were not checked.
func NewKindReport(src []byte, res *kinds.Result) ManifestReport {
	var r ManifestReport
	if res.Skali != nil {
		r = NewManifestReport(src, res.Skali)
	} else {
		source := NewManifestSource(src, res.Diagnostics)
		anchors := make(map[int]string, len(source.Lines))
		for _, l := range source.Lines {
			anchors[l.Number] = l.Anchor
		}
		r = ManifestReport{Valid: res.Valid(), Diagnostics: newDiagnosticList(res.Diagnostics, anchors), Source: source}
		for _, n := range res.NotChecked {
			d := newDiagnostic(compiler.Diagnostic{Severity: compiler.SeverityWarning, Path: n.Path, Line: n.Line, Column: n.Column, Message: n.Message})
			d.Anchor = anchors[n.Line]
			r.NotChecked = append(r.NotChecked, NotCheckedItem{d})
		}
		if r.Valid {
			switch {
			case res.Release != nil:
				s := res.Release.Summary
				r.Release = &s
			case res.Secrets != nil:
				r.Secrets = &SecretSchemaSummary{Secrets: res.Secrets.Secrets}
			case res.Recipe != nil && res.Recipe.Recipe != nil:
				s := *res.Recipe.Recipe
				r.Recipe = &s
			case res.Recipe != nil && res.Recipe.Plan != nil:
				s := *res.Recipe.Plan
				r.Plan = &s
			}
		}
	}
	r.Kind = string(res.Kind)
	r.KindLabel = res.Kind.Label()
	return r
}

// SecretSchemaSummary describes a valid secret schema.
type SecretSchemaSummary struct {
	Secrets []release.SecretSummary
}

// ValidName is the verdict's headline for a valid document of the kind.
func (r ManifestReport) ValidName() string {
	switch kinds.Kind(r.Kind) {
	case kinds.Release:
		return "Valid release manifest"
	case kinds.ReleaseSecrets:
		return "Valid secret schema"
	case kinds.Recipe:
		return "Valid recipe"
	case kinds.Plan:
		return "Valid plan"
	}
	return "Valid manifest"
}

// Title is what the verdict names a valid document by: its name and
// version where it has them.
func (r ManifestReport) Title() string {
	switch {
	case r.Summary != nil:
		return r.Summary.Name
	case r.Release != nil:
		return joinNonEmpty(r.Release.Name, r.Release.Version)
	case r.Recipe != nil:
		return joinNonEmpty(r.Recipe.Name, r.Recipe.Version)
	}
	return ""
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + " " + b
}

// kindSummaryShown reports whether the report has a summary to show in
// place of the diagnostics list.
func (r ManifestReport) kindSummaryShown() bool {
	return r.Release != nil || r.Secrets != nil || r.Recipe != nil || r.Plan != nil
}
