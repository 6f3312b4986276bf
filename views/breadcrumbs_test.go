package views_test

import (
	"testing"

	"github.com/skali-dev/studio/views"
)

// TestBreadcrumbs: each kind of page gets the trail the pages spelled out
// by hand before: every step a link, the page itself plain text marked as
// the current page.
func TestBreadcrumbs(t *testing.T) {
	const (
		open  = `<nav class="breadcrumbs" aria-label="Breadcrumbs"><a href="/">Projects</a>`
		shop  = `<a href="/projects/shop">shop</a>`
		prod  = `<a href="/projects/shop/environments/prod">prod</a>`
		close = `</nav>`
	)
	cases := []struct {
		name  string
		trail views.Trail
		want  string
	}{
		{"new project", views.ProjectsTrail().Then("New project"),
			open + `<span aria-current="page">New project</span>` + close},
		{"project", views.ProjectTrail("shop"),
			open + `<span aria-current="page">shop</span>` + close},
		{"new revision", views.ProjectTrail("shop").Then("New revision"),
			open + shop + `<span aria-current="page">New revision</span>` + close},
		{"revision", views.RevisionTrail("shop", 3),
			open + shop + `<a href="/projects/shop#revisions">Revisions</a><span aria-current="page">3</span>` + close},
		{"environment", views.EnvironmentTrail("shop", "prod"),
			open + shop + `<span aria-current="page">prod</span>` + close},
		{"deploy", views.EnvironmentTrail("shop", "prod").Then("Deploy"),
			open + shop + prod + `<span aria-current="page">Deploy</span>` + close},
		{"values", views.ValuesTrail("shop", "prod"),
			open + shop + prod + `<span aria-current="page">Values</span>` + close},
		{"value delete", views.ValuesTrail("shop", "prod").Then("Delete"),
			open + shop + prod + `<a href="/projects/shop/environments/prod/values">Values</a><span aria-current="page">Delete</span>` + close},
		{"members remove", views.MembersTrail("shop", "prod").Then("Remove"),
			open + shop + prod + `<a href="/projects/shop/environments/prod/members">Members</a><span aria-current="page">Remove</span>` + close},
		{"runs", views.RunsTrail("shop", "prod"),
			open + shop + prod + `<span aria-current="page">Runs</span>` + close},
		{"run", views.RunTrail("shop", "prod", 42, 7),
			open + shop + prod + `<a href="/projects/shop/environments/prod/runs">Runs</a><span aria-current="page">#7</span>` + close},
		{"backup action", views.BackupsTrail("shop", "prod").Then("Backup <7>"),
			open + shop + prod + `<a href="/projects/shop/environments/prod/backups">Backups</a><span aria-current="page">Backup &lt;7&gt;</span>` + close},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := render(t, views.Breadcrumbs(c.trail)); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestTrailThenLeavesTheTrailAlone: two pages under one trail each get
// their own last step.
func TestTrailThenLeavesTheTrailAlone(t *testing.T) {
	env := views.EnvironmentTrail("shop", "prod")
	env = append(env[:len(env):len(env)], views.Crumb{Label: "spare"})[:len(env)]
	deploy, remove := env.Then("Deploy"), env.Then("Delete")
	if got := deploy[len(deploy)-1].Label; got != "Deploy" {
		t.Errorf("got %q after a second Then, want Deploy", got)
	}
	if got := remove[len(remove)-1].Label; got != "Delete" {
		t.Errorf("got %q, want Delete", got)
	}
	if len(env) != 3 {
		t.Errorf("the trail grew to %d steps, want 3", len(env))
	}
}
