package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// What runs now (issue 39): each environment's Deployments and pods,
// followed through the watch hub (one watch per kind and namespace the
// Studio may read: its RoleBinding is per namespace, so a cluster-wide
// watch would need a ClusterRole that reads every namespace's pods), read
// by ClassifyPod. An environment's watches start the first time its
// health is read and last as long as the platform: a change of any of its
// objects tells the health watchers.

// healthWatch is what the platform knows of the namespaces it follows.
type healthWatch struct {
	mu       sync.Mutex
	spaces   map[string]*namespaceObjects
	watchers map[int]func(platform.Env)
	next     int
}

// namespaceObjects are one environment's objects as its watches last saw
// them, by kind and name.
type namespaceObjects struct {
	env     platform.Env
	ready   chan struct{}
	objects map[string]map[string]Object // resource → name → object
	gone    map[string]time.Time         // Deployment name → when its deletion was seen
}

// healthKinds are the kinds an environment's health and drift are read
// from (drift.go reads the autoscalers).
var healthKinds = []Kind{KindDeployment, KindPod, KindHPA}

// WatchHealth implements platform.HealthReader.
func (p *Platform) WatchHealth(ctx context.Context, changed func(platform.Env)) error {
	ch := make(chan platform.Env, 256)
	h := &p.health
	h.mu.Lock()
	if h.watchers == nil {
		h.watchers = map[int]func(platform.Env){}
	}
	id := h.next
	h.next++
	h.watchers[id] = func(e platform.Env) {
		select {
		case ch <- e:
		default: // a change already waits for this environment or others: spurious calls are allowed, missing ones are caught by the next
		}
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.watchers, id)
		h.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-ch:
			changed(e)
		}
	}
}

func (p *Platform) tellHealth(env platform.Env) {
	p.health.mu.Lock()
	ws := slices.Collect(maps.Values(p.health.watchers))
	p.health.mu.Unlock()
	for _, w := range ws {
		w(env)
	}
}

