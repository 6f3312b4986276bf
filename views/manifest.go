package views

import (
	"bytes"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/recipe"
	"github.com/skali-dev/studio/compiler/release"
	"github.com/skali-dev/studio/humanize"
)

// The manifest partials show what the compiler said about a pasted
// skali.yaml: a verdict, the list of diagnostics, the source with each
// diagnostic under its line, and for a valid manifest a summary of the
// compiled definition. Build them all at once with NewManifestReport and
// render with ManifestReportView, or render the parts on their own
// (ManifestVerdict, ManifestDiagnostics, ManifestSourceView,
// ManifestSummary). Source lines carry anchors L1, L2, ... so a page shows
// at most one ManifestSource.

// Severities of a Diagnostic as the views name them (also CSS classes).
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// MaxSourceLines bounds how many lines a ManifestSource lists; longer input
// (the compiler refuses anything over 1 MiB anyway) is not echoed as a listing.
const MaxSourceLines = 5000

// ManifestReport is everything the Studio shows about one compiled manifest.
type ManifestReport struct {
	// HeadlineOnly: the verdict says how many errors there are without
	// quoting the first (a form lists every one right under it).
	HeadlineOnly bool
	// Valid is true when the manifest has no error; warnings may remain.
	Valid       bool
	Diagnostics DiagnosticList
	Source      ManifestSource
	// Summary is nil unless the manifest is a valid skali.yaml.
	Summary *DefinitionSummary
	// Kind is the document's kind as `studio validate` names it
	// ("skali", "release", ...), and KindLabel how people read it.
	Kind      string
	KindLabel string
	// The summary of a valid document of another kind; at most one is set.
	Release *release.ManifestSummary
	Secrets *SecretSchemaSummary
	Recipe  *recipe.Summary
	Plan    *recipe.PlanSummary
	// NotChecked lists the rules that need more than the document.
	NotChecked []NotCheckedItem
}

// Diagnostic is one compiler diagnostic ready to display.
type Diagnostic struct {
	// Severity is SeverityError or SeverityWarning.
	Severity string
	Line     int
	Column   int
	// Path is the field's path, e.g. applications.web.routes.public.tls;
	// empty for problems of the whole document.
	Path    string
	Message string
	// Anchor is the id of the source line ("L14"), or "" when the line is
	// not listed (an empty or oversized manifest).
	Anchor string
}

// Href returns the link to the diagnostic's source line, or "" when there is none.
func (d Diagnostic) Href() string {
	if d.Anchor == "" {
		return ""
	}
	return "#" + d.Anchor
}

// MessagePart is a run of a diagnostic message; Code is true for a
// `quoted` word, which the views set in monospace.
type MessagePart struct {
	Text string
	Code bool
}

// Parts splits the message at its backquotes.
func (d Diagnostic) Parts() []MessagePart {
	fields := strings.Split(d.Message, "`")
	if len(fields)%2 == 0 {
		// An unpaired backquote: show the message as written.
		return []MessagePart{{Text: d.Message}}
	}
	parts := make([]MessagePart, 0, len(fields))
	for i, f := range fields {
		if f != "" {
			parts = append(parts, MessagePart{Text: f, Code: i%2 == 1})
		}
	}
	return parts
}

// Where returns "line:column".
func (d Diagnostic) Where() string {
	return strconv.Itoa(d.Line) + ":" + strconv.Itoa(d.Column)
}

// DiagnosticList is every diagnostic of a manifest, in source order.
type DiagnosticList struct {
	Items    []Diagnostic
	Errors   int
	Warnings int
}

// Headline says "2 errors, 1 warning", "1 warning" or "No problems".
func (l DiagnosticList) Headline() string {
	var parts []string
	if l.Errors > 0 {
		parts = append(parts, humanize.Count(l.Errors, "error", "errors"))
	}
	if l.Warnings > 0 {
		parts = append(parts, humanize.Count(l.Warnings, "warning", "warnings"))
	}
	if len(parts) == 0 {
		return "No problems"
	}
	return strings.Join(parts, ", ")
}

// ManifestSource is the pasted manifest, line by line, with each
// diagnostic attached to the line it concerns.
type ManifestSource struct {
	// MarksOnly marks the lines diagnostics point at without repeating
	// their messages (a form lists them once, above).
	MarksOnly bool
	Lines     []SourceLine
	// Omitted is true when the text was too long to list (see MaxSourceLines
	// and compiler.MaxManifestSize); Lines is then empty.
	Omitted bool
}

