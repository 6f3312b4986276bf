package handlers

import (
	"context"
	"net/http"
	"strconv"

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
		// The backup alarms are read once, for the chips and the list.
		alarms, err := h.DB.BackupAlarms(r.Context())
		if err != nil {
			return err
		}
		m.Page = 1
		if p, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && p > 1 && p < 100_000 {
			m.Page = p
		}
		projects, more, err := h.DB.VisibleProjectsPage(r.Context(), u, (m.Page-1)*HomeProjectsShown, HomeProjectsShown)
		if err != nil {
			return err
		}
		m.More = more
		ids := make([]int64, len(projects))
		for i, p := range projects {
			ids[i] = p.ID
		}
		overviews, err := h.DB.FirstEnvironmentOverviewsOfProjects(r.Context(), u, ids, HomeStatusesShown)
		if err != nil {
			return err
		}
		statuses := statusesByProject(overviews, alarms)
		if err := withHealth(r.Context(), h.Base, overviews, statuses); err != nil {
			return err
		}
		for _, p := range projects {
			card := views.ProjectCard{
				Name: p.Name, Description: p.Description, UpdatedAt: p.CreatedAt,
				Statuses: statuses[p.Name],
			}
			card.MoreStatuses = max(0, p.EnvironmentCount-len(card.Statuses))
			m.Projects = append(m.Projects, card)
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

// HomeProjectsShown is how many projects a page of the home page shows;
// HomeStatusesShown how many environments a project card shows.
const (
	HomeProjectsShown = 30
	HomeStatusesShown = 8
)

// environmentStatusesOf says the state of the environments ids, by project
// name.
func environmentStatusesOf(ctx context.Context, b *Base, ids []int64) (map[string][]views.EnvironmentStatusView, error) {
	overviews, err := b.DB.EnvironmentOverviewsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	alarms, err := b.DB.BackupAlarms(ctx)
	if err != nil {
		return nil, err
	}
	out := statusesByProject(overviews, alarms)
	return out, withHealth(ctx, b, overviews, out)
}

// withHealth adds to each deployed environment's status what its
// platform last reported, in one word.
func withHealth(ctx context.Context, b *Base, overviews []store.EnvironmentOverview, out map[string][]views.EnvironmentStatusView) error {
	ids := make([]int64, 0, len(overviews))
	for _, o := range overviews {
		ids = append(ids, o.ID)
	}
	levels, err := b.DB.HealthLevels(ctx, ids)
	if err != nil {
		return err
	}
	for _, o := range overviews {
		for i := range out[o.Project] {
			if st := &out[o.Project][i]; st.Env == o.Name && st.Status != "not-deployed" {
				st.Health, st.HealthBadge = views.HealthLevelView(levels[o.ID])
			}
		}
	}
	return nil
}

// statusesByProject is each overview's status with its backup alarm, by
// project name.
func statusesByProject(overviews []store.EnvironmentOverview, alarms []store.BackupAlarm) map[string][]views.EnvironmentStatusView {
	alarmOf := map[int64]string{}
	for _, a := range alarms {
		alarmOf[a.EnvironmentID] = a.Reason
	}
	out := map[string][]views.EnvironmentStatusView{}
	for _, o := range overviews {
		out[o.Project] = append(out[o.Project], views.NewEnvironmentStatus(o, alarmOf[o.ID]))
	}
	return out
}