// follow starts following the environment's namespace (once) and returns
// its objects once the first read of each kind is in.
func (p *Platform) followNamespace(ctx context.Context, env platform.Env, ns string) (*namespaceObjects, error) {
	h := &p.health
	h.mu.Lock()
	if h.spaces == nil {
		h.spaces = map[string]*namespaceObjects{}
	}
	o := h.spaces[ns]
	if o == nil {
		o = &namespaceObjects{env: env, ready: make(chan struct{}), objects: map[string]map[string]Object{}, gone: map[string]time.Time{}}
		h.spaces[ns] = o
		go p.watchNamespace(env, ns, o)
	}
	h.mu.Unlock()
	select {
	case <-o.ready:
		return o, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// watchNamespace subscribes to the namespace's Deployments and pods, reads
// them once, and keeps o up to date for as long as the platform runs.
func (p *Platform) watchNamespace(env platform.Env, ns string, o *namespaceObjects) {
	sel := LabelManagedBy + "=" + managedBy
	type sub struct {
		k  Kind
		ch chan Object
	}
	var subs []sub
	for _, k := range healthKinds {
		ch, _ := p.watches.subscribe(k, ns, "")
		subs = append(subs, sub{k, ch})
	}
	// Subscribed first, then read: no version between the two is missed.
	for _, k := range healthKinds {
		for {
			items, err := p.Client.List(p.watches.ctx, k, ns, sel)
			if err == nil {
				p.health.mu.Lock()
				o.objects[k.Resource] = map[string]Object{}
				for _, it := range items {
					o.objects[k.Resource][str(it, "metadata", "name")] = it
				}
				p.health.mu.Unlock()
				break
			}
			p.Opts.Logger.Warn("health: listing failed", "kind", k.Kind, "namespace", ns, "error", err)
			select {
			case <-p.watches.ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
		}
	}
	close(o.ready)
	merged := make(chan struct {
		k Kind
		o Object
	}, 16)
	for _, s := range subs {
		go func() {
			for {
				select {
				case <-p.watches.ctx.Done():
					return
				case obj := <-s.ch:
					merged <- struct {
						k Kind
						o Object
					}{s.k, obj}
				}
			}
		}()
	}
	for {
		select {
		case <-p.watches.ctx.Done():
			return
		case m := <-merged:
			name := str(m.o, "metadata", "name")
			p.health.mu.Lock()
			if o.objects[m.k.Resource] == nil {
				o.objects[m.k.Resource] = map[string]Object{}
			}
			if m.o["deleted"] == true {
				delete(o.objects[m.k.Resource], name)
				if m.k == KindDeployment {
					o.gone[name] = time.Now()
				}
			} else {
				o.objects[m.k.Resource][name] = m.o
				delete(o.gone, name)
			}
			p.health.mu.Unlock()
			p.tellHealth(env)
		}
	}
}

// namespaceKnown is whether the environment's namespace ns is on the
// cluster: followed already, or found by a get.
func (p *Platform) namespaceKnown(ctx context.Context, ns string) (bool, error) {
	p.health.mu.Lock()
	_, following := p.health.spaces[ns]
	p.health.mu.Unlock()
	if following {
		return true, nil
	}
	if _, err := p.Client.Get(ctx, KindNamespace, "", ns); IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, p.apiError("reading namespace "+ns, err)
	}
	return true, nil
}

// followEnvironment returns the environment's objects as its watches see
// them (following its namespace from now on); nil when there is nothing
// to read: no definition deployed, or its namespace is not on this
// cluster (never deployed here).
func (p *Platform) followEnvironment(ctx context.Context, env platform.Env, def *compiler.Definition) (*namespaceObjects, error) {
	ns := NamespaceName(env.Project, env.Name)
	if known, err := p.namespaceKnown(ctx, ns); err != nil || !known {
		return nil, err
	}
	if def == nil {
		return nil, nil
	}
	return p.followNamespace(ctx, env, ns)
}

// liveDeployment is the application's Deployment as the watches see it
// (a blue-green application's live slot) and its name; nil when it is
// gone, with when its deletion was seen. names are the Deployments it may
// be, the first its usual one.
func liveDeployment(app string, a *compiler.Application, o *namespaceObjects) (dep Object, name string, names []string, gone time.Time) {
	names = []string{dnsName(app)}
	if blueGreen(a) {
		names = []string{dnsName(app, "blue"), dnsName(app, "green")}
	}
	for _, n := range names {
		if d := o.objects[KindDeployment.Resource][n]; d != nil {
			dep, name = d, n
		}
		if t, ok := o.gone[n]; ok {
			gone = t
		}
	}
	return dep, name, names, gone
}

// Health implements platform.HealthReader from the environment's watches:
// a request only the first time (the namespace, then one list per kind).
func (p *Platform) Health(ctx context.Context, env platform.Env, def *compiler.Definition) (platform.EnvironmentHealth, error) {
	o, err := p.followEnvironment(ctx, env, def)
	if o == nil || err != nil {
		return platform.EnvironmentHealth{}, err
	}
	h := platform.EnvironmentHealth{Reported: true, Apps: []platform.AppHealth{}, Databases: []platform.DatabaseHealth{}, Buckets: []platform.BucketHealth{}}
	p.health.mu.Lock()
	defer p.health.mu.Unlock()
	now := time.Now()
	for _, app := range slices.Sorted(maps.Keys(def.Applications)) {
		h.Apps = append(h.Apps, appHealth(app, def.Applications[app], o, now))
	}
	return h, nil
}

// appHealth reads one application from its Deployment (a blue-green
// application's live slot) and its pods.
func appHealth(app string, a *compiler.Application, o *namespaceObjects, now time.Time) platform.AppHealth {
	ah := platform.AppHealth{Name: app}
	dep, depName, names, gone := liveDeployment(app, a, o)
	if dep == nil {
		ah.State, ah.Reason, ah.Since = platform.StateMissing, fmt.Sprintf("its Deployment %s is gone (deleted outside the Studio)", names[0]), gone
		return ah
	}
	ah.Desired = num(at(dep, "spec", "replicas"))
	ah.Ready = num(at(dep, "status", "readyReplicas"))
	var problems []platform.PodProblem
	for _, pod := range o.objects[KindPod.Resource] {
		if labelsOf(pod)[LabelService] != labelValue(app) || labelsOf(pod)[LabelComponent] != "application" {
			continue
		}
		ah.Restarts += restartsSince(pod, now.Add(-time.Hour))
		if pr, ok := ClassifyPod(pod, nil); ok {
			problems = append(problems, pr)
		}
	}
	switch {
	case ah.Desired == 0 && max(a.Scaling.Min, 1) > 0:
		ah.State, ah.Reason = platform.StateScaledToZero, fmt.Sprintf("its Deployment %s was scaled to 0 outside the Studio", depName)
	case len(problems) > 0:
		best := problems[0]
		for _, pr := range problems[1:] {
			if rank(pr.State) < rank(best.State) {
				best = pr
			}
		}
		ah.State, ah.Reason, ah.Since, ah.Count = best.State, best.Reason, best.Since, best.Count
		pr := best
		ah.Problem = &pr
	case num(at(dep, "status", "observedGeneration")) < num(at(dep, "metadata", "generation")) ||
		num(at(dep, "status", "updatedReplicas")) < ah.Desired || num(at(dep, "status", "replicas")) > ah.Desired || ah.Ready < ah.Desired:
		ah.State = platform.StateRollingOut
		ah.Since = conditionTime(dep, "Progressing")
	default:
		ah.State = platform.StateRunning
		ah.Since = conditionTime(dep, "Available")
	}
	return ah
}

// restartsSince counts the pod's container restarts whose last
// termination ended after since (a container's earlier restarts are not
// dated: its count is taken when its last one is recent).
func restartsSince(pod Object, since time.Time) int {
	n := 0
	for _, v := range list(pod, "status", "containerStatuses") {
		cs, _ := v.(Object)
		t, _ := time.Parse(time.RFC3339, str(cs, "lastState", "terminated", "finishedAt"))
		if !t.IsZero() && t.After(since) {
			n += num(cs["restartCount"])
		}
	}
	return n
}

// at is the value at path in o.
func at(o Object, path ...string) any {
	var v any = o
	for _, p := range path {
		m, _ := v.(Object)
		v = m[p]
	}
	return v
}

var _ platform.HealthReader = (*Platform)(nil)
