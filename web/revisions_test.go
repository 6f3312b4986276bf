package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

// TestRevisionPageComparesWithPreviousAndDeployed adds two revisions of the
// reference's production example and reads the third's page: the changes
// against the previous revision and against the one production runs.
func TestRevisionPageComparesWithPreviousAndDeployed(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithValueKeys())
	c := s.SignInLocal(t)
	v1 := exampleManifest(t, "production")
	v2 := strings.Replace(v1, "max: 5", "max: 8", 1)
	v3 := strings.Replace(v2, "      SESSION_SECRET: \"${SESSION_SECRET}\"\n", "", 1)
	if resp, body := s.PostForm(t, c, "/projects", url.Values{"manifest": {v1}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create project = %d\n%s", resp.StatusCode, body)
	}
	for _, src := range []string{v2, v3} {
		if resp, body := s.PostForm(t, c, "/projects/team-wiki/revisions", url.Values{"manifest": {src}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("add revision = %d\n%s", resp.StatusCode, body)
		}
	}
	if resp, _ := s.PostForm(t, c, "/projects/team-wiki/environments", url.Values{"name": {"production"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create environment = %d", resp.StatusCode)
	}
	s.ActivateRevision(t, "team-wiki", "production", 1)

	status, page := s.Get(t, c, "/projects/team-wiki/revisions/3")
	if status != 200 {
		t.Fatalf("revision page = %d\n%s", status, page)
	}
	prev, deployed, ok := strings.Cut(page, `id="against-1"`)
	if !ok {
		t.Fatalf("no comparison against revision 1, which production runs")
	}
	for _, want := range []string{"Against revision 2, the previous one", "web: environment: SESSION_SECRET removed", `<div class="diff-line diff-removed">`, "SESSION_SECRET: &#34;${SESSION_SECRET}&#34;"} {
		if !strings.Contains(prev, want) {
			t.Errorf("comparison with revision 2 lacks %q", want)
		}
	}
	if strings.Contains(prev, "replicas") {
		t.Errorf("comparison with revision 2 mentions replicas, which revision 3 did not change")
	}
	for _, want := range []string{"which production runs", "What deploying revision 3 to production would change", "web: replicas 2 to 5 → 2 to 8", "web: environment: SESSION_SECRET removed"} {
		if !strings.Contains(deployed, want) {
			t.Errorf("comparison with revision 1 lacks %q", want)
		}
	}
	if !strings.Contains(page, `id="L1"`) || !strings.Contains(page, "team-wiki") {
		t.Errorf("revision page does not list its source by line")
	}

	_, project := s.Get(t, c, "/projects/team-wiki")
	for _, want := range []string{`href="/projects/team-wiki/revisions/3"`, "web: replicas 2 to 5 → 2 to 8", "first revision"} {
		if !strings.Contains(project, want) {
			t.Errorf("project page lacks %q", want)
		}
	}
	if status, _ := s.Get(t, c, "/projects/team-wiki/revisions/9"); status != http.StatusNotFound {
		t.Errorf("revision 9 = %d, want 404", status)
	}
}
