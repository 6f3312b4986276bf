package views

import (
	"strconv"

	"github.com/skali-dev/studio/paths"
)

// Crumb is one step of a breadcrumb trail: a label and the page it leads
// to.
type Crumb struct {
	Label string
	Href  string
}

// Trail is the way from the projects list down to a page, one crumb per
// step, the page itself last. Breadcrumbs renders it; the functions below
// build the trail of each kind of page, so that a page names what it is
// (the runs list of an environment) rather than spelling out its trail.
type Trail []Crumb

// Then is the trail of a page under the last one that is not a step of
// any other trail: a confirmation ("Delete") or a form ("New revision").
func (t Trail) Then(label string) Trail {
	return append(t[:len(t):len(t)], Crumb{Label: label})
}

// ProjectsTrail is the trail of the projects list, where every trail
// starts.
func ProjectsTrail() Trail { return Trail{{Label: "Projects", Href: paths.Home}} }

// ProjectTrail is the trail of a project's page.
func ProjectTrail(project string) Trail {
	return append(ProjectsTrail(), Crumb{Label: project, Href: paths.Project(project)})
}

// RevisionTrail is the trail of revision n of a project, found through
// the revisions section of the project's page.
func RevisionTrail(project string, n int) Trail {
	return append(ProjectTrail(project),
		Crumb{Label: "Revisions", Href: paths.Project(project) + "#revisions"},
		Crumb{Label: strconv.Itoa(n), Href: paths.Revision(project, n)})
}

// EnvironmentTrail is the trail of an environment's overview.
func EnvironmentTrail(project, env string) Trail {
	return append(ProjectTrail(project), Crumb{Label: env, Href: paths.Environment(project, env)})
}

// ValuesTrail is the trail of an environment's values page.
func ValuesTrail(project, env string) Trail {
	return append(EnvironmentTrail(project, env), Crumb{Label: "Values", Href: paths.Values(project, env)})
}

// MembersTrail is the trail of an environment's members page.
func MembersTrail(project, env string) Trail {
	return append(EnvironmentTrail(project, env), Crumb{Label: "Members", Href: paths.Members(project, env)})
}

// BackupsTrail is the trail of an environment's backups page.
func BackupsTrail(project, env string) Trail {
	return append(EnvironmentTrail(project, env), Crumb{Label: "Backups", Href: paths.Backups(project, env)})
}

// RunsTrail is the trail of an environment's runs list.
func RunsTrail(project, env string) Trail {
	return append(EnvironmentTrail(project, env), Crumb{Label: "Runs", Href: paths.Runs(project, env)})
}

// RunTrail is the trail of a run's page.
func RunTrail(project, env string, id int64, number int) Trail {
	return append(RunsTrail(project, env), Crumb{Label: "#" + strconv.Itoa(number), Href: paths.Run(project, env, id)})
}

// WebhooksTrail is the trail of an environment's webhooks page.
func WebhooksTrail(project, env string) Trail {
	return append(EnvironmentTrail(project, env), Crumb{Label: "Webhooks", Href: paths.Webhooks(project, env)})
}

// ProtectionTrail is the trail of an environment's protection page.
func ProtectionTrail(project, env string) Trail {
	return append(EnvironmentTrail(project, env), Crumb{Label: "Protection", Href: paths.Protection(project, env)})
}
