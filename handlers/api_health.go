package handlers

import (
	"net/http"

	"github.com/skali-dev/studio/api"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// ShowHealth answers what the platform last reported of what the
// environment runs: GET .../health (viewer). Nothing is claimed that the
// platform did not report: an environment never deployed, or one the
// platform knows nothing of, is unknown.
func (h *API) ShowHealth(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	stored, err := h.DB.HealthOf(r.Context(), env.ID)
	if err != nil {
		return err
	}
	deployed := env.ActiveRevisionID != nil
	v := views.NewHealthView(stored, deployed)
	out := api.Health{Project: env.Project, Environment: env.Name, Level: v.Level, Note: v.Note,
		Reported:     deployed && stored.Report.Reported,
		Applications: []api.AppHealth{}, Databases: []api.ServiceHealth{}, Buckets: []api.ServiceHealth{}, Drift: []api.Drift{}}
	if out.Reported {
		at := stored.UpdatedAt.UTC()
		out.UpdatedAt = &at
		for _, a := range stored.Report.Apps {
			ah := api.AppHealth{Name: a.Name, State: string(a.State), Healthy: a.State.Healthy(), Ready: a.Ready, Desired: a.Desired,
				Restarts: a.Restarts, Count: a.Count, Reason: a.Reason}
			if !a.Since.IsZero() {
				s := a.Since.UTC()
				ah.Since = &s
			}
			out.Applications = append(out.Applications, ah)
		}
		for _, d := range stored.Report.Databases {
			out.Databases = append(out.Databases, api.ServiceHealth{Name: d.Name, Phase: d.Phase, Healthy: d.Healthy})
		}
		for _, b := range stored.Report.Buckets {
			out.Buckets = append(out.Buckets, api.ServiceHealth{Name: b.Name, Phase: b.Phase, Healthy: b.Healthy})
		}
	}
	if !out.Reported {
		out.Level = string(platform.HealthUnknown)
	} else {
		drift, err := h.DB.DriftOf(r.Context(), env.ID)
		if err != nil {
			return err
		}
		for _, d := range drift {
			out.Drift = append(out.Drift, api.Drift{App: d.App, Kind: string(d.Kind), Object: d.Object, Field: d.Field, Now: d.Now, Applied: d.Applied, Since: d.Since.UTC()})
		}
	}
	return WriteJSON(w, http.StatusOK, out)
}
