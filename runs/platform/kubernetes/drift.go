package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// Drift (issue 39): what differs in an environment's namespace from what
// the Studio applies for the definition it last deployed there, read from
// the health watches' objects (health.go: one watch per kind and
// namespace, no request per read). What the Studio applies is built
// again from the definition (deployment, autoscaler: the same functions a
// deploy applies), so nothing of it is kept on the cluster.
//
// A field counts as drift when its value differs and another field
// manager owns it (handEdits: a person's kubectl scale, set image, set
// env or edit); during the Studio's own rollout of a new revision the
// Studio owns what it changed, so a deploy under way is not drift. A
// Deployment or autoscaler gone is drift whoever deleted it. Nothing here
// writes: the next deploy applies with force (apply) and takes the fields
// back.

// Drift implements platform.DriftReader.
func (p *Platform) Drift(ctx context.Context, env platform.Env, def *compiler.Definition) ([]platform.Drift, error) {
	o, err := p.followEnvironment(ctx, env, def)
	if o == nil || err != nil {
		return nil, err
	}
	n := envNames{project: env.Project, env: env.Name, id: env.ID, namespace: NamespaceName(env.Project, env.Name)}
	p.health.mu.Lock()
	defer p.health.mu.Unlock()
	var out []platform.Drift
	for _, app := range slices.Sorted(maps.Keys(def.Applications)) {
		out = append(out, p.appDrift(n, app, def.Applications[app], o)...)
	}
	return out, nil
}

