package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

// TestRunsListNamesRedeploysAndFilters: a redeploy reads "redeploy of
// revision 1" in the runs list and on its page, and the list filters by
// kind and status with plain query parameters (a form without JavaScript).
func TestRunsListNamesRedeploysAndFilters(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	s, c := deployableWiki(t, &webtest.Deploys{}, dns, "127.0.0.1")
	const envPath = "/projects/team-wiki/environments/production"
	resp, _ := s.PostForm(t, c, envPath+"/deploys", url.Values{})
	waitForRun(t, s, c, resp.Header.Get("Location"))
	resp, _ = s.PostForm(t, c, envPath+"/deploys", url.Values{"revision": {"1"}, "redeploy": {"1"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("redeploy = %d", resp.StatusCode)
	}
	page := waitForRun(t, s, c, resp.Header.Get("Location"))
	if !strings.Contains(page, "Redeploy of revision 1") || !strings.Contains(page, "redeploy of revision 1") || strings.Contains(page, "revision 1 → 1") {
		t.Errorf("the redeploy's page does not name it a redeploy:\n%s", pageMain(page))
	}
	_, list := s.Get(t, c, envPath+"/runs")
	if !strings.Contains(list, "redeploy of revision 1") || strings.Contains(list, "1 → 1") {
		t.Errorf("the runs list does not name the redeploy:\n%s", pageMain(list))
	}
	for _, want := range []string{`<select class="select" id="runs-kind" name="kind">`, `<select class="select" id="runs-status" name="status">`, `method="get"`} {
		if !strings.Contains(list, want) {
			t.Errorf("runs list lacks %s", want)
		}
	}
	rows := func(page string) int { return strings.Count(page, `data-insert-into="runs-rows"`) }
	if n := rows(list); n != 2 {
		t.Fatalf("runs list has %d rows, want 2", n)
	}
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"?kind=deploy", 2},
		{"?kind=backup", 0},
		{"?status=succeeded", 2},
		{"?status=failed", 0},
		{"?kind=deploy&status=in-progress", 0},
	} {
		status, page := s.Get(t, c, envPath+"/runs"+tc.query)
		if status != http.StatusOK || rows(page) != tc.want {
			t.Errorf("runs%s: %d with %d rows, want %d", tc.query, status, rows(page), tc.want)
		}
		// A filtered list does not take live rows that may not match it.
		if strings.Contains(page, "data-stream=") || !strings.Contains(page, ">Clear</a>") {
			t.Errorf("runs%s follows the stream or has no Clear link", tc.query)
		}
	}
	if _, page := s.Get(t, c, envPath+"/runs?status=failed"); !strings.Contains(page, "No runs match these filters.") || !strings.Contains(page, `<option value="failed" selected>`) {
		t.Errorf("an empty filtered list:\n%s", pageMain(page))
	}
	// The audit log links the runs its rows name (revisions: see
	// TestEnvironmentAdminsSeeTheirProjectsRevisions).
	_, audit := s.Get(t, c, "/audit")
	for _, want := range []string{`<a href="` + envPath + `/runs/1">run 1</a>`, `<a href="` + envPath + `/runs/2">run 2</a>`} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log lacks %s", want)
		}
	}
	if status, page := s.Get(t, c, envPath+"/runs?kind=everything"); status != http.StatusBadRequest || !strings.Contains(page, "kind must be deploy, reconcile, backup or restore.") {
		t.Errorf("an unknown kind: %d", status)
	}
}
