package runs

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/humanize"
)

// Change actions of a plan.
const (
	Created = "created"
	Changed = "changed"
	Removed = "removed"
)

// PlanInput is what a deploy plan compares: the definition to deploy, the
// one the environment runs (nil on a first deploy), the values stored for
// the environment (names only) and what each live bucket stores.
type PlanInput struct {
	From *compiler.Definition
	To   *compiler.Definition
	// FromRevision and ToRevision are revision numbers; FromRevision is 0 on
	// a first deploy.
	FromRevision, ToRevision int
	// StoredValues names the values set for the environment: all of
	// them, or (with OrphanedCount) every set name the new revision
	// references and the first OrphanedListed of the others, by name.
	StoredValues []string
	// OrphanedCount counts the set names the new revision does not
	// reference when StoredValues lists only the first of them (0:
	// StoredValues lists every set name).
	OrphanedCount int
	// BucketBytes is what each live bucket stores, by key.
	BucketBytes map[string]int64
	// Revisions are the definitions of every revision of the project, by
	// number: a value any of them uses outside hostnames must not build a
	// hostname without an admin's typed consent (From and To count too).
	Revisions map[int]*compiler.Definition
}

// OrphanedListed is how many orphaned names a deploy plan lists (the
// deploy plan page and the API's plan); the others are counted.
const OrphanedListed = 20

// Plan is what a deploy would do.
type Plan struct {
	FromRevision, ToRevision int
	FirstDeploy              bool
	// Rollback is a deploy of a revision older than the active one.
	Rollback bool
	// Redeploy is a deploy of the active revision again.
	Redeploy bool
	Changes  []ServiceChange
	// MissingValues are required values that are not set: the deploy cannot start.
	MissingValues []string
	// OrphanedValues are stored values the new revision does not
	// reference, by name: all of them, or the first OrphanedListed when
	// the plan was made from those (PlanInput.OrphanedCount).
	OrphanedValues []string
	// OrphanedCount counts them all.
	OrphanedCount int
	// Destructive says why the deploy needs typed confirmation; empty when it does not.
	Destructive []string
	// Refused says why the deploy is refused outright; empty when it may go ahead.
	Refused []string
	// PublicValues are values that build a hostname of the new revision
	// and that a revision of the project also uses outside hostnames.
	// Hostnames are public by nature (DNS, certificates, logs), so such a
	// deploy is refused to deployers and needs an admin's typed name.
	PublicValues []PublicValue
}

// PublicValue is a value a hostname would publish although the project
// also uses it outside hostnames, where it may be a secret.
type PublicValue struct {
	Name string
	// Hostnames are the routes of the new revision whose hostname uses it.
	Hostnames []HostnameExpression
	// Elsewhere says where revisions use it outside hostnames, by field.
	Elsewhere []ValueUse
}

// ValueUse is a field that references a value, with the newest revision
// of the project that does.
type ValueUse struct {
	// Field is a path such as "web.environment.SESSION_SECRET".
	Field    string
	Revision int
}

// PublicValueNames names the plan's PublicValues, sorted.
func (p *Plan) PublicValueNames() []string {
	names := make([]string, 0, len(p.PublicValues))
	for _, v := range p.PublicValues {
		names = append(names, v.Name)
	}
	return names
}

// PublishesValues reports whether the deploy would put a value the
// project also uses outside hostnames into a hostname.
func (p *Plan) PublishesValues() bool { return len(p.PublicValues) > 0 }

// ServiceChange is an application, database or bucket created, changed or removed.
type ServiceChange struct {
	// Kind is application, database or bucket.
	Kind   string
	Name   string
	Action string
	Fields []FieldChange
}

// FieldChange is one changed field of a service, old and new written out.
// Values appear by name only: expressions are shown as written (${NAME}).
type FieldChange struct {
	Field    string
	Old, New string
}

// NeedsConfirmation reports whether the deploy needs the environment's name typed.
func (p *Plan) NeedsConfirmation() bool { return len(p.Destructive) > 0 }

