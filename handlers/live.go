package handlers

import (
	"context"
	"strconv"

	"github.com/a-h/templ"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// LiveFragments renders the parts of the run and environment pages that
// their event streams swap in place, from what is stored now. A stream sends
// one frame to every watcher, so nothing here depends on who watches: the
// role-dependent actions (cancel, Check now, Deploy) stay outside these
// parts.
type LiveFragments struct {
	DB *store.DB
}

// Run returns, by element id, the components a change of the run replaces:
// its heading (id run-header), its summary (id run-summary) and, when
// position names one, that checkpoint's
// row (id checkpoint-<position>).
func (f LiveFragments) Run(ctx context.Context, runID int64, position *int) (map[string]templ.Component, error) {
	run, env, cp, err := f.DB.RunForPage(ctx, runID, position)
	if err != nil {
		return nil, err
	}
	now := f.DB.Now()
	vm := runView(env, run, now, false)
	out := map[string]templ.Component{"run-header": views.RunHeading(vm), "run-summary": views.RunSummary(vm)}
	if cp != nil {
		out["checkpoint-"+strconv.Itoa(cp.Position)] = views.CheckpointRow(CheckpointView(env, run, *cp, now))
	}
	return out, nil
}

// Environment returns, by element id, the components an environment event
// replaces: the list of its latest runs (id latest-runs).
func (f LiveFragments) Environment(ctx context.Context, envID int64) (map[string]templ.Component, error) {
	env, err := f.DB.EnvironmentByID(ctx, envID)
	if err != nil {
		return nil, err
	}
	latest, err := f.DB.Runs(ctx, envID, latestRunsShown)
	if err != nil {
		return nil, err
	}
	now := f.DB.Now()
	rs := make([]views.RunView, 0, len(latest))
	for i := range latest {
		rs = append(rs, runView(env, &latest[i], now, false))
	}
	// The missing-values hint of an empty list needs the values; an event
	// means a run exists, so the list is never empty here.
	return map[string]templ.Component{"latest-runs": views.LatestRuns(rs, false)}, nil
}
