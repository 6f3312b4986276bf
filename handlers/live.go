package handlers

import (
	"strconv"
	"time"

	"github.com/a-h/templ"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// LiveFragments renders the parts of the run and environment pages that
// their event streams swap in place, from the state the event hub read
// together with the events (so a frame costs no query of its own). A stream
// sends one frame to every watcher, so nothing here depends on who watches:
// the role-dependent actions (cancel, Check now, Deploy) stay outside these
// parts.
type LiveFragments struct {
	// Now is the clock the durations are measured with.
	Now func() time.Time
}

// Run returns, by element id, the components a change of the run replaces:
// its heading (id run-header), its summary (id run-summary) and, when cp is
// set, that checkpoint's row (id checkpoint-<position>).
func (f LiveFragments) Run(run *store.Run, env *store.Environment, cp *store.Checkpoint) map[string]templ.Component {
	now := f.Now()
	vm := runView(env, run, now, false)
	out := map[string]templ.Component{"run-header": views.RunHeading(vm), "run-summary": views.RunSummary(vm)}
	if cp != nil {
		out["checkpoint-"+strconv.Itoa(cp.Position)] = views.CheckpointRow(CheckpointView(env, run, *cp, now))
	}
	return out
}

// Environment returns, by element id, the components an environment event
// replaces: the list of its latest runs (id latest-runs), its state with the
// revision it runs (id env-state), when run is set (the event concerns a
// run) that run's row of the runs list (id run-row-<id>, inserted in order
// when the list does not show it yet) and, when cert is
// set (the event changed a service's state), that hostname's TLS state
// (every element whose data-live is service-state-<domain>). The domain is
// the event's own: nothing is shown that the event does not carry already.
func (f LiveFragments) Environment(env *store.Environment, latest []store.Run, run *store.Run, cert *store.Certificate) map[string]templ.Component {
	now := f.Now()
	rs := make([]views.RunView, 0, len(latest))
	for i := range latest {
		rs = append(rs, runView(env, &latest[i], now, false))
	}
	// The missing-values hint of an empty list needs the values; an event
	// means a run exists, so the list is never empty here.
	var active int64
	if env.ActiveRevisionID != nil {
		active = *env.ActiveRevisionID
	}
	out := map[string]templ.Component{
		"latest-runs": views.LatestRuns(rs, false),
		"env-state":   views.EnvironmentLiveState(env.State, active),
	}
	if run != nil {
		out[views.RunRowID(run.ID)] = views.RunRow(runView(env, run, now, false))
	}
	if cert != nil {
		out["service-state-"+cert.Domain] = views.ServiceStateBadge(cert.Domain, serviceState(*cert), cert.State)
	}
	return out
}
