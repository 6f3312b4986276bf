package web_test

import (
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

// TestPlansSayWhatWillRunAndOnlyThatRuns: orders has an api and a worker.
// Revision 2 raises the api's replicas: the plan says the api rolls out
// (its settings change, replicas 2 → 3) and the worker stays as it is, and
// the run builds and rolls out the api only. A new STRIPE_KEY rolls the
// worker alone. A rollback to the first release is titled as a rollback
// on its run page and in the runs list.
func TestPlansSayWhatWillRunAndOnlyThatRuns(t *testing.T) {
	t.Parallel()
	const env = "/projects/orders/environments/production"
	dns := &webtest.Resolver{}
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{Resolver: dns}))
	manifest := exampleManifest(t, "two-applications")
	s.CreateEnvironment(t, manifest, "production")
	admin := s.SignInLocal(t)
	set := func(name, value string) {
		t.Helper()
		if resp, _ := s.PostForm(t, admin, env+"/values", url.Values{"name": {name}, "value": {value}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("set %s = %d", name, resp.StatusCode)
		}
	}
	set("APP_DOMAIN", "orders.test")
	set("STRIPE_KEY", "sk_test_one")
	deploy := func(form url.Values) (string, string) {
		t.Helper()
		resp, body := s.PostForm(t, admin, env+"/deploys", form)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("deploy %v = %d:\n%s", form, resp.StatusCode, pageMain(body))
		}
		return waitForRun(t, s, admin, resp.Header.Get("Location")), path.Base(resp.Header.Get("Location"))
	}
	rollout := func(page, app string) string {
		m := regexp.MustCompile(`(?s)<li class="rollout" data-rollout="` + app + `" data-rolls="(true|false)">(.*?)</li>`).FindStringSubmatch(page)
		if m == nil {
			return "(not listed)"
		}
		return m[1] + " " + regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[2], " ")
	}
	checkpoints := func(page string) string {
		return strings.Join(regexp.MustCompile(`(Build|Import|Release command|Roll out) (api|worker)`).FindAllString(page, -1), "\n")
	}

	_, page := s.Get(t, admin, env+"/deploys/new")
	if !strings.Contains(page, "2 applications roll out: api and worker") || !strings.HasPrefix(rollout(page, "worker"), "true") || !strings.Contains(rollout(page, "api"), "first deploy") {
		t.Errorf("the first plan should roll both applications:\napi: %s\nworker: %s", rollout(page, "api"), rollout(page, "worker"))
	}
	_, first := deploy(url.Values{})

	rev2 := strings.Replace(manifest, "        min: 2", "        min: 3", 1)
	if resp, body := s.PostForm(t, admin, "/projects/orders/revisions", url.Values{"manifest": {rev2}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("add revision 2 = %d:\n%s", resp.StatusCode, pageMain(body))
	}
	_, page = s.Get(t, admin, env+"/deploys/new")
	api, worker := rollout(page, "api"), rollout(page, "worker")
	for _, want := range []string{"true", "rolls out", "its settings change: scaling.max, scaling.min", "Replicas", "scaling.min: 2 → 3", "built from"} {
		if !strings.Contains(api, want) {
			t.Errorf("the plan's api lacks %q: %s", want, api)
		}
	}
	if !strings.HasPrefix(worker, "false") || !strings.Contains(worker, "unchanged") || !strings.Contains(worker, "keeps running as it is") {
		t.Errorf("the plan's worker should stay as it is: %s", worker)
	}
	if !strings.Contains(page, "1 application rolls out: api.") {
		t.Errorf("the plan's summary does not name the api alone")
	}
	run, _ := deploy(url.Values{})
	if got := checkpoints(run); strings.Contains(got, "worker") || !strings.Contains(got, "Roll out api") || !strings.Contains(got, "Build api") {
		t.Errorf("revision 2's run should build and roll out the api only; its build and rollout checkpoints:\n%s", got)
	}

	// A value only the worker uses rolls the worker alone.
	set("STRIPE_KEY", "sk_test_two")
	_, page = s.Get(t, admin, env+"/deploys/new")
	if w := rollout(page, "worker"); !strings.HasPrefix(w, "true") || !strings.Contains(w, "it uses STRIPE_KEY, which changes") {
		t.Errorf("after STRIPE_KEY v2 the worker should roll: %s", w)
	}
	if a := rollout(page, "api"); !strings.HasPrefix(a, "false") {
		t.Errorf("after STRIPE_KEY v2 the api should stay: %s", a)
	}

	// A rollback to the first release, titled as one.
	run, id := deploy(url.Values{"release": {first}})
	if !strings.Contains(run, "Rollback to revision 1") {
		t.Errorf("the rollback's run page is not titled as a rollback:\n%s", pageMain(run))
	}
	_, list := s.Get(t, admin, env+"/runs")
	row := regexp.MustCompile(`(?s)id="run-row-` + id + `".*?</tr>`).FindString(list)
	if !strings.Contains(row, "rollback") || !strings.Contains(row, `data-run-kind="deploy"`) {
		t.Errorf("the runs list's row of the rollback does not say rollback (scripts still read deploy):\n%s", row)
	}
}