// SourceLine is one line of a manifest.
type SourceLine struct {
	Number int
	// Anchor is the line's id, "L" followed by its number.
	Anchor string
	// Segments is the line's text cut where diagnostics point, so the
	// token a diagnostic concerns can be underlined.
	Segments []SourceSegment
	// Severity is the worst severity of Notes, or "".
	Severity string
	// Notes are the diagnostics at this line, shown under it.
	Notes []Diagnostic
}

// Text returns the whole line.
func (l SourceLine) Text() string {
	var b strings.Builder
	for _, s := range l.Segments {
		b.WriteString(s.Text)
	}
	return b.String()
}

// SourceSegment is a run of a line's text; Mark is the severity of the
// diagnostic pointing at it, or "" for plain text.
type SourceSegment struct {
	Text string
	Mark string
}

// DefinitionSummary describes a valid manifest's compiled definition.
type DefinitionSummary struct {
	Name         string
	Description  string
	Hash         string
	Applications []ApplicationSummary
	Databases    []DatabaseSummary
	Buckets      []BucketSummary
	// Required are the value names without a default, sorted.
	Required []string
	// Optional are the value names with an inline default, sorted by name.
	Optional []OptionalValue
	// Warnings are the manifest's warnings (it compiles, but look at these).
	Warnings []Diagnostic
}

// ApplicationSummary is one application of a definition. It never holds
// environment values or build arguments: people paste secrets there.
type ApplicationSummary struct {
	Name string
	// Image is the image reference; empty when the application is built.
	Image string
	// Build is the source build; nil for an image.
	Build  *BuildSummary
	Ports  []PortSummary
	Routes []RouteSummary
	// Replicas is "2" for a fixed count or "2–5" for a range.
	Replicas string
	// Autoscaling is "CPU 70%" when the range autoscales, else "".
	Autoscaling string
	Volumes     []string
}

// BuildSummary is a source build, without its arguments.
type BuildSummary struct {
	// Context is relative to the project root, e.g. ".".
	Context    string
	Dockerfile string
	// Target is the build stage, or "".
	Target string
}

// PortSummary is one named container port.
type PortSummary struct {
	Name     string
	Port     int
	Protocol string
}

// RouteSummary is one route of an application.
type RouteSummary struct {
	Name string
	// Domain is the hostname expression as written, e.g. ${APP_DOMAIN}.
	Domain string
	Path   string
	// Port is the port name or number, with the container port it reaches.
	Port    string
	TLS     string
	Aliases []string
}

// DatabaseSummary is one managed database.
type DatabaseSummary struct {
	Name         string
	Engine       string
	Version      int
	Isolation    string
	Availability string
	// Storage is the declared size, or "" when the platform decides.
	Storage    string
	Extensions []string
}

// BucketSummary is one managed bucket.
type BucketSummary struct {
	Name       string
	Visibility string
	Versioning string
	// Quota is "50GB storage" and the like, or "" for none.
	Quota string
	// RouteDomain is the public hostname expression, or "" when unrouted.
	RouteDomain string
	RouteTLS    string
}

// OptionalValue is a value name with its inline default.
type OptionalValue struct {
	Name    string
	Default string
}

// NewManifestReport builds the report of src as compiled into res: the
// diagnostics, the source with notes at their lines and, for a valid
// manifest, the summary.
func NewManifestReport(src []byte, res *compiler.Result) ManifestReport {
	source := NewManifestSource(src, res.Diagnostics)
	anchors := make(map[int]string, len(source.Lines))
	for _, l := range source.Lines {
		anchors[l.Number] = l.Anchor
	}
	r := ManifestReport{
		Valid:       res.Valid(),
		Diagnostics: newDiagnosticList(res.Diagnostics, anchors),
		Source:      source,
	}
	if r.Valid && res.Definition != nil {
		s := NewDefinitionSummary(res)
		for _, d := range r.Diagnostics.Items {
			if d.Severity == SeverityWarning {
				s.Warnings = append(s.Warnings, d)
			}
		}
		r.Summary = &s
	}
	return r
}