// appDrift compares one application's Deployment (a blue-green
// application's live slot) and autoscaler with what the Studio applies.
func (p *Platform) appDrift(n envNames, app string, a *compiler.Application, o *namespaceObjects) []platform.Drift {
	live, liveName, names, gone := liveDeployment(app, a, o)
	if live == nil {
		return []platform.Drift{{App: app, Kind: platform.DriftDeleted, Object: "Deployment " + names[0], Now: "deleted", Applied: "present", Since: gone}}
	}
	applied := deployment(n, app, a, p)
	object := "Deployment " + liveName
	foreign := map[string]time.Time{} // field path → when another manager last wrote it
	for _, h := range handEdits(KindDeployment, live) {
		for _, f := range h.Fields {
			foreign[f] = h.Since
		}
	}
	studio := map[string]time.Time{}
	for _, f := range managedPaths(live, FieldManager) {
		studio[f] = time.Time{}
	}
	// owned says whether a field under prefix is in paths, and since when
	// its manager wrote it as far as the cluster records it.
	owned := func(paths map[string]time.Time, prefix string) (time.Time, bool) {
		found, since := false, time.Time{}
		for f, t := range paths {
			if f == prefix || strings.HasPrefix(f, prefix+".") || strings.HasPrefix(f, prefix+"[") {
				found = true
				if t.After(since) {
					since = t
				}
			}
		}
		return since, found
	}
	// taken says the Studio no longer owns a field it applies: another
	// manager wrote it (a write of 0 through the scale subresource leaves
	// no owner at all: the Scale object omits a zero count).
	taken := func(path string) (time.Time, bool) {
		if _, mine := owned(studio, path); mine {
			return time.Time{}, false
		}
		since, _ := owned(foreign, path)
		return since, true
	}
	item := func(kind platform.DriftKind, field, now, was string, since time.Time) platform.Drift {
		return platform.Drift{App: app, Kind: kind, Object: object, Field: field, Now: now, Applied: was, Since: since}
	}
	var out []platform.Drift
	// An autoscaled application's count is its autoscaler's within the
	// range the Studio applied: drift is a count outside it.
	got, lo, hi := num(at(live, "spec", "replicas")), max(a.Scaling.Min, 1), max(a.Scaling.Max, a.Scaling.Min, 1)
	was := replicaRange(lo, hi)
	if want, ok := at(applied, "spec", "replicas").(int); ok {
		lo, hi, was = want, want, strconv.Itoa(want)
	}
	// A restore under way (or one that failed) stopped it: not drift.
	_, stopped := annotations(live)[annotationStopped]
	if (got < lo || got > hi) && !stopped {
		if since, by := taken("spec.replicas"); by {
			out = append(out, item(platform.DriftReplicas, "replicas", strconv.Itoa(got), was, since))
		}
	}
	cname := dnsName(app)
	prefix := "spec.template.spec.containers[name=" + cname + "]"
	wantC := firstContainer(applied)
	var gotC Object
	for _, v := range list(live, "spec", "template", "spec", "containers") {
		if c, _ := v.(Object); str(c, "name") == cname {
			gotC = c
		}
	}
	if gotC == nil {
		return append(out, item(platform.DriftImage, "container "+cname, "removed", str(wantC, "image"), time.Time{}))
	}
	if got, want := str(gotC, "image"), str(wantC, "image"); got != want {
		if since, by := taken(prefix + ".image"); by {
			out = append(out, item(platform.DriftImage, "image", got, want, since))
		}
	}
	wantEnv, gotEnv := envByName(wantC), envByName(gotC)
	for _, name := range slices.Sorted(maps.Keys(wantEnv)) {
		g, ok := gotEnv[name]
		switch {
		case !ok:
			// A field removed belongs to no one: the Studio's own rollout
			// never removes what the active revision sets.
			out = append(out, item(platform.DriftEnv, "env "+name, "removed", "set", time.Time{}))
		case !contains(g, wantEnv[name]) || str(g, "value") != str(wantEnv[name], "value"):
			leaf := ".value"
			if _, ok := wantEnv[name]["valueFrom"]; ok {
				leaf = ".valueFrom"
			}
			if since, by := taken(prefix + ".env[name=" + name + "]" + leaf); by {
				out = append(out, item(platform.DriftEnv, "env "+name, "changed", "set", since))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(gotEnv)) {
		if _, ok := wantEnv[name]; ok {
			continue
		}
		if since, by := owned(foreign, prefix+".env[name="+name+"]"); by {
			out = append(out, item(platform.DriftEnv, "env "+name, "set", "not set", since))
		}
	}
	if a.Scaling.TargetCPUUtilization > 0 {
		out = append(out, autoscalerDrift(app, a, o)...)
	}
	return out
}

// autoscalerDrift is the application's autoscaler gone, or its range
// changed outside the Studio (pinned: suspended).
func autoscalerDrift(app string, a *compiler.Application, o *namespaceObjects) []platform.Drift {
	name := dnsName(app)
	wantMin, wantMax := max(a.Scaling.Min, 1), max(a.Scaling.Max, a.Scaling.Min, 1)
	was := fmt.Sprintf("%d to %d replicas", wantMin, wantMax)
	hpa := o.objects[KindHPA.Resource][name]
	if hpa == nil {
		return []platform.Drift{{App: app, Kind: platform.DriftAutoscaler, Object: "HorizontalPodAutoscaler " + name, Now: "removed", Applied: was}}
	}
	gotMin, gotMax := num(at(hpa, "spec", "minReplicas")), num(at(hpa, "spec", "maxReplicas"))
	if gotMin == wantMin && gotMax == wantMax {
		return nil
	}
	var since time.Time
	by := false
	for _, h := range handEdits(KindHPA, hpa) {
		for _, f := range h.Fields {
			if f == "spec.minReplicas" || f == "spec.maxReplicas" {
				by, since = true, h.Since
			}
		}
	}
	if !by {
		return nil
	}
	now := fmt.Sprintf("%d to %d replicas", gotMin, gotMax)
	if gotMin == gotMax {
		now = fmt.Sprintf("suspended at %d replicas", gotMin)
	}
	return []platform.Drift{{App: app, Kind: platform.DriftAutoscaler, Object: "HorizontalPodAutoscaler " + name, Field: "range", Now: now, Applied: was, Since: since}}
}

// dropAddedEnv removes from a Deployment the Studio just applied (dep,
// as the API server answered) the environment variables another manager
// added to its container (`kubectl set env NEW=…`): a forced apply takes
// back only the fields the Studio sets, so a variable it never set would
// stay, and restoring what the Studio deployed means without it. Each
// removal is said on out; dep is returned as it then stands.
func (p *Platform) dropAddedEnv(ctx context.Context, app string, dep Object, out platform.Output) (Object, error) {
	cname := dnsName(app)
	prefix := "spec.template.spec.containers[name=" + cname + "].env[name="
	foreign := map[string]string{} // variable → its manager
	for _, h := range handEdits(KindDeployment, dep) {
		for _, f := range h.Fields {
			if rest, ok := strings.CutPrefix(f, prefix); ok {
				name, _, _ := strings.Cut(rest, "]")
				foreign[name] = h.Manager
			}
		}
	}
	if len(foreign) == 0 {
		return dep, nil
	}
	studio := map[string]bool{}
	for _, f := range managedPaths(dep, FieldManager) {
		if rest, ok := strings.CutPrefix(f, prefix); ok {
			name, _, _ := strings.Cut(rest, "]")
			studio[name] = true
		}
	}
	var ops []Object
	var dropped []string
	for ci, v := range list(dep, "spec", "template", "spec", "containers") {
		if c, _ := v.(Object); str(c, "name") != cname {
			continue
		}
		env := list(v.(Object), "env")
		for i := len(env) - 1; i >= 0; i-- {
			e, _ := env[i].(Object)
			name := str(e, "name")
			if _, ok := foreign[name]; !ok || studio[name] {
				continue
			}
			path := fmt.Sprintf("/spec/template/spec/containers/%d/env/%d", ci, i)
			ops = append(ops, Object{"op": "test", "path": path + "/name", "value": name}, Object{"op": "remove", "path": path})
			dropped = append(dropped, name)
		}
	}
	if len(ops) == 0 {
		return dep, nil
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	patched, err := p.Client.JSONPatch(ctx, KindDeployment, str(dep, "metadata", "namespace"), str(dep, "metadata", "name"), body)
	if err != nil {
		return nil, err
	}
	slices.Sort(dropped)
	for _, name := range dropped {
		out.Line(fmt.Sprintf("Removed %s from Deployment %s: %s set it outside the Studio", name, str(dep, "metadata", "name"), foreign[name]))
	}
	return patched, nil
}

// managedPaths are the field paths manager owns on o through Apply.
func managedPaths(o Object, manager string) []string {
	var out []string
	md, _ := o["metadata"].(Object)
	entries, _ := md["managedFields"].([]any)
	for _, e := range entries {
		m, _ := e.(Object)
		if name, _ := m["manager"].(string); name != manager {
			continue
		}
		if sub, _ := m["subresource"].(string); sub != "" {
			continue
		}
		out = append(out, flattenFields(m["fieldsV1"], "")...)
	}
	return out
}

// replicaRange is "2" or "2 to 5".
func replicaRange(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// scaleIntoRange scales an autoscaled application's Deployment (dep, as
// just applied) back into the range the Studio applied when it was scaled
// outside it (the apply leaves the count to the autoscaler, and an
// autoscaler does not scale a Deployment at 0), under the field manager
// the Studio scales with; it returns dep as it then stands.
func (p *Platform) scaleIntoRange(ctx context.Context, app string, a *compiler.Application, dep Object, out platform.Output) (Object, error) {
	if a.Scaling.TargetCPUUtilization == 0 {
		return dep, nil
	}
	got, lo, hi := num(at(dep, "spec", "replicas")), max(a.Scaling.Min, 1), max(a.Scaling.Max, a.Scaling.Min, 1)
	if got >= lo && got <= hi {
		return dep, nil
	}
	to := min(max(got, lo), hi)
	ns, name := str(dep, "metadata", "namespace"), str(dep, "metadata", "name")
	if err := p.Client.Scale(ctx, KindDeployment, ns, name, to); err != nil {
		return nil, err
	}
	out.Line(fmt.Sprintf("Scaled Deployment %s back to %d: it was scaled to %d outside the Studio (its autoscaler keeps it within %s)", name, to, got, replicaRange(lo, hi)))
	return p.Client.Get(ctx, KindDeployment, ns, name)
}

// firstContainer is the pod template's first container of a Deployment
// as the Studio builds it.
func firstContainer(dep Object) Object {
	cs, _ := at(dep, "spec", "template", "spec", "containers").([]Object)
	if len(cs) == 0 {
		return nil
	}
	return cs[0]
}

// envByName is a container's environment variables by name, as JSON
// objects (the Studio's own are built as Objects: round-trip them so both
// sides compare alike).
func envByName(c Object) map[string]Object {
	out := map[string]Object{}
	var items []any
	switch v := c["env"].(type) {
	case []any:
		items = v
	case []Object:
		for _, o := range v {
			items = append(items, o)
		}
	}
	for _, it := range items {
		b, _ := json.Marshal(it)
		var o Object
		if json.Unmarshal(b, &o) == nil {
			out[str(o, "name")] = o
		}
	}
	return out
}

// contains says whether got has every field of want with the same value
// (got may carry fields the API server defaulted).
func contains(got, want any) bool {
	switch w := want.(type) {
	case Object:
		g, ok := got.(Object)
		if !ok {
			return false
		}
		for k, v := range w {
			if !contains(g[k], v) {
				return false
			}
		}
		return true
	default:
		return fmt.Sprint(got) == fmt.Sprint(want)
	}
}

var _ platform.DriftReader = (*Platform)(nil)
