package views

// SettingsPage is an environment's or a project's settings page: links to
// the pages that configure it, and its danger zone (issue 42: the danger
// zone lives here, not on the overview).
type SettingsPage struct {
	Chrome Chrome
	Crumbs Trail
	// Title names what the settings are of ("production of team-wiki").
	Title string
	Intro string
	Links []SettingsLink
	Zone  DangerZone
}

// SettingsLink is one page of settings, with what it sets.
type SettingsLink struct {
	Label, Href, Explain string
}
