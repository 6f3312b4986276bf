// Package views holds the Studio's templ components: the layout, one file per
// page and shared partials. Every page takes one typed view model; no
// component queries anything.
package views

import "strings"

// Chrome is what the layout needs on every page: the title, the signed-in
// user, the active navigation entry and a flash message.
type Chrome struct {
	Title string
	// Nav names the active top-level entry: "projects", "validate", "audit", "admin".
	Nav   string
	User  *UserChip
	Flash *Flash
	// Refresh, when positive, reloads the page after this many seconds:
	// an unfinished run's page when JavaScript is off (with it, the page
	// follows its event stream instead; CSP forbids inline script, so the
	// refresh sits in <noscript>).
	Refresh int
}

// UserChip is the signed-in user as the top bar shows them.
type UserChip struct {
	Name    string
	Email   string
	IsAdmin bool
	// SeesAudit is true for installation admins and environment admins.
	SeesAudit bool
	// Approvals is how many runs wait for their approval (the inbox).
	Approvals int
}

// Initials returns up to two letters for the avatar.
func (u *UserChip) Initials() string {
	name := u.Name
	if name == "" {
		name = u.Email
	}
	var out []rune
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == ' ' || r == '.' || r == '@' || r == '-' }) {
		for _, r := range part {
			out = append(out, r)
			break
		}
		if len(out) == 2 {
			break
		}
	}
	return strings.ToUpper(string(out))
}

// Flash is a one-time message shown at the top of the next page.
type Flash struct {
	// Kind is "success", "error" or "info".
	Kind    string
	Message string
}

func navCurrent(c Chrome, name string) string {
	if c.Nav == name {
		return "page"
	}
	return ""
}

func pageTitle(c Chrome) string {
	if c.Title == "" {
		return "Skali Studio"
	}
	return c.Title + " · Skali Studio"
}
