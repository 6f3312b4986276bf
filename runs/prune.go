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
// Routes an application still declared dropped, and the certificates of
// domains no route of the run serves, go too.
func (r *Runner) prune(ctx context.Context, rc *runContext) error {
	if rc.def == nil {
		return nil
	}
	var removed []platform.RemovedService
	if rc.env.ActiveRevisionID != nil && rc.run.RevisionID != nil && *rc.env.ActiveRevisionID != *rc.run.RevisionID {
		active, err := r.DB.RevisionByID(ctx, *rc.env.ActiveRevisionID)
		if err != nil {
			return err
		}
		removed = append(removedServices(active.Definition, rc.def, rc.det.Confirmed), removedRoutes(active.Definition, rc.def)...)
	}
	domains, err := r.removedDomains(ctx, rc)
	if err != nil {
		return err
	}
	removed = append(removed, domains...)
	if len(removed) == 0 {
		return nil
	}
	return r.Platform.Prune(ctx, platformEnv(rc.env), removed, platform.Discard)
}

// removedRoutes lists the routes of applications both revisions declare
// that to no longer has ("APP/ROUTE"); a removed application's routes go
// with it.
func removedRoutes(from, to *compiler.Definition) []platform.RemovedService {
	if from == nil || to == nil {
		return nil
	}
	var out []platform.RemovedService
	for _, app := range slices.Sorted(maps.Keys(from.Applications)) {
		now := to.Applications[app]
		if now == nil {
			continue
		}
		for _, rn := range slices.Sorted(maps.Keys(from.Applications[app].Routes)) {
			if now.Routes[rn] == nil {
				out = append(out, platform.RemovedService{Kind: "route", Name: app + "/" + rn})
			}
		}
	}
	return out
}

// removedDomains lists the domains the environment has a certificate for
// that none of the run's routes serves any more (a route or application
// removed, a domain's value changed): their certificates go.
func (r *Runner) removedDomains(ctx context.Context, rc *runContext) ([]platform.RemovedService, error) {
	certs, err := r.DB.Certificates(ctx, rc.env.ID)
	if err != nil || len(certs) == 0 {
		return nil, err
	}
	cps, err := r.DB.Checkpoints(ctx, rc.run.ID)
	if err != nil {
		return nil, err
	}
	kept := map[string]bool{}
	for _, c := range cps {
		if t := DecodeCheckpointDetail(c.Detail).TLS; t != nil && t.Domain != "" {
			kept[t.Domain] = true
		}
	}
	var out []platform.RemovedService
	for _, c := range certs {
		if !kept[c.Domain] {
			out = append(out, platform.RemovedService{Kind: "domain", Name: c.Domain})
		}
	}
	return out, nil
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
