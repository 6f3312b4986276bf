package views

import "time"

// ManifestForm is a form that takes a skali.yaml: what was pasted (a
// manifest holds no secrets, so it is shown again) and, after a failed post,
// the compiler's report or one error sentence.
type ManifestForm struct {
	Action string
	Source string
	// Report shows a manifest that did not compile: its diagnostics at
	// their lines (the partial of the /validate page).
	Report *ManifestReport
	Error  string
	Submit string
}

// NewProjectPage is the model of the new-project page.
type NewProjectPage struct {
	Chrome Chrome
	Form   ManifestForm
}

// NewRevisionPage is the model of the page that adds a manifest revision.
type NewRevisionPage struct {
	Chrome  Chrome
	Project string
	Form    ManifestForm
}

// ProjectPage is the model of a project's page.
type ProjectPage struct {
	Chrome       Chrome
	Name         string
	Description  string
	Environments []EnvironmentRow
	// EnvPage is the page of environments shown (from 1), EnvFrom the
	// number of its first, EnvMore whether a next page follows.
	EnvPage, EnvFrom int
	EnvMore          bool
	Revisions        []RevisionRow
	// CanAddRevision: installation admins, deployers and admins of an environment.
	CanAddRevision bool
	// CanCreateEnvironment: installation admins.
	CanCreateEnvironment bool
	// NewEnvironmentName and NewEnvironmentError re-show a failed form.
	NewEnvironmentName  string
	NewEnvironmentError string
	// CanSettings links the project's settings page (its danger zone):
	// installation admins.
	CanSettings bool
}

// EnvironmentRow is one environment on the project page.
type EnvironmentRow struct {
	Name  string
	State string
	// Revision is the number of the revision it runs, 0 before a deploy.
	Revision  int
	CreatedAt time.Time
	// Status is its state in words (running revision N, deploying, ...).
	Status EnvironmentStatusView
}

// RevisionRow is one manifest revision on the project page.
type RevisionRow struct {
	Number    int
	Hash      string
	CreatedBy string
	CreatedAt time.Time
	Summary   string
	Latest    bool
	// Changes are the first changes of the compiled definition against
	// the previous revision (compiler.Compare); More counts the rest.
	Changes []string
	More    int
	First   bool
}

func envStateBadge(state string) string {
	switch state {
	case "active":
		return "badge-ok"
	case "restoring":
		return "badge-info"
	}
	return "badge-danger"
}

func invalidAttr(invalid bool) string {
	if invalid {
		return "true"
	}
	return "false"
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// describedBy returns the id an input's aria-describedby names: its error
// when there is one, its hint otherwise.
func describedBy(failed bool, errorID, hintID string) string {
	if failed {
		return errorID
	}
	return hintID
}
