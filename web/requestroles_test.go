package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/webtest"
)

// newToken creates an API token of the user with the email, scoped to env
// with role, and returns its secret.
func newToken(t *testing.T, s *webtest.Server, email string, env *store.Environment, role store.Role) string {
	t.Helper()
	u, err := s.DB.UserByID(t.Context(), s.UserID(t, email))
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := s.DB.CreateToken(t.Context(), store.Actor{User: u}, store.NewToken{Name: "ci-" + string(role),
		Scope: []store.TokenGrant{{EnvironmentID: env.ID, Role: role}}, Days: 1})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// TestRequestRolePublishingAValueIsCappedByTheTokensScope: an admin of
// production whose token is scoped production:deployer may not publish a
// value in a hostname through the API, even typing the name; the same
// admin's session may.
func TestRequestRolePublishingAValueIsCappedByTheTokensScope(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{Resolver: dns}))
	prod := s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	s.AddMember(t, prod, "ada@example.test", store.RoleAdmin)
	root := s.SignInLocal(t)
	for name, value := range map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": publicSecret} {
		if resp, _ := s.PostForm(t, root, envPath+"/values", url.Values{"name": {name}, "value": {value}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("set %s = %d, want 303", name, resp.StatusCode)
		}
	}
	dns.Set("wiki.test", "127.0.0.1")
	dns.Set(publicSecret+".x.example", "127.0.0.1")
	manifest := strings.Replace(exampleManifest(t, "production"), `domain: "${APP_DOMAIN}"`,
		`domain: "${APP_DOMAIN}"`+"\n        aliases: [\"${SESSION_SECRET}.x.example\"]", 1)
	if resp, body := s.PostForm(t, root, "/projects/team-wiki/revisions", url.Values{"manifest": {manifest}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("add revision = %d:\n%s", resp.StatusCode, pageMain(body))
	}
	admin := s.SignInAs(t, "ada@example.test", "Ada Admin")
	token := newToken(t, s, "ada@example.test", prod, store.RoleDeployer)
	deploys := func() int {
		var n int
		if err := s.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM runs WHERE kind = 'deploy'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	resp, body := apiCall(t, s, nil, token, "POST", "/api/v1"+envPath+"/deploys",
		map[string]any{"revision": 2, "confirm_public_value": "production", "confirm": "production"})
	var p struct{ Field, Detail string }
	_ = json.Unmarshal([]byte(body), &p)
	if resp.StatusCode != http.StatusUnprocessableEntity || p.Field != "public_value" ||
		!strings.Contains(p.Detail, "Only an admin of production can deploy a hostname built from SESSION_SECRET") {
		t.Errorf("deployer-scoped token of an admin, confirm_public_value typed: %d %s, want 422 on public_value", resp.StatusCode, body)
	}
	if strings.Contains(body, publicSecret) {
		t.Error("the refusal shows the value of SESSION_SECRET")
	}
	if n := deploys(); n != 0 {
		t.Errorf("the refused deploy created %d runs", n)
	}

	resp, body = s.PostForm(t, admin, envPath+"/deploys", url.Values{"revision": {"2"}, "confirm_public_value": {"production"}, "confirm": {"production"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the same admin's session: %d, want 303 to the run:\n%s", resp.StatusCode, pageMain(body))
	}
	waitForRun(t, s, admin, resp.Header.Get("Location"))
}

// TestRequestRoleAnAdminRemovedFromAdminsLosesThePowerAtOnce: an
// installation admin signed in with a session and holding a token; the
// Studio restarts without them in --admins (a new web application on the
// same database): the old session and the old token are refused at once,
// without signing in again.
func TestRequestRoleAnAdminRemovedFromAdminsLosesThePowerAtOnce(t *testing.T) {
	t.Parallel()
	first := webtest.Start(t, webtest.WithAdmins("ada@example.test"), webtest.WithDeploys(&webtest.Deploys{}))
	env := first.CreateEnvironment(t, "", "production")
	ada := first.SignInAs(t, "ada@example.test", "Ada")
	token := newToken(t, first, "ada@example.test", env, store.RoleAdmin)
	const plan = "/api/v1/projects/hello-world/environments/production/plan"
	for _, path := range []string{"/admin", "/admin/webhooks", "/projects/new"} {
		if status, body := first.Get(t, ada, path); status != http.StatusOK {
			t.Fatalf("an installation admin's session on %s = %d, want 200:\n%s", path, status, pageMain(body))
		}
	}
	if resp, body := apiCall(t, first, nil, token, "GET", plan, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("an installation admin's token (no membership) on the plan = %d, want 200: %s", resp.StatusCode, body)
	}

	// Restarted with --admins empty: the same database, a new application.
	restarted := webtest.Start(t, func(d *web.Deps) { d.DB = first.DB })
	for _, path := range []string{"/admin", "/admin/webhooks", "/projects/new"} {
		if status, body := restarted.Get(t, ada, path); status != http.StatusForbidden {
			t.Errorf("the old session on %s after removal from --admins = %d, want 403:\n%s", path, status, pageMain(body))
		}
	}
	if resp, body := apiCall(t, restarted, nil, token, "GET", plan, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the old token on the plan after removal from --admins = %d, want 403: %s", resp.StatusCode, body)
	}
	// The local administrator stays one: it is not named by --admins.
	root := first.SignInLocal(t)
	if status, _ := restarted.Get(t, root, "/admin/webhooks"); status != http.StatusOK {
		t.Errorf("the local administrator on /admin/webhooks = %d, want 200", status)
	}
}

// TestRequestRoleAPIDeployRevisionBeyondItsColumn: the API answers a
// revision its column cannot hold with 400 and the page's sentence, never
// a failed query.
func TestRequestRoleAPIDeployRevisionBeyondItsColumn(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	env := s.CreateEnvironment(t, "", "production")
	s.AddMember(t, env, "dan@example.test", store.RoleDeployer)
	s.SignInAs(t, "dan@example.test", "Dan")
	token := newToken(t, s, "dan@example.test", env, store.RoleDeployer)
	for _, n := range []string{int4Over, "99999999999", int8Max, negative, int8Over, hugeDigit} {
		resp, body := apiCall(t, s, nil, token, "POST", "/api/v1/projects/hello-world/environments/production/deploys",
			json.RawMessage(`{"revision": `+n+`}`))
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("revision %s: %d %s, want 400", n, resp.StatusCode, body)
			continue
		}
		// Beyond int64 the body itself is not the object (its own sentence).
		if d := problemDetail(t, resp, body); n != int8Over && n != hugeDigit && !strings.Contains(d, "revision must be a revision number from 1 to 2147483647") {
			t.Errorf("revision %s: %q, want the page's sentence", n, d)
		}
	}
	resp, body := apiCall(t, s, nil, token, "POST", "/api/v1/projects/hello-world/environments/production/deploys",
		json.RawMessage(`{"revision": `+int4Max+`}`))
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("revision %s (no such revision): %d %s, want 404", int4Max, resp.StatusCode, body)
	}
	for line := range strings.Lines(s.Logs.String()) {
		if strings.Contains(line, "status=500") {
			t.Errorf("a request failed: %s", line)
		}
	}
}
