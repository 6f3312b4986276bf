package web_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

const wikiEnv = "/projects/team-wiki/environments/production"

// startDeploy posts a deploy and waits for its run to end; it returns the
// run page's path.
func startDeploy(t *testing.T, s *webtest.Server, c *http.Client, form url.Values) string {
	t.Helper()
	resp, body := s.PostForm(t, c, wikiEnv+"/deploys", form)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), wikiEnv+"/runs/") {
		t.Fatalf("deploy %v: %d %s\n%s", form, resp.StatusCode, resp.Header.Get("Location"), pageMain(body))
	}
	runPath := resp.Header.Get("Location")
	waitForRun(t, s, c, runPath)
	return runPath
}

// receivedSecret says whether the local platform was last handed want as
// SESSION_SECRET of production: what the applications really run with.
// It never prints a value.
func receivedSecret(t *testing.T, s *webtest.Server, d *webtest.Deploys, want string) bool {
	t.Helper()
	env, err := s.DB.EnvironmentByName(context.Background(), "team-wiki", "production")
	if err != nil {
		t.Fatal(err)
	}
	got, ok := d.Service.Platform.(*local.Platform).ReceivedValues(env.ID)["SESSION_SECRET"]
	return ok && got == want
}

func setValue(t *testing.T, s *webtest.Server, c *http.Client, name, value string) {
	t.Helper()
	if resp, _ := s.PostForm(t, c, wikiEnv+"/values", url.Values{"name": {name}, "value": {value}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set %s: %d", name, resp.StatusCode)
	}
}

// TestValueChangesShowAndRollbackBringsBackTheReleaseValues: after a
// deploy, SESSION_SECRET changes twice; the environment page and the plan
// say so by name and version (never "Nothing changes"), and the deploy
// applies it. The runs list then offers to roll back to the first deploy,
// whose plan shows SESSION_SECRET v3 → v1 and what a rollback cannot bring
// back; the rollback hands the platform v1 again.
func TestValueChangesShowAndRollbackBringsBackTheReleaseValues(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{}
	s, admin := deployableWiki(t, d, dns, "127.0.0.1")
	setValue(t, s, admin, "SESSION_SECRET", "first-deployed-secret")
	first := startDeploy(t, s, admin, url.Values{})
	firstID := strings.TrimPrefix(first, wikiEnv+"/runs/")
	if !receivedSecret(t, s, d, "first-deployed-secret") {
		t.Fatal("the first deploy did not hand the platform the SESSION_SECRET it was deployed with")
	}

	setValue(t, s, admin, "SESSION_SECRET", "rotated-secret-two")
	setValue(t, s, admin, "SESSION_SECRET", "rotated-secret-three")
	_, page := s.Get(t, admin, wikiEnv)
	text := html.UnescapeString(page)
	if !strings.Contains(text, `data-value-change="SESSION_SECRET"`) || !strings.Contains(text, "v2 → v4") ||
		!strings.Contains(text, "changed") || !strings.Contains(text, "by Local administrator") {
		t.Errorf("the environment page does not say SESSION_SECRET changed since the active deploy (v2 → v4, by whom):\n%s", pageMain(page))
	}
	_, plan := s.Get(t, admin, wikiEnv+"/deploys/new")
	if strings.Contains(plan, "Nothing changes") || !strings.Contains(html.UnescapeString(plan), "v2 → v4") {
		t.Errorf("the plan after a value change says nothing changes or omits SESSION_SECRET v2 → v4")
	}
	startDeploy(t, s, admin, url.Values{"redeploy": {"1"}})
	if !receivedSecret(t, s, d, "rotated-secret-three") {
		t.Fatal("the redeploy did not apply the changed SESSION_SECRET")
	}
	_, page = s.Get(t, admin, wikiEnv)
	if strings.Contains(page, `data-value-change="SESSION_SECRET"`) {
		t.Error("the environment page still lists SESSION_SECRET as changed after a deploy applied it")
	}

	// The runs list offers the first deploy as a release to roll back to.
	_, list := s.Get(t, admin, wikiEnv+"/runs")
	rollback := wikiEnv + "/deploys/new?release=" + firstID
	if !strings.Contains(html.UnescapeString(list), `href="`+rollback+`"`) || !strings.Contains(list, "Roll back to this release") {
		t.Fatalf("the runs list offers no rollback to run %s", firstID)
	}
	status, plan := s.Get(t, admin, rollback)
	if status != http.StatusOK {
		t.Fatalf("rollback plan: %d", status)
	}
	plan = html.UnescapeString(plan)
	for _, want := range []string{"Roll back production to the release of run " + firstID, `data-release-value="SESSION_SECRET"`, "v4 → v2",
		"Release commands have run since this release", `name="release" value="` + firstID + `"`} {
		if !strings.Contains(plan, want) {
			t.Errorf("the rollback plan lacks %q", want)
		}
	}
	for _, secret := range []string{"first-deployed-secret", "rotated-secret"} {
		if strings.Contains(plan+page+list, secret) {
			t.Fatal("a page shows a value's plaintext")
		}
	}
	startDeploy(t, s, admin, url.Values{"release": {firstID}})
	if !receivedSecret(t, s, d, "first-deployed-secret") {
		t.Fatal("the rollback did not hand the platform the SESSION_SECRET version of the release it rolled back to")
	}
	// The rollback is audited with the release and its value versions.
	recs, _, err := s.DB.AuditEvents(context.Background(), store.AuditQuery{All: true, Action: "deploy.started"})
	if err != nil || len(recs) == 0 || recs[0].Detail["release"] == nil || recs[0].Detail["values"] == nil {
		t.Errorf("the rollback's audit record names no release or values: %v %v", recs, err)
	}
	// What runs now (v2) differs from the stored v4: the page says so.
	_, page = s.Get(t, admin, wikiEnv)
	if !strings.Contains(html.UnescapeString(page), "v2 → v4") {
		t.Error("after the rollback the environment page does not say SESSION_SECRET v4 awaits a deploy")
	}
}

// TestRestoreAnEarlierValueVersion: the values page lists the kept
// earlier versions of a name (never their values) and restores one as a
// new version, audited.
func TestRestoreAnEarlierValueVersion(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithValueKeys())
	s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	admin := s.SignInLocal(t)
	setValue(t, s, admin, "SESSION_SECRET", "the-first-secret")
	setValue(t, s, admin, "SESSION_SECRET", "the-second-secret")
	_, page := s.Get(t, admin, wikiEnv+"/values")
	if !strings.Contains(page, `data-earlier-version="1"`) || !strings.Contains(page, "restore v1") {
		t.Fatalf("the values page offers no restore of SESSION_SECRET v1")
	}
	resp, _ := s.PostForm(t, admin, wikiEnv+"/values/SESSION_SECRET/restore", url.Values{"version": {"1"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("restore v1: %d", resp.StatusCode)
	}
	_, page = s.Get(t, admin, wikiEnv+"/values")
	if !strings.Contains(page, "Restored SESSION_SECRET v1 as v3") || strings.Contains(page, "the-first-secret") {
		t.Errorf("after restoring v1, the values page does not say it became v3, or shows a value")
	}
	for _, bad := range []url.Values{{"version": {"0"}}, {"version": {"x"}}, {"version": {"99"}}} {
		if resp, _ := s.PostForm(t, admin, wikiEnv+"/values/SESSION_SECRET/restore", bad); resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Errorf("restore %v: %d, want a 4xx", bad, resp.StatusCode)
		}
	}
}

// TestHomeAndProjectPagesSayEachEnvironmentsState: running revision N as a
// link, out of date when a newer revision exists, and a failed last deploy
// with its reason.
func TestHomeAndProjectPagesSayEachEnvironmentsState(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{}
	s, admin := deployableWiki(t, d, dns, "127.0.0.1")
	_, home := s.Get(t, admin, "/")
	if !strings.Contains(home, `data-env-status="not-deployed"`) {
		t.Errorf("home before any deploy does not say not deployed yet")
	}
	startDeploy(t, s, admin, url.Values{})
	_, home = s.Get(t, admin, "/")
	if !strings.Contains(home, `data-env-status="running"`) || !strings.Contains(home, "running revision 1") || !strings.Contains(home, `href="`+wikiEnv+`"`) {
		t.Errorf("home does not link production as running revision 1")
	}
	d.Faults.Set(func(f *local.Faults) { f.Build = map[string]string{"web": "the compiler ran out of memory"} })
	resp, _ := s.PostForm(t, admin, wikiEnv+"/deploys", url.Values{"redeploy": {"1"}})
	waitForRun(t, s, admin, resp.Header.Get("Location"))
	for _, path := range []string{"/", "/projects/team-wiki"} {
		_, page := s.Get(t, admin, path)
		if !strings.Contains(page, `data-env-status="failed"`) || !strings.Contains(page, "the compiler ran out of memory") ||
			!strings.Contains(page, "Still running revision 1") || !strings.Contains(page, `href="`+resp.Header.Get("Location")+`"`) {
			t.Errorf("%s does not show the failed deploy with its reason and a link to its run:\n%s", path, pageMain(page))
		}
	}
	_, page := s.Get(t, admin, wikiEnv)
	if !strings.Contains(page, "data-last-deploy-failed") {
		t.Error("the environment page does not say its last deploy failed")
	}
}
