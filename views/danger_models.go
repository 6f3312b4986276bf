package views

// DangerZone is a destructive action guarded by typing a name: deleting an
// environment or a project.
type DangerZone struct {
	// Heading and Explain say what goes and what stays.
	Heading string
	Explain string
	// Action is where the form posts; Confirm is the name to type.
	Action  string
	Confirm string
	// Typed and Error re-show a failed confirmation.
	Typed string
	Error string
	// Blocked, when not empty, says why the action is refused now; the
	// form is not shown.
	Blocked string
	Button  string
}

// DeletePage is the page of one destructive action: the danger zone on its
// own, which a failed confirmation re-renders at the form's own URL.
type DeletePage struct {
	Chrome Chrome
	// Crumbs lead to the thing being deleted.
	Crumbs Trail
	Zone   DangerZone
	// Back is where Cancel leads.
	Back string
}
