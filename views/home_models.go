package views

import "time"

// HomePage is the model of the home page: the projects the user can see.
type HomePage struct {
	Chrome   Chrome
	Projects []ProjectCard
	// CanCreate is true when the user may create projects.
	CanCreate bool
	// BackupAlarms are the visible environments whose backups need attention.
	BackupAlarms []BackupAlarmView
}

// ProjectCard is one project on the home page.
type ProjectCard struct {
	Name         string
	Description  string
	Environments []string
	UpdatedAt    time.Time
	// Statuses are its visible environments with their state.
	Statuses []EnvironmentStatusView
}