// CanStart reports whether a deploy of this plan may start (confirmation aside).
func (p *Plan) CanStart() bool { return len(p.Refused) == 0 && len(p.MissingValues) == 0 }

// PlanDeploy compares two compiled definitions as the reference's
// "Destructive changes" section asks: removals (a renamed key is a removal
// and an addition) need confirmation; changes no confirmation allows, and
// settings the reference accepts but refuses at deploy, are refused.
func PlanDeploy(in PlanInput) *Plan {
	p := &Plan{FromRevision: in.FromRevision, ToRevision: in.ToRevision, FirstDeploy: in.From == nil}
	p.Rollback = in.FromRevision > 0 && in.ToRevision < in.FromRevision
	p.Redeploy = in.FromRevision > 0 && in.ToRevision == in.FromRevision
	from, to := in.From, in.To
	if from == nil {
		from = &compiler.Definition{}
	}
	if to == nil {
		to = &compiler.Definition{}
	}
	p.Changes = append(p.Changes, diffMap("application", from.Applications, to.Applications)...)
	p.Changes = append(p.Changes, diffMap("database", from.Databases, to.Databases)...)
	p.Changes = append(p.Changes, diffMap("bucket", from.Buckets, to.Buckets)...)

	for _, c := range p.Changes {
		if c.Kind == "application" || c.Action != Removed {
			continue
		}
		why := fmt.Sprintf("Removing %s %s destroys its data.", c.Kind, c.Name)
		if p.Rollback {
			why = fmt.Sprintf("Revision %d is from before %s %s was added: rolling back removes it and destroys its data.", in.ToRevision, c.Kind, c.Name)
		}
		p.Destructive = append(p.Destructive, why)
	}
	for _, name := range slices.Sorted(maps.Keys(to.Databases)) {
		old, ok := from.Databases[name]
		if !ok {
			continue
		}
		d := to.Databases[name]
		if old.Engine != d.Engine {
			p.Refused = append(p.Refused, fmt.Sprintf("Database %s: the engine of a live database cannot change (%s → %s).", name, old.Engine, d.Engine))
		}
		if old.Version != d.Version {
			p.Refused = append(p.Refused, fmt.Sprintf("Database %s: the version of a live database cannot change (%d → %d).", name, old.Version, d.Version))
		}
		if old.Isolation != d.Isolation {
			p.Refused = append(p.Refused, fmt.Sprintf("Database %s: the isolation of a live database cannot change (%s → %s).", name, old.Isolation, d.Isolation))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(to.Buckets)) {
		b := to.Buckets[name]
		if b.Visibility == "public-read" {
			p.Refused = append(p.Refused, fmt.Sprintf("Bucket %s: visibility: public-read is rejected at deploy.", name))
		}
		if b.Versioning == "enabled" {
			p.Refused = append(p.Refused, fmt.Sprintf("Bucket %s: versioning: enabled is rejected at deploy.", name))
		}
		if b.Lifecycle.ExpireNoncurrentVersionsAfter > 0 {
			p.Refused = append(p.Refused, fmt.Sprintf("Bucket %s: lifecycle.expireNoncurrentVersionsAfter is rejected at deploy.", name))
		}
		if b.Quotas.Objects > 0 {
			p.Refused = append(p.Refused, fmt.Sprintf("Bucket %s: quotas.objects is rejected at deploy.", name))
		}
		if b.Quotas.MaxObjectSize > 0 {
			p.Refused = append(p.Refused, fmt.Sprintf("Bucket %s: quotas.maxObjectSize is rejected at deploy.", name))
		}
		old, ok := from.Buckets[name]
		if !ok {
			continue
		}
		if old.Visibility != b.Visibility {
			p.Refused = append(p.Refused, fmt.Sprintf("Bucket %s: the visibility of a live bucket cannot change (%s → %s).", name, old.Visibility, b.Visibility))
		}
		if old.Versioning != b.Versioning {
			p.Refused = append(p.Refused, fmt.Sprintf("Bucket %s: the versioning of a live bucket cannot change (%s → %s).", name, old.Versioning, b.Versioning))
		}
		if q := int64(b.Quotas.Storage); q > 0 && q != int64(old.Quotas.Storage) {
			if stored := in.BucketBytes[name]; q <= stored {
				p.Refused = append(p.Refused, fmt.Sprintf("Bucket %s: the storage quota cannot drop to %s, at or below the %s it stores.", name, b.Quotas.Storage, compiler.ByteSize(stored)))
			}
		}
	}

	contract := in.To.ValueContract()
	stored := map[string]bool{}
	for _, n := range in.StoredValues {
		stored[n] = true
	}
	for _, n := range contract.Required {
		if !stored[n] {
			p.MissingValues = append(p.MissingValues, n)
		}
	}
	for _, n := range slices.Sorted(slices.Values(in.StoredValues)) {
		if _, opt := contract.Optional[n]; !opt && !slices.Contains(contract.Required, n) {
			p.OrphanedValues = append(p.OrphanedValues, n)
		}
	}
	p.OrphanedCount = max(in.OrphanedCount, len(p.OrphanedValues))
	revisions := maps.Clone(in.Revisions)
	if revisions == nil {
		revisions = map[int]*compiler.Definition{}
	}
	if in.From != nil && revisions[in.FromRevision] == nil {
		revisions[in.FromRevision] = in.From
	}
	if revisions[in.ToRevision] == nil {
		revisions[in.ToRevision] = to
	}
	p.PublicValues = publicValues(to, revisions)
	return p
}

// publicValues finds the values that build a hostname of to and that any
// of revisions uses outside hostnames.
func publicValues(to *compiler.Definition, revisions map[int]*compiler.Definition) []PublicValue {
	inHostnames := map[string][]HostnameExpression{}
	for _, h := range HostnameExpressions(to) {
		for _, n := range compiler.ValueRefs(h.Expression) {
			inHostnames[n] = append(inHostnames[n], h)
		}
	}
	if len(inHostnames) == 0 {
		return nil
	}
	newest := map[string]map[string]int{} // value → field → newest revision
	for number, def := range revisions {
		for n, fields := range compiler.ValueUses(withoutHostnames(def)) {
			if _, ok := inHostnames[n]; !ok {
				continue
			}
			if newest[n] == nil {
				newest[n] = map[string]int{}
			}
			for _, f := range fields {
				newest[n][f] = max(newest[n][f], number)
			}
		}
	}
	var out []PublicValue
	for _, n := range slices.Sorted(maps.Keys(newest)) {
		pv := PublicValue{Name: n, Hostnames: inHostnames[n]}
		for _, f := range slices.Sorted(maps.Keys(newest[n])) {
			pv.Elsewhere = append(pv.Elsewhere, ValueUse{Field: f, Revision: newest[n][f]})
		}
		out = append(out, pv)
	}
	return out
}

// withoutHostnames returns a copy of def whose route domains, aliases and
// bucket route domains are empty, so that what references values in it is
// everything but hostnames. def is left as it is.
func withoutHostnames(def *compiler.Definition) *compiler.Definition {
	if def == nil {
		return nil
	}
	out := *def
	out.Applications = make(map[string]*compiler.Application, len(def.Applications))
	for an, a := range def.Applications {
		if a == nil {
			continue
		}
		ac := *a
		ac.Routes = make(map[string]*compiler.Route, len(a.Routes))
		for rn, rt := range a.Routes {
			if rt == nil {
				continue
			}
			rc := *rt
			rc.Domain, rc.Aliases = "", nil
			ac.Routes[rn] = &rc
		}
		out.Applications[an] = &ac
	}
	out.Buckets = make(map[string]*compiler.Bucket, len(def.Buckets))
	for bn, b := range def.Buckets {
		if b == nil {
			continue
		}
		bc := *b
		if b.Route != nil {
			rc := *b.Route
			rc.Domain = ""
			bc.Route = &rc
		}
		out.Buckets[bn] = &bc
	}
	return &out
}

// HostnameExpression is a hostname of a definition as written, with the
// route it belongs to.
type HostnameExpression struct {
	// Route names the route: "web / public", "web / public alias www.${D}"
	// or "bucket media".
	Route      string
	Expression string
	TLS        string
	// Application is the application of a route or alias; "" for a bucket.
	Application string
	Alias       bool
}

// HostnameExpressions lists the hostnames of def in a stable order: each
// application's routes by name with their aliases, then bucket routes.
func HostnameExpressions(def *compiler.Definition) []HostnameExpression {
	if def == nil {
		return nil
	}
	var out []HostnameExpression
	for _, an := range slices.Sorted(maps.Keys(def.Applications)) {
		a := def.Applications[an]
		for _, rn := range slices.Sorted(maps.Keys(a.Routes)) {
			rt := a.Routes[rn]
			out = append(out, HostnameExpression{Route: an + " / " + rn, Expression: rt.Domain, TLS: rt.TLS, Application: an})
			for _, al := range rt.Aliases {
				out = append(out, HostnameExpression{Route: an + " / " + rn + " alias " + al, Expression: al, TLS: rt.TLS, Application: an, Alias: true})
			}
		}
	}
	for _, bn := range slices.Sorted(maps.Keys(def.Buckets)) {
		if r := def.Buckets[bn].Route; r != nil {
			out = append(out, HostnameExpression{Route: "bucket " + bn, Expression: r.Domain, TLS: r.TLS})
		}
	}
	return out
}

func diffMap[T any](kind string, from, to map[string]*T) []ServiceChange {
	var out []ServiceChange
	for _, name := range slices.Sorted(maps.Keys(to)) {
		old, ok := from[name]
		if !ok {
			out = append(out, ServiceChange{Kind: kind, Name: name, Action: Created})
			continue
		}
		if fields := diffFields(old, to[name]); len(fields) > 0 {
			out = append(out, ServiceChange{Kind: kind, Name: name, Action: Changed, Fields: fields})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(from)) {
		if _, ok := to[name]; !ok {
			out = append(out, ServiceChange{Kind: kind, Name: name, Action: Removed})
		}
	}
	return out
}

// diffFields flattens both sides to dotted JSON paths and lists the paths
// whose written form differs.
func diffFields(a, b any) []FieldChange {
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", reflect.ValueOf(a), fa)
	flatten("", reflect.ValueOf(b), fb)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	var out []FieldChange
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if fa[k] != fb[k] {
			old, nw := fa[k], fb[k]
			if old == "" {
				old = "(none)"
			}
			if nw == "" {
				nw = "(none)"
			}
			out = append(out, FieldChange{Field: k, Old: old, New: nw})
		}
	}
	return out
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	stringerType = reflect.TypeFor[fmt.Stringer]()
)

func flatten(prefix string, v reflect.Value, out map[string]string) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	switch {
	case v.Type() == durationType:
		if d := time.Duration(v.Int()); d != 0 {
			out[prefix] = humanize.ManifestDuration(d)
		}
		return
	case v.Kind() != reflect.Struct && v.Type().Implements(stringerType) && v.Kind() == reflect.Int64:
		if v.Int() != 0 {
			out[prefix] = v.Interface().(fmt.Stringer).String()
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				name = f.Name
			}
			flatten(join(name), v.Field(i), out)
		}
	case reflect.Map:
		keys := v.MapKeys()
		for _, k := range keys {
			flatten(join(k.String()), v.MapIndex(k), out)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			return
		}
		parts := make([]string, v.Len())
		for i := range v.Len() {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		out[prefix] = strings.Join(parts, ", ")
	case reflect.String:
		if v.String() != "" {
			out[prefix] = v.String()
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		if v.Int() != 0 {
			out[prefix] = strconv.FormatInt(v.Int(), 10)
		}
	case reflect.Bool:
		out[prefix] = strconv.FormatBool(v.Bool())
	}
}
