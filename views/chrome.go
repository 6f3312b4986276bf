// Package views holds the Studio's templ components: the layout, one file per
// page and shared partials. Every page takes one typed view model; no
// component queries anything.
//
// One way to refresh on an event. Every page is whole without JavaScript;
// a live page's parts change in one of two ways:
//
//   - What is the same for every reader (a checkpoint's row, a run's
//     status, the environment's state, a domain's TLS state) is pushed:
//     the event streams send fragments (Fragment, rendered by
//     RunFragments and EnvironmentFragments), each replacing the element
//     of its id. Nothing in them depends on who watches.
//   - What depends on the reader's role (an action such as Restore, Take a
//     snapshot now or Check now, the navigation's count of approvals) is
//     fetched from the page's one …/live endpoint (paths.EnvironmentLive,
//     paths.BackupsLive, paths.RunLive; paths.ApprovalsLive for the
//     navigation), which checks the page's role and answers a component
//     of top-level elements with ids, each replacing the page's element
//     of that id (EnvironmentLiveParts, BackupsLiveParts, RunLiveParts,
//     ApprovalsCount). The page renders the same components, names the
//     endpoint in data-live-src and, in data-live-on, the frames that
//     call for a read; one helper in static/js/live.js reads it.
//
// A pushed part that holds a role-dependent one carries it as an empty
// slot with an id (DNSPendingSlot), which the page keeps or fetches. No
// script reads a whole page again.
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