// NewDiagnosticList converts compiler diagnostics for display, linking each
// to its line of a ManifestSource of the same text.
func NewDiagnosticList(src []byte, ds []compiler.Diagnostic) DiagnosticList {
	lines := 0
	if len(src) <= compiler.MaxManifestSize {
		lines = len(splitLines(src))
	}
	anchors := map[int]string{}
	if lines <= MaxSourceLines {
		for i := 1; i <= lines; i++ {
			anchors[i] = lineAnchor(i)
		}
	}
	return newDiagnosticList(ds, anchors)
}

func newDiagnosticList(ds []compiler.Diagnostic, anchors map[int]string) DiagnosticList {
	l := DiagnosticList{Items: make([]Diagnostic, 0, len(ds))}
	for _, d := range ds {
		v := newDiagnostic(d)
		v.Anchor = anchors[d.Line]
		if v.Severity == SeverityError {
			l.Errors++
		} else {
			l.Warnings++
		}
		l.Items = append(l.Items, v)
	}
	return l
}

func newDiagnostic(d compiler.Diagnostic) Diagnostic {
	sev := SeverityWarning
	if d.Severity == compiler.SeverityError {
		sev = SeverityError
	}
	return Diagnostic{Severity: sev, Line: d.Line, Column: d.Column, Path: d.Path, Message: d.Message}
}

func lineAnchor(n int) string { return "L" + strconv.Itoa(n) }

// NewManifestSource splits src into lines and attaches each diagnostic to
// its line, marking the token at its column. Text over the compiler's size
// limit or longer than MaxSourceLines is not listed (Omitted).
func NewManifestSource(src []byte, ds []compiler.Diagnostic) ManifestSource {
	if len(src) > compiler.MaxManifestSize || !utf8.Valid(src) {
		return ManifestSource{Omitted: len(src) > 0}
	}
	texts := splitLines(src)
	if len(texts) > MaxSourceLines {
		return ManifestSource{Omitted: true}
	}
	byLine := map[int][]Diagnostic{}
	for _, d := range ds {
		if d.Line >= 1 && d.Line <= len(texts) {
			v := newDiagnostic(d)
			v.Anchor = lineAnchor(d.Line)
			byLine[d.Line] = append(byLine[d.Line], v)
		}
	}
	out := ManifestSource{Lines: make([]SourceLine, len(texts))}
	for i, text := range texts {
		n := i + 1
		notes := byLine[n]
		l := SourceLine{Number: n, Anchor: lineAnchor(n), Notes: notes, Segments: markSegments(text, notes)}
		for _, d := range notes {
			if d.Severity == SeverityError || l.Severity == "" {
				l.Severity = d.Severity
			}
		}
		out.Lines[i] = l
	}
	return out
}

