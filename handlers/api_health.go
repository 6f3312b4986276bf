package handlers

import (
	"net/http"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// apiHealth is an environment's health as the API answers it.
type apiHealth struct {
	Project     string `json:"project"`
	Environment string `json:"environment"`
	// Level is healthy, degraded, down, or unknown (nothing reported).
	Level        string             `json:"level"`
	Reported     bool               `json:"reported"`
	Note         string             `json:"note,omitempty"`
	UpdatedAt    *time.Time         `json:"updated_at,omitempty"`
	Applications []apiAppHealth     `json:"applications"`
	Databases    []apiServiceHealth `json:"databases"`
	Buckets      []apiServiceHealth `json:"buckets"`
	// Drift is what was changed outside the Studio (names, never an
	// environment variable's value).
	Drift []apiDrift `json:"drift"`
}

type apiDrift struct {
	App     string    `json:"app"`
	Kind    string    `json:"kind"`
	Object  string    `json:"object"`
	Field   string    `json:"field"`
	Now     string    `json:"now"`
	Applied string    `json:"applied"`
	Since   time.Time `json:"since"`
}

type apiAppHealth struct {
	Name     string     `json:"name"`
	State    string     `json:"state"`
	Healthy  bool       `json:"healthy"`
	Ready    int        `json:"ready"`
	Desired  int        `json:"desired"`
	Restarts int        `json:"restarts"`
	Since    *time.Time `json:"since,omitempty"`
	Count    int        `json:"count"`
	Reason   string     `json:"reason"`
}

type apiServiceHealth struct {
	Name    string `json:"name"`
	Phase   string `json:"phase"`
	Healthy bool   `json:"healthy"`
}

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
	out := apiHealth{Project: env.Project, Environment: env.Name, Level: v.Level, Note: v.Note,
		Reported:     deployed && stored.Report.Reported,
		Applications: []apiAppHealth{}, Databases: []apiServiceHealth{}, Buckets: []apiServiceHealth{}, Drift: []apiDrift{}}
	if out.Reported {
		at := stored.UpdatedAt.UTC()
		out.UpdatedAt = &at
		for _, a := range stored.Report.Apps {
			ah := apiAppHealth{Name: a.Name, State: string(a.State), Healthy: a.State.Healthy(), Ready: a.Ready, Desired: a.Desired,
				Restarts: a.Restarts, Count: a.Count, Reason: a.Reason}
			if !a.Since.IsZero() {
				s := a.Since.UTC()
				ah.Since = &s
			}
			out.Applications = append(out.Applications, ah)
		}
		for _, d := range stored.Report.Databases {
			out.Databases = append(out.Databases, apiServiceHealth{Name: d.Name, Phase: d.Phase, Healthy: d.Healthy})
		}
		for _, b := range stored.Report.Buckets {
			out.Buckets = append(out.Buckets, apiServiceHealth{Name: b.Name, Phase: b.Phase, Healthy: b.Healthy})
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
			out.Drift = append(out.Drift, apiDrift{App: d.App, Kind: string(d.Kind), Object: d.Object, Field: d.Field, Now: d.Now, Applied: d.Applied, Since: d.Since.UTC()})
		}
	}
	return WriteJSON(w, http.StatusOK, out)
}
