package handlers

import (
	"net/http"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// Home shows the projects the signed-in user can see.
type Home struct {
	*Base
}

// NewHome returns the home page handler.
func NewHome(b *Base) *Home { return &Home{Base: b} }

// ShowHomePage renders the home page: every project the user can see, with
// the environments they can see in it.
func (h *Home) ShowHomePage(w http.ResponseWriter, r *http.Request) error {
	u := CurrentUser(r.Context())
	m := views.HomePage{
		Chrome:    h.Chrome(r, "Projects", "projects"),
		CanCreate: u != nil && u.IsAdmin,
	}
	if u != nil {
		projects, err := h.DB.VisibleProjects(r.Context(), u)
		if err != nil {
			return err
		}
		statuses, err := environmentStatuses(r, h.Base, u, 0)
		if err != nil {
			return err
		}
		for _, p := range projects {
			m.Projects = append(m.Projects, views.ProjectCard{
				Name: p.Name, Description: p.Description, Environments: p.Environments, UpdatedAt: p.CreatedAt,
				Statuses: statuses[p.Name],
			})
		}
	}
	if u != nil {
		alarms, err := h.DB.BackupAlarms(r.Context())
		if err != nil {
			return err
		}
		for _, a := range alarms {
			if !u.IsAdmin {
				if role, err := h.DB.EnvironmentRole(r.Context(), u, a.EnvironmentID); err != nil || role == store.RoleNone {
					continue
				}
			}
			m.BackupAlarms = append(m.BackupAlarms, views.NewBackupAlarmView(a))
		}
	}
	return Render(w, r, http.StatusOK, views.Home(m))
}

// environmentStatuses says the state of every environment u may see (of
// one project, or all when projectID is 0), by project name.
func environmentStatuses(r *http.Request, b *Base, u *store.User, projectID int64) (map[string][]views.EnvironmentStatusView, error) {
	overviews, err := b.DB.EnvironmentOverviews(r.Context(), u, projectID)
	if err != nil {
		return nil, err
	}
	alarms, err := b.DB.BackupAlarms(r.Context())
	if err != nil {
		return nil, err
	}
	alarmOf := map[int64]string{}
	for _, a := range alarms {
		alarmOf[a.EnvironmentID] = a.Reason
	}
	out := map[string][]views.EnvironmentStatusView{}
	for _, o := range overviews {
		out[o.Project] = append(out[o.Project], views.NewEnvironmentStatus(o, alarmOf[o.ID]))
	}
	return out, nil
}
