package runs

import (
	"context"
	"maps"
	"slices"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// prune asks the platform to delete what the services the run's revision
// no longer declares (compared with the environment's active revision)
// left behind, as the run's revision goes live. A removed database or
// bucket is deleted only when the deploy's plan was confirmed by typing
// the environment's name (its removal needs that confirmation to start).
func (r *Runner) prune(ctx context.Context, rc *runContext) error {
	if rc.env.ActiveRevisionID == nil || rc.run.RevisionID == nil || *rc.env.ActiveRevisionID == *rc.run.RevisionID || rc.def == nil {
		return nil
	}
	active, err := r.DB.RevisionByID(ctx, *rc.env.ActiveRevisionID)
	if err != nil {
		return err
	}
	removed := removedServices(active.Definition, rc.def, rc.det.Confirmed)
	if len(removed) == 0 {
		return nil
	}
	return r.Platform.Prune(ctx, platformEnv(rc.env), removed, platform.Discard)
}

// removedServices lists the services from declares and to does not:
// applications always, databases and buckets only when confirmed.
func removedServices(from, to *compiler.Definition, confirmed bool) []platform.RemovedService {
	if from == nil || to == nil {
		return nil
	}
	var out []platform.RemovedService
	for _, n := range slices.Sorted(maps.Keys(from.Applications)) {
		if to.Applications[n] == nil {
			out = append(out, platform.RemovedService{Kind: "application", Name: n})
		}
	}
	if !confirmed {
		return out
	}
	for _, n := range slices.Sorted(maps.Keys(from.Databases)) {
		if to.Databases[n] == nil {
			out = append(out, platform.RemovedService{Kind: "database", Name: n})
		}
	}
	for _, n := range slices.Sorted(maps.Keys(from.Buckets)) {
		if to.Buckets[n] == nil {
			out = append(out, platform.RemovedService{Kind: "bucket", Name: n})
		}
	}
	return out
}
