package compiler

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/skali-dev/studio/compiler/internal/check"
)

// ChangeKind says whether something was added, removed or changed.
type ChangeKind string

// The kinds of a Change.
const (
	Added   ChangeKind = "added"
	Removed ChangeKind = "removed"
	Changed ChangeKind = "changed"
)

// Change is one difference between two compiled definitions, field by field.
type Change struct {
	// Subject is what the field belongs to: "" for the project itself, the
	// application's name ("web"), "database data" or "bucket files".
	Subject string
	// Field is the field's path inside Subject with the manifest's
	// spelling ("replicas", "routes.public.domain", "environment:
	// SESSION_SECRET"); empty when the whole subject was added or removed.
	Field string
	Kind  ChangeKind
	// Old and New are the field's texts as displayed. Both are empty for
	// fields shown by name only: environment entries and build arguments,
	// where people paste secrets.
	Old, New string
	// Destructive is true for a change that destroys data: a database or
	// bucket removed.
	Destructive bool
}

// String reads like "web: replicas 2 → 3", "web: environment:
// SESSION_SECRET removed" or "added database data".
func (c Change) String() string {
	if c.Field == "" {
		return string(c.Kind) + " " + c.Subject
	}
	var b strings.Builder
	if c.Subject != "" {
		b.WriteString(c.Subject + ": ")
	}
	b.WriteString(c.Field)
	switch {
	case c.Kind == Changed && (c.Old != "" || c.New != ""):
		b.WriteString(" " + shown(c.Old) + " → " + shown(c.New))
	case c.Kind == Added && c.New != "":
		b.WriteString(" " + c.New + " added")
	case c.Kind == Removed && c.Old != "":
		b.WriteString(" " + c.Old + " removed")
	default:
		b.WriteString(" " + string(c.Kind))
	}
	return b.String()
}

func shown(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Compare lists what changed from old to new, field by field: the project's
// name and description, then applications, databases and buckets by name.
// A service added or removed is one change; inside a service each field
// that differs is one change with its old and new text. Environment entries
// and build arguments are compared by name only. A nil definition compares
// as an empty one. Compare is pure: it reads the definitions and nothing
// else, so the revision page and the deploy plan can share it.
func Compare(old, new *Definition) []Change {
	if old == nil {
		old = &Definition{}
	}
	if new == nil {
		new = &Definition{}
	}
	var out []Change
	if old.Name != new.Name {
		out = append(out, Change{Field: "name", Kind: Changed, Old: old.Name, New: new.Name})
	}
	if old.Description != new.Description {
		out = append(out, Change{Field: "description", Kind: Changed, Old: old.Description, New: new.Description})
	}
	out = append(out, compareServices("application", "", old.Applications, new.Applications, false)...)
	out = append(out, compareServices("database", "database ", old.Databases, new.Databases, true)...)
	out = append(out, compareServices("bucket", "bucket ", old.Buckets, new.Buckets, true)...)
	return out
}

func compareServices[T any](kind, prefix string, old, new map[string]*T, holdsData bool) []Change {
	var out []Change
	names := slices.Sorted(maps.Keys(old))
	for n := range new {
		if _, ok := old[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		a, inOld := old[n]
		b, inNew := new[n]
		switch {
		case !inOld:
			out = append(out, Change{Subject: kind + " " + n, Kind: Added})
		case !inNew:
			out = append(out, Change{Subject: kind + " " + n, Kind: Removed, Destructive: holdsData})
		default:
			c := comparer{subject: prefix + n}
			if x, ok := any(a).(*Application); ok {
				c.application(x, any(b).(*Application))
			} else {
				c.walk("", reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem())
			}
			out = append(out, c.out...)
		}
	}
	return out
}

type comparer struct {
	subject string
	out     []Change
}

func (c *comparer) add(field string, kind ChangeKind, old, new string) {
	c.out = append(c.out, Change{Subject: c.subject, Field: field, Kind: kind, Old: old, New: new})
}

// application compares two applications, with the replica range as one
// field ("replicas 2 → 3") rather than its two bounds.
func (c *comparer) application(a, b *Application) {
	if ra, rb := replicasText(a.Scaling), replicasText(b.Scaling); ra != rb {
		c.add("replicas", Changed, ra, rb)
	}
	if a.Scaling.TargetCPUUtilization != b.Scaling.TargetCPUUtilization {
		c.add("autoscaling cpu", Changed, percent(a.Scaling.TargetCPUUtilization), percent(b.Scaling.TargetCPUUtilization))
	}
	x, y := *a, *b
	x.Scaling, y.Scaling = Scaling{}, Scaling{}
	c.namesOnly("environment", x.Environment, y.Environment)
	x.Environment, y.Environment = nil, nil
	if x.Build != nil && y.Build != nil {
		c.namesOnly("build.arguments", x.Build.Arguments, y.Build.Arguments)
		bx, by := *x.Build, *y.Build
		bx.Arguments, by.Arguments = nil, nil
		x.Build, y.Build = &bx, &by
	}
	c.walk("", reflect.ValueOf(x), reflect.ValueOf(y))
}

func replicasText(s Scaling) string {
	if s.Max > s.Min {
		return strconv.Itoa(s.Min) + " to " + strconv.Itoa(s.Max)
	}
	return strconv.Itoa(s.Min)
}

func percent(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n) + "%"
}

// namesOnly compares maps whose texts are not shown: which names came,
// went or changed.
func (c *comparer) namesOnly(field string, a, b map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if v, ok := b[k]; !ok {
			c.add(field+": "+k, Removed, "", "")
		} else if v != a[k] {
			c.add(field+": "+k, Changed, "", "")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			c.add(field+": "+k, Added, "", "")
		}
	}
}

