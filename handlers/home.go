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
		for _, p := range projects {
			m.Projects = append(m.Projects, views.ProjectCard{
				Name: p.Name, Description: p.Description, Environments: p.Environments, UpdatedAt: p.CreatedAt,
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
