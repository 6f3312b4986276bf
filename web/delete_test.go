package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// TestDeleteEnvironmentThenProject deletes an environment with and without
// its typed name and while a run is in progress, then the project.
func TestDeleteEnvironmentThenProject(t *testing.T) {
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

	// The environment page offers the danger zone to its admin.
	if status, page := s.Get(t, envAdmin, envURL); status != 200 || !strings.Contains(page, `id="danger-zone"`) || !strings.Contains(page, `action="`+envURL+`/delete"`) {
		t.Fatalf("environment page = %d, want the danger zone posting to %s/delete", status, envURL)
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
	if status, page := s.Get(t, envAdmin, envURL); status != 200 || !strings.Contains(page, "is in progress") || strings.Contains(page, `id="delete-confirm"`) {
		t.Errorf("environment page during a run = %d, want the danger zone blocked with a sentence and no form", status)
	}
	if _, err := s.DB.Pool.Exec(t.Context(), `UPDATE runs SET status = 'succeeded', finished_at = now() WHERE environment_id = $1`, prod.ID); err != nil {
		t.Fatal(err)
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