var stringerType = reflect.TypeFor[fmt.Stringer]()

// walk compares a and b (of one type) below path, the JSON field names
// joined with dots.
func (c *comparer) walk(path string, a, b reflect.Value) {
	t := a.Type()
	if t.Implements(stringerType) || t.Kind() != reflect.Struct && t.Kind() != reflect.Map && t.Kind() != reflect.Pointer {
		if x, y := leafText(a), leafText(b); x != y {
			c.add(path, Changed, x, y)
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		switch {
		case a.IsNil() && b.IsNil():
		case a.IsNil():
			c.add(path, Added, "", "")
		case b.IsNil():
			c.add(path, Removed, "", "")
		default:
			c.walk(path, a.Elem(), b.Elem())
		}
	case reflect.Map:
		keys := map[string]reflect.Value{}
		for _, k := range append(a.MapKeys(), b.MapKeys()...) {
			keys[k.String()] = k
		}
		for _, name := range slices.Sorted(maps.Keys(keys)) {
			k := keys[name]
			x, y := a.MapIndex(k), b.MapIndex(k)
			p := check.Join(path, name)
			switch {
			case !x.IsValid():
				c.add(p, Added, "", leafOrEmpty(y))
			case !y.IsValid():
				c.add(p, Removed, leafOrEmpty(x), "")
			default:
				c.walk(p, x, y)
			}
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			c.walk(check.Join(path, name), a.Field(i), b.Field(i))
		}
	}
}

// leafOrEmpty is the text of a scalar map entry, "" for a struct entry
// (a whole route or port is named, not spelled out).
func leafOrEmpty(v reflect.Value) string {
	if v.Kind() == reflect.Pointer || v.Kind() == reflect.Struct || v.Kind() == reflect.Map {
		return ""
	}
	return leafText(v)
}

func leafText(v reflect.Value) string {
	if v.Type().Implements(stringerType) {
		if v.IsZero() {
			return ""
		}
		return v.Interface().(fmt.Stringer).String()
	}
	switch v.Kind() {
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range v.Len() {
			parts[i] = leafText(v.Index(i))
		}
		return strings.Join(parts, ", ")
	case reflect.Int, reflect.Int64, reflect.Int32:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	}
	return fmt.Sprint(v.Interface())
}
