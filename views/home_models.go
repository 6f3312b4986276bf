package views

import (
	"strconv"
	"time"
)

// HomePage is the model of the home page: the projects the user can see.
type HomePage struct {
	Chrome   Chrome
	Projects []ProjectCard
	// CanCreate is true when the user may create projects.
	CanCreate bool
	// BackupAlarms are the visible environments whose backups need attention.
	BackupAlarms []BackupAlarmView
	// Page is the page of projects shown; More says more follow.
	Page int
	More bool
}

// ProjectCard is one project on the home page.
type ProjectCard struct {
	Name         string
	Description  string
	Environments []string
	UpdatedAt    time.Time
	// Statuses are its visible environments with their state.
	Statuses []EnvironmentStatusView
	// MoreStatuses counts its environments not shown on the card.
	MoreStatuses int
}

// homePageHref is page p of the home page's projects.
func homePageHref(p int) string {
	if p <= 1 {
		return "/"
	}
	return "/?page=" + strconv.Itoa(p)
}
