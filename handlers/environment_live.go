package handlers

import (
	"context"
	"maps"
	"net/http"
	"slices"

	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// environmentLive builds the environment page's live parts: its state in
// words, what it runs and what is newer, a deploy in progress, the values
// changed since the active deploy (names and versions only) and its
// releases.
func (b *Base) environmentLive(ctx context.Context, env *store.Environment, role store.Role, shown shownRevision) (views.EnvironmentLiveView, error) {
	m := views.EnvironmentLiveView{Project: env.Project, Name: env.Name, Role: string(role), State: env.State,
		Revision: shown.Revision.Number, RevisionHash: shown.Revision.Hash, Deployed: shown.Deployed,
		CanDeploy: role.Includes(store.RoleDeployer)}
	if env.ActiveRevisionID != nil {
		m.ActiveRevisionID = *env.ActiveRevisionID
	}
	o, err := b.DB.EnvironmentOverviewOf(ctx, env.ID)
	if err != nil {
		return m, err
	}
	alarm := ""
	if a, err := b.DB.BackupAlarmOf(ctx, env.ID); err != nil {
		return m, err
	} else if a != nil {
		alarm = a.Reason
	}
	m.Status = views.NewEnvironmentStatus(*o, alarm)
	m.Latest = o.Latest
	if o.Deploying {
		m.InProgress, m.InProgressNumber = o.LastDeployID, o.LastDeployNumber
	}
	active, err := b.DB.ActiveRelease(ctx, env.ID)
	if err != nil {
		return m, err
	}
	if active != nil && active.Recorded {
		changes, err := b.DB.ValueChangesSince(ctx, env.ID, active.Values, store.ContractNames(shown.Contract))
		if err != nil {
			return m, err
		}
		m.ValueChanges = views.NewValueChangeViews(changes)
	}
	recent, err := b.DB.Runs(ctx, env.ID, 50)
	if err != nil {
		return m, err
	}
	m.Releases = views.NewReleaseRows(env, recent, active)
	if len(m.Releases) > 5 {
		m.Releases = m.Releases[:5]
	}
	health, err := b.DB.HealthOf(ctx, env.ID)
	if err != nil {
		return m, err
	}
	m.Health = views.NewHealthView(health, shown.Deployed)
	drift, err := b.DB.DriftOf(ctx, env.ID)
	if err != nil {
		return m, err
	}
	m.Drift.Items = views.NewDriftItemViews(drift)
	if m.CanDeploy && shown.Deployed {
		m.Drift.Restore = paths.Redeploy(env.Project, env.Name, shown.Revision.Number)
	}
	if shown.Def != nil {
		m.AppNames = slices.Sorted(maps.Keys(shown.Def.Applications))
		m.DatabaseNames = slices.Sorted(maps.Keys(shown.Def.Databases))
		m.BucketNames = slices.Sorted(maps.Keys(shown.Def.Buckets))
	}
	return m, nil
}

// ShowEnvironmentLive answers the environment page's live parts (any
// role), which its script fetches again when the environment's stream
// brings an event: each top-level element replaces the page's element of
// the same id.
func (h *Environments) ShowEnvironmentLive(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	env, role, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	shown, err := h.shownRevision(ctx, env)
	if err != nil {
		return err
	}
	m, err := h.environmentLive(ctx, env, role, shown)
	if err != nil {
		return err
	}
	certs, err := h.DB.Certificates(ctx, env.ID)
	if err != nil {
		return err
	}
	now := h.DB.Now()
	for _, c := range certs {
		d := views.DNSSlot{Domain: c.Domain}
		if dnsPending(c) {
			if d.DNS, err = dnsPendingView(ctx, h.DB, h.Runs, env, c, now, m.CanDeploy, 0); err != nil {
				return err
			}
		}
		m.DNS = append(m.DNS, d)
	}
	return Render(w, r, http.StatusOK, views.EnvironmentLiveParts(m))
}
