package local

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// DriftFault is what someone outside the Studio did to a deployed
// application of the local platform (Faults.Drift, by application): scaled
// it, set another image, changed its environment, deleted it, removed or
// suspended its autoscaler. It happens once: at once to every environment
// that runs the application when it is set (Faults.Set), otherwise at the
// end of the application's next rollout; the rollout after that (a
// redeploy: "Restore what the Studio deployed") undoes it, as applying
// again does on a cluster.
type DriftFault struct {
	// Replicas is the replica count it was scaled to.
	Replicas *int `json:"replicas,omitempty"`
	// Image is the image it was set to.
	Image string `json:"image,omitempty"`
	// Env are environment variables set (to a value never shown) or, with
	// "", removed.
	Env map[string]string `json:"env,omitempty"`
	// Deleted: its workload was deleted.
	Deleted bool `json:"deleted,omitempty"`
	// Autoscaler is "removed" or "suspended" (its range pinned).
	Autoscaler string `json:"autoscaler,omitempty"`
}

// driftSeen is a drift fault that happened to one environment's
// application, and when.
type driftSeen struct {
	fault DriftFault
	at    time.Time
}

// applyPendingDrift moves each pending drift fault to the environments
// that run its application now; one that none runs waits for a rollout.
func (l *Platform) applyPendingDrift() {
	if l.Faults == nil {
		return
	}
	now := time.Now()
	l.Faults.mu.Lock()
	defer l.Faults.mu.Unlock()
	l.sim.mu.Lock()
	defer l.sim.mu.Unlock()
	l.sim.init()
	for app, f := range l.Faults.Drift {
		applied := false
		for id, apps := range l.sim.apps {
			if apps[app] {
				l.sim.setDrift(id, app, f, now)
				applied = true
			}
		}
		if applied {
			delete(l.Faults.Drift, app)
		}
	}
}

// rolledOut is the end of a rollout of app in env: what the Studio
// deployed runs again (its drift is undone), and a pending drift fault of
// the application happens now.
func (l *Platform) rolledOut(env platform.Env, app string) {
	var pending *DriftFault
	if l.Faults != nil {
		l.Faults.mu.Lock()
		pending = l.Faults.Drift[app]
		delete(l.Faults.Drift, app)
		l.Faults.mu.Unlock()
	}
	l.sim.mu.Lock()
	l.sim.init()
	if l.sim.apps[env.ID] == nil {
		l.sim.apps[env.ID] = map[string]bool{}
	}
	l.sim.apps[env.ID][app] = true
	delete(l.sim.drift[env.ID], app)
	if pending != nil {
		l.sim.setDrift(env.ID, app, pending, time.Now())
	}
	l.sim.mu.Unlock()
}

// setDrift records f on the environment's application (under sim.mu).
func (s *simulation) setDrift(envID int64, app string, f *DriftFault, at time.Time) {
	if s.drift[envID] == nil {
		s.drift[envID] = map[string]driftSeen{}
	}
	c := *f
	c.Env = maps.Clone(f.Env)
	s.drift[envID][app] = driftSeen{fault: c, at: at}
}

// driftOf is the drift of the environment's application, if any (under
// sim.mu).
func (s *simulation) driftOf(envID int64, app string) (driftSeen, bool) {
	d, ok := s.drift[envID][app]
	return d, ok
}

// Drift implements platform.DriftReader from the simulation.
func (l *Platform) Drift(ctx context.Context, env platform.Env, def *compiler.Definition) ([]platform.Drift, error) {
	if def == nil {
		return nil, nil
	}
	l.sim.mu.Lock()
	l.sim.init()
	seen := maps.Clone(l.sim.drift[env.ID])
	l.sim.mu.Unlock()
	var out []platform.Drift
	for _, app := range slices.Sorted(maps.Keys(def.Applications)) {
		d, ok := seen[app]
		if !ok {
			continue
		}
		out = append(out, appDrift(app, def.Applications[app], d)...)
	}
	return out, nil
}

// appDrift lists what a drift fault changed of an application, against
// what its definition says the Studio applied.
func appDrift(app string, a *compiler.Application, d driftSeen) []platform.Drift {
	obj := "workload " + app
	item := func(kind platform.DriftKind, field, now, applied string) platform.Drift {
		return platform.Drift{App: app, Kind: kind, Object: obj, Field: field, Now: now, Applied: applied, Since: d.at}
	}
	f := d.fault
	if f.Deleted {
		return []platform.Drift{item(platform.DriftDeleted, "", "deleted", "present")}
	}
	var out []platform.Drift
	if f.Replicas != nil {
		out = append(out, item(platform.DriftReplicas, "replicas", strconv.Itoa(*f.Replicas), appliedReplicas(a)))
	}
	if f.Image != "" {
		applied := a.Image
		if applied == "" {
			applied = "the image the Studio built"
		}
		out = append(out, item(platform.DriftImage, "image", f.Image, applied))
	}
	for _, name := range slices.Sorted(maps.Keys(f.Env)) {
		_, declared := a.Environment[name]
		switch {
		case f.Env[name] == "" && declared:
			out = append(out, item(platform.DriftEnv, "env "+name, "removed", "set"))
		case f.Env[name] == "":
		case declared:
			out = append(out, item(platform.DriftEnv, "env "+name, "changed", "set"))
		default:
			out = append(out, item(platform.DriftEnv, "env "+name, "set", "not set"))
		}
	}
	if f.Autoscaler != "" && a.Scaling.Max > a.Scaling.Min {
		out = append(out, platform.Drift{App: app, Kind: platform.DriftAutoscaler, Object: "autoscaler " + app, Now: f.Autoscaler,
			Applied: fmt.Sprintf("%d to %d replicas", a.Scaling.Min, a.Scaling.Max), Since: d.at})
	}
	return out
}

// appliedReplicas is the replica count (or range) the Studio applies for a.
func appliedReplicas(a *compiler.Application) string {
	if a.Scaling.Max > a.Scaling.Min {
		return fmt.Sprintf("%d to %d", a.Scaling.Min, a.Scaling.Max)
	}
	return strconv.Itoa(max(a.Scaling.Min, 1))
}

var _ platform.DriftReader = (*Platform)(nil)