// splitLines splits text into lines without their line endings; a final
// newline does not start another line, and empty text has no lines.
func splitLines(src []byte) []string {
	if len(src) == 0 {
		return nil
	}
	s := strings.TrimSuffix(string(bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n"))), "\n")
	return strings.Split(s, "\n")
}

// markSegments cuts text so the token each diagnostic's column points at
// is its own segment. Columns count characters from 1, as the YAML library
// does. An error wins over a warning where two overlap.
func markSegments(text string, notes []Diagnostic) []SourceSegment {
	runes := []rune(text)
	marks := make([]string, len(runes))
	for _, sev := range []string{SeverityWarning, SeverityError} {
		for _, d := range notes {
			if d.Severity != sev {
				continue
			}
			start := d.Column - 1
			if start < 0 || start >= len(runes) {
				continue
			}
			for i := start; i < tokenEnd(runes, start); i++ {
				marks[i] = sev
			}
		}
	}
	var segs []SourceSegment
	for i := 0; i < len(runes); {
		j := i
		for j < len(runes) && marks[j] == marks[i] {
			j++
		}
		segs = append(segs, SourceSegment{Text: string(runes[i:j]), Mark: marks[i]})
		i = j
	}
	if len(segs) == 0 {
		segs = []SourceSegment{{}}
	}
	return segs
}

// tokenEnd returns the end of the YAML or TOML token starting at start: a
// quoted string to its closing quote, a plain key or scalar up to ": " or
// " =", a flow separator, a comment or the end of the line.
func tokenEnd(r []rune, start int) int {
	if q := r[start]; q == '"' || q == '\'' {
		for i := start + 1; i < len(r); i++ {
			if r[i] == '\\' && q == '"' {
				i++
				continue
			}
			if r[i] == q {
				return i + 1
			}
		}
		return len(r)
	}
	if r[start] == '-' && start+1 < len(r) && r[start+1] == ' ' {
		return start + 1
	}
	end := start
	for end < len(r) {
		c := r[end]
		if c == ',' || c == '}' || c == ']' || c == '{' || c == '[' {
			break
		}
		if c == ':' && (end+1 == len(r) || r[end+1] == ' ') {
			break
		}
		// A TOML key ends where its `=` starts.
		if c == '=' || c == ' ' && end+1 < len(r) && r[end+1] == '=' {
			break
		}
		if c == '#' && end > start && r[end-1] == ' ' {
			break
		}
		end++
	}
	for end > start+1 && r[end-1] == ' ' {
		end--
	}
	if end == start {
		end = start + 1
	}
	return end
}

// NewDefinitionSummary summarises a valid result's definition; it must not
// be called when res.Definition is nil. It leaves Warnings empty.
func NewDefinitionSummary(res *compiler.Result) DefinitionSummary {
	def := res.Definition
	s := DefinitionSummary{
		Name:        def.Name,
		Description: def.Description,
		Hash:        res.Hash,
		Required:    append([]string(nil), res.Values.Required...),
	}
	for _, name := range slices.Sorted(maps.Keys(res.Values.Optional)) {
		s.Optional = append(s.Optional, OptionalValue{Name: name, Default: res.Values.Optional[name]})
	}
	for _, name := range slices.Sorted(maps.Keys(def.Applications)) {
		s.Applications = append(s.Applications, newApplicationSummary(name, def.Applications[name]))
	}
	for _, name := range slices.Sorted(maps.Keys(def.Databases)) {
		db := def.Databases[name]
		d := DatabaseSummary{Name: name, Engine: db.Engine, Version: db.Version, Isolation: db.Isolation,
			Availability: db.Availability, Extensions: db.Extensions}
		d.Storage = storageSize(db.StorageSize)
		s.Databases = append(s.Databases, d)
	}
	for _, name := range slices.Sorted(maps.Keys(def.Buckets)) {
		b := def.Buckets[name]
		bs := BucketSummary{Name: name, Visibility: b.Visibility, Versioning: b.Versioning}
		bs.Quota = bucketQuota(b.Quotas)
		if b.Route != nil {
			bs.RouteDomain, bs.RouteTLS = b.Route.Domain, b.Route.TLS
		}
		s.Buckets = append(s.Buckets, bs)
	}
	return s
}

func newApplicationSummary(name string, app *compiler.Application) ApplicationSummary {
	a := ApplicationSummary{Name: name, Image: app.Image}
	if app.Build != nil {
		a.Build = &BuildSummary{Context: app.Build.Context, Dockerfile: app.Build.Dockerfile, Target: app.Build.Target}
	}
	for _, pn := range slices.Sorted(maps.Keys(app.Ports)) {
		p := app.Ports[pn]
		a.Ports = append(a.Ports, PortSummary{Name: pn, Port: p.Port, Protocol: p.Protocol})
	}
	for _, rn := range slices.Sorted(maps.Keys(app.Routes)) {
		r := app.Routes[rn]
		port := r.Port
		if port != strconv.Itoa(r.TargetPort) {
			port += " (" + strconv.Itoa(r.TargetPort) + ")"
		}
		a.Routes = append(a.Routes, RouteSummary{Name: rn, Domain: r.Domain, Path: r.Path, Port: port, TLS: r.TLS, Aliases: r.Aliases})
	}
	a.Replicas, a.Autoscaling = replicaRange(app.Scaling), autoscaling(app.Scaling)
	for _, vn := range slices.Sorted(maps.Keys(app.Volumes)) {
		v := app.Volumes[vn]
		a.Volumes = append(a.Volumes, vn+" at "+v.MountPath+" ("+v.Size.String()+")")
	}
	return a
}

// firstError returns the first error of l, in source order.
func firstError(l DiagnosticList) (Diagnostic, bool) {
	for _, d := range l.Items {
		if d.Severity == SeverityError {
			return d, true
		}
	}
	return Diagnostic{}, false
}

// MarkEnd returns the column just past the token that a diagnostic at
// column (1-based, in characters) of line points at: the same range the
// annotated source underlines, for the live editor's underline. A column
// past the end of the line marks one character.
func MarkEnd(line string, column int) int {
	r := []rune(line)
	if column < 1 || column > len(r) {
		return column + 1
	}
	return tokenEnd(r, column-1) + 1
}
