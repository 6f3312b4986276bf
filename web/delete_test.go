package web_test

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// TestDeleteEnvironmentThenProject deletes an environment with and without
// its typed name and while a run is in progress, then the project.
func TestDeleteEnvironmentThenProject(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithAdmins("root@example.test"), webtest.WithValueKeys())
	prod := s.CreateEnvironment(t, "", "production")
	s.CreateEnvironment(t, "", "staging")
	s.AddMember(t, prod, "admin@example.test", store.RoleAdmin)
	envAdmin := s.SignInAs(t, "admin@example.test", "Prod Admin")
	root := s.SignInAs(t, "root@example.test", "Root")
	const envURL = "/projects/hello-world/environments/production"
	if resp, _ := s.PostForm(t, envAdmin, envURL+"/values", url.Values{"name": {"APP_DOMAIN"}, "value": {"shop.example.test"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set value = %d", resp.StatusCode)
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := s.DB.Pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The danger zone lives on the environment's Settings page, which the
	// overview links for its admin; the overview itself has none.
	if status, page := s.Get(t, envAdmin, envURL); status != 200 || strings.Contains(page, `id="danger-zone"`) || !strings.Contains(page, `href="`+envURL+`/settings"`) {
		t.Fatalf("environment page = %d, want a Settings link and no danger zone", status)
	}
	if status, page := s.Get(t, envAdmin, envURL+"/settings"); status != 200 || !strings.Contains(page, `id="danger-zone"`) || !strings.Contains(page, `action="`+envURL+`/delete"`) {
		t.Fatalf("settings page = %d, want the danger zone posting to %s/delete", status, envURL)
	}

	// A wrong name: the form again, the error tied to the field, nothing deleted.
	resp, body := s.PostForm(t, envAdmin, envURL+"/delete", url.Values{"confirm": {"Production"}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("wrong confirmation = %d, want 422", resp.StatusCode)
	}
	for _, want := range []string{`id="delete-confirm-error" role="alert"`, `aria-describedby="delete-confirm-error"`, `value="Production"`, "Nothing was deleted"} {
		if !strings.Contains(body, want) {
			t.Errorf("wrong confirmation page lacks %q", want)
		}
	}
	if n := count(`SELECT count(*) FROM environments WHERE id = $1`, prod.ID); n != 1 {
		t.Fatalf("after a wrong confirmation the environment is gone")
	}

	// A run in progress blocks the deletion with a sentence.
	if _, err := s.DB.Pool.Exec(t.Context(), `INSERT INTO runs (environment_id, kind, status) VALUES ($1, 'deploy', 'running')`, prod.ID); err != nil {
		t.Fatal(err)
	}
	resp, body = s.PostForm(t, envAdmin, envURL+"/delete", url.Values{"confirm": {"production"}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "in progress") {
		t.Fatalf("delete during a run = %d, want 409 saying a run is in progress", resp.StatusCode)
	}
	if status, page := s.Get(t, envAdmin, envURL+"/settings"); status != 200 || !strings.Contains(page, "is in progress") || strings.Contains(page, `id="delete-confirm"`) {
		t.Errorf("settings page during a run = %d, want the danger zone blocked with a sentence and no form", status)
	}
	if _, err := s.DB.Pool.Exec(t.Context(), `UPDATE runs SET status = 'succeeded', finished_at = now() WHERE environment_id = $1`, prod.ID); err != nil {
		t.Fatal(err)
	}

	// The project's danger zone lives on its Settings page too, which the
	// project page links for an installation admin only.
	if status, page := s.Get(t, root, "/projects/hello-world"); status != 200 || strings.Contains(page, `id="danger-zone"`) || !strings.Contains(page, `href="/projects/hello-world/settings"`) {
		t.Errorf("project page = %d, want a Settings link and no danger zone", status)
	}
	if _, page := s.Get(t, envAdmin, "/projects/hello-world"); strings.Contains(page, `/settings"`) {
		t.Errorf("the project page links a Settings page to an environment's admin, who may not open it")
	}
	if status, page := s.Get(t, root, "/projects/hello-world/settings"); status != 200 || !strings.Contains(page, `id="danger-zone"`) || strings.Contains(page, `id="delete-confirm"`) || !strings.Contains(page, "each from its Settings page") {
		t.Errorf("project settings page = %d, want its danger zone, blocked while environments remain", status)
	}

	// The project cannot go while it has environments.
	resp, body = s.PostForm(t, root, "/projects/hello-world/delete", url.Values{"confirm": {"hello-world"}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "production and staging") {
		t.Fatalf("delete project with environments = %d, want 409 naming them", resp.StatusCode)
	}

	// The right name: 303 to the project; values gone, audit records kept.
	auditBefore := count(`SELECT count(*) FROM audit_events WHERE environment_id = $1`, prod.ID)
	resp, _ = s.PostForm(t, envAdmin, envURL+"/delete", url.Values{"confirm": {"production"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/projects/hello-world" {
		t.Fatalf("delete = %d to %q, want 303 to /projects/hello-world", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := count(`SELECT count(*) FROM environment_values WHERE environment_id = $1`, prod.ID); n != 0 {
		t.Errorf("%d value rows survive the environment", n)
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE environment = 'production' AND project = 'hello-world' AND environment_id IS NULL`); n != auditBefore+1 {
		t.Errorf("audit records of production after deletion = %d, want the %d earlier ones and the deletion", n, auditBefore)
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE action = 'environment.deleted' AND target = 'production' AND actor <> ''`); n != 1 {
		t.Errorf("environment.deleted records = %d, want 1 naming who", n)
	}
	if status, _ := s.Get(t, envAdmin, envURL); status != http.StatusForbidden {
		t.Errorf("deleted environment answers %d to its former admin, want 403", status)
	}

	// The project, once staging is gone too.
	if resp, _ := s.PostForm(t, root, "/projects/hello-world/environments/staging/delete", url.Values{"confirm": {"staging"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete staging = %d", resp.StatusCode)
	}
	if resp, _ := s.PostForm(t, root, "/projects/hello-world/delete", url.Values{"confirm": {"hello"}}); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("delete project with a wrong name = %d, want 422", resp.StatusCode)
	}
	resp, _ = s.PostForm(t, root, "/projects/hello-world/delete", url.Values{"confirm": {"hello-world"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("delete project = %d to %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := count(`SELECT count(*) FROM projects WHERE name = 'hello-world'`); n != 0 {
		t.Errorf("project still stored")
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE action = 'project.deleted' AND project = 'hello-world'`); n != 1 {
		t.Errorf("project.deleted records = %d, want 1", n)
	}
}

// TestRemoveMemberAsksFirst: the members page links to a confirmation page
// instead of removing at once.
func TestRemoveMemberAsksFirst(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithAdmins("root@example.test"))
	prod := s.CreateEnvironment(t, "", "production")
	s.AddMember(t, prod, "viewer@example.test", store.RoleViewer)
	id := s.UserID(t, "viewer@example.test")
	root := s.SignInAs(t, "root@example.test", "Root")
	base := "/projects/hello-world/environments/production/members"
	_, page := s.Get(t, root, base)
	if strings.Contains(page, `action="`+base+`/`) && strings.Contains(page, `/remove" class="inline-form"`) {
		t.Errorf("members page still removes with one click")
	}
	status, page := s.Get(t, root, base+"/"+strconv.FormatInt(id, 10)+"/remove")
	if status != 200 || !strings.Contains(page, "Remove viewer@example.test?") || !strings.Contains(page, `method="post"`) {
		t.Fatalf("confirmation page = %d", status)
	}
}

// TestDeleteEnvironmentOnAPlatformThatHoldsItIsARun: on a platform that
// holds what environments run (as Kubernetes does), the typed delete
// starts a delete run and the environment shows deleting; while the
// platform cannot delete, the run fails with its reason, the environment
// stays with its values, deleting, its danger zone saying why and offering
// a retry, and deploys are refused; the retry deletes the rows once the
// platform has, and the same name can be created again.
func TestDeleteEnvironmentOnAPlatformThatHoldsItIsARun(t *testing.T) {
	t.Parallel()
	var stuck atomic.Bool
	stuck.Store(true)
	var asked atomic.Int32
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{DeleteEnvironment: func(env platform.Env) error {
		asked.Add(1)
		if stuck.Load() {
			return errors.New("namespace team-wiki-production is held by a finalizer")
		}
		return nil
	}}))
	c := s.SignInLocal(t)
	env := s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	const envURL = "/projects/team-wiki/environments/production"
	if resp, _ := s.PostForm(t, c, envURL+"/values", url.Values{"name": {"APP_DOMAIN"}, "value": {"wiki.example.test"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set value = %d", resp.StatusCode)
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := s.DB.Pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	lastRun := func() int64 {
		t.Helper()
		var id int64
		if err := s.DB.Pool.QueryRow(t.Context(), `SELECT max(id) FROM runs WHERE environment_id = $1 AND kind = 'delete'`, env.ID).Scan(&id); err != nil {
			t.Fatalf("no delete run: %v", err)
		}
		return id
	}

	resp, _ := s.PostForm(t, c, envURL+"/delete", url.Values{"confirm": {"production"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/projects/team-wiki" {
		t.Fatalf("delete = %d to %q, want 303 to the project", resp.StatusCode, resp.Header.Get("Location"))
	}
	if status, page := s.Get(t, c, "/projects/team-wiki"); status != 200 || !strings.Contains(page, "deleting") {
		t.Errorf("project page = %d, want the environment shown deleting", status)
	}
	page := waitForRun(t, s, c, envURL+"/runs/"+strconv.FormatInt(lastRun(), 10))
	if !strings.Contains(page, "Deletion") || !strings.Contains(page, "Run #") {
		t.Errorf("the delete run's page is not titled Deletion, with its number in the environment")
	}
	if m := runStatus.FindStringSubmatch(page); m[1] != store.RunFailed || m[2] != "delete" || !strings.Contains(page, "held by a finalizer") {
		t.Fatalf("the delete run the platform could not do: %v, want a failed delete run with the platform's reason", m)
	}
	if n := count(`SELECT count(*) FROM environments WHERE id = $1 AND state = 'deleting'`, env.ID); n != 1 {
		t.Fatalf("after the failed delete run the environment is gone or not deleting")
	}
	if n := count(`SELECT count(*) FROM environment_values WHERE environment_id = $1`, env.ID); n == 0 {
		t.Fatalf("the failed delete run deleted the environment's values")
	}
	status, page := s.Get(t, c, envURL)
	if status != 200 || !strings.Contains(page, "did not finish") || !strings.Contains(page, "held by a finalizer") || !strings.Contains(page, "Delete production again") {
		t.Errorf("environment page after the failed delete = %d, want it to say why and offer a retry:\n%s", status, pageMain(page))
	}
	resp, body := s.PostForm(t, c, envURL+"/deploys", url.Values{"revision": {"1"}})
	if resp.StatusCode == http.StatusSeeOther || !strings.Contains(body, "deleting") {
		t.Errorf("a deploy of the deleting environment = %d, want refused saying it is deleting", resp.StatusCode)
	}

	stuck.Store(false)
	failed := lastRun()
	if resp, _ := s.PostForm(t, c, envURL+"/delete", url.Values{"confirm": {"production"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("retrying the delete = %d, want 303", resp.StatusCode)
	}
	for i := 0; count(`SELECT count(*) FROM environments WHERE id = $1`, env.ID) != 0; i++ {
		if i > 600 {
			t.Fatalf("the retried delete did not delete the environment")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if asked.Load() != 2 {
		t.Errorf("the platform was asked to delete %d times, want twice (the failed run, the retry)", asked.Load())
	}
	if status, _ := s.Get(t, c, envURL); status != http.StatusNotFound {
		t.Errorf("environment page after the delete = %d, want 404", status)
	}
	if n := count(`SELECT count(*) FROM runs WHERE id = $1`, failed); n != 0 {
		t.Errorf("the failed delete run outlived its environment")
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE action = 'environment.deleted' AND environment = 'production'`); n != 1 {
		t.Errorf("environment.deleted records = %d, want 1", n)
	}
	again := s.CreateEnvironment(t, "", "production")
	if again.ID == env.ID || again.State != store.EnvironmentActive {
		t.Errorf("the environment created again: id %d (was %d), state %s", again.ID, env.ID, again.State)
	}
}
