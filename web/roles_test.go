package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/static"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// The roles every route is called with. The fixture (newRoleFixture) sets
// them up on project hello-world, whose environment production is the one
// every {env} route below is called on.
const (
	anonymous = "anonymous"
	// outsider signed in but is a member of nothing.
	outsider = "outsider"
	viewer   = "viewer of production"
	deployer = "deployer of production"
	envAdmin = "admin of production"
	// otherEnv is an admin of staging, another environment of the same
	// project: their role must not carry over to production.
	otherEnv     = "admin of staging"
	installAdmin = "installation admin"
)

var allRoles = []string{anonymous, outsider, viewer, deployer, envAdmin, otherEnv, installAdmin}

// Who may call a route: the sets a row's allow field names.
var (
	everyone = allRoles
	signedIn = []string{outsider, viewer, deployer, envAdmin, otherEnv, installAdmin}
	// projectMembers hold any role on any environment of hello-world.
	projectMembers = []string{viewer, deployer, envAdmin, otherEnv, installAdmin}
	// projectAdmins are admins of at least one environment of hello-world.
	projectAdmins = []string{envAdmin, otherEnv, installAdmin}
	prodViewers   = []string{viewer, deployer, envAdmin, installAdmin}
	prodDeployers = []string{deployer, envAdmin, installAdmin}
	prodAdmins    = []string{envAdmin, installAdmin}
	// anyEnvAdmin are admins of some environment (the audit log).
	anyEnvAdmin   = []string{envAdmin, otherEnv, installAdmin}
	installAdmins = []string{installAdmin}
)

// routeCase is one row of the role table: a route as registered in
// web/web.go, a concrete request to it and who may make it.
type routeCase struct {
	// method and pattern exactly as chi reports the route ("*" method for a
	// route registered with Handle, which answers every method).
	method, pattern string
	// path is the request path; {target} is replaced by the id of a viewer
	// of production kept for member routes, {static} by the stylesheet.
	path string
	form url.Values
	// allow lists the roles that may make the request. Anonymous callers not
	// allowed must be sent to /login (303); others must get the 403 page.
	allow []string
	// ok lists the statuses an allowed call may answer besides 2xx and 303
	// to anywhere but /login (for example 401 for a refused sign-in link).
	ok []int
	// toLogin says an allowed call answers 303 to /login (sign-out does).
	toLogin bool
	// prepare runs before each call (to restore what an allowed call changed).
	prepare func(t *testing.T, f *roleFixture)
}

// routeTable holds a row for EVERY route of web/web.go. TestEveryRouteWithEveryRole
// walks the router and fails for a route without a row: when you add a
// route, add its row here, naming who may call it.
var routeTable = []routeCase{
	// Probes and assets.
	{method: "GET", pattern: "/healthz", path: "/healthz", allow: everyone},
	{method: "GET", pattern: "/readyz", path: "/readyz", allow: everyone},
	{method: "*", pattern: "/static/*", path: "{static}", allow: everyone},

	// Event stream websockets: a plain GET (no upgrade) is refused with 400
	// once access is granted; the run does not exist (404) in this fixture.
	{method: "GET", pattern: "/projects/{project}/environments/{env}/runs/{run}/events",
		path: "/projects/hello-world/environments/production/runs/999999/events?after=0", allow: prodViewers, ok: []int{http.StatusNotFound}},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/events",
		path: "/projects/hello-world/environments/production/events?after=0", allow: prodViewers, ok: []int{http.StatusBadRequest}},

	// Sign-in and sign-out.
	{method: "GET", pattern: "/login", path: "/login", allow: everyone},
	{method: "GET", pattern: "/login/local", path: "/login/local?token=not-a-token", allow: everyone, ok: []int{http.StatusUnauthorized}},
	{method: "POST", pattern: "/logout", path: "/logout", allow: everyone, toLogin: true},
	{method: "GET", pattern: "/login/oidc", path: "/login/oidc", allow: everyone},
	{method: "GET", pattern: "/login/oidc/callback", path: "/login/oidc/callback?state=x&code=y", allow: everyone, ok: []int{http.StatusBadRequest}},

	// The manifest validator is public.
	{method: "GET", pattern: "/validate", path: "/validate", allow: everyone},
	{method: "POST", pattern: "/validate", path: "/validate", form: url.Values{"manifest": {webtest.MinimalManifest}}, allow: everyone},

	// Home, members, audit log.
	{method: "GET", pattern: "/", path: "/", allow: signedIn},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/members",
		path: "/projects/hello-world/environments/production/members", allow: prodAdmins},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/members",
		path: "/projects/hello-world/environments/production/members", form: url.Values{"email": {"added@example.test"}, "role": {"viewer"}},
		allow: prodAdmins, prepare: func(t *testing.T, f *roleFixture) { f.removeMember(t, "added@example.test") }},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/members/{user}/role",
		path: "/projects/hello-world/environments/production/members/{target}/role", form: url.Values{"role": {"deployer"}},
		allow: prodAdmins, prepare: func(t *testing.T, f *roleFixture) { f.ensureTarget(t) }},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/members/{user}/remove",
		path:  "/projects/hello-world/environments/production/members/{target}/remove",
		allow: prodAdmins, prepare: func(t *testing.T, f *roleFixture) { f.ensureTarget(t) }},
	{method: "GET", pattern: "/audit", path: "/audit", allow: anyEnvAdmin},

	// Projects, revisions, environments, values.
	{method: "GET", pattern: "/projects/new", path: "/projects/new", allow: installAdmins},
	{method: "POST", pattern: "/projects", path: "/projects",
		form: url.Values{"manifest": {strings.Replace(webtest.MinimalManifest, "hello-world", "created-here", 1)}}, allow: installAdmins,
		ok: []int{http.StatusConflict}},
	{method: "GET", pattern: "/projects/{project}", path: "/projects/hello-world", allow: projectMembers},
	{method: "GET", pattern: "/projects/{project}/revisions/new", path: "/projects/hello-world/revisions/new", allow: projectAdmins},
	{method: "POST", pattern: "/projects/{project}/revisions", path: "/projects/hello-world/revisions",
		form: url.Values{"manifest": {webtest.MinimalManifest + "\ndescription: changed\n"}}, allow: projectAdmins},
	{method: "POST", pattern: "/projects/{project}/environments", path: "/projects/hello-world/environments",
		form: url.Values{"name": {"qa"}}, allow: installAdmins, ok: []int{http.StatusConflict}},
	{method: "GET", pattern: "/projects/{project}/environments/{env}", path: "/projects/hello-world/environments/production", allow: prodViewers},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/values", path: "/projects/hello-world/environments/production/values", allow: prodViewers},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/values", path: "/projects/hello-world/environments/production/values",
		form: url.Values{"name": {"APP_DOMAIN"}, "value": {"shop.example.test"}}, allow: prodAdmins},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/values/import", path: "/projects/hello-world/environments/production/values/import",
		form: url.Values{"dotenv": {"APP_DOMAIN=shop.example.test\n"}}, allow: prodAdmins},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/values/prune", path: "/projects/hello-world/environments/production/values/prune", allow: prodAdmins},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/values/prune", path: "/projects/hello-world/environments/production/values/prune", allow: prodAdmins},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/values/{name}/delete",
		path: "/projects/hello-world/environments/production/values/APP_DOMAIN/delete", allow: prodAdmins, ok: []int{http.StatusNotFound}},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/values/{name}/delete",
		path: "/projects/hello-world/environments/production/values/APP_DOMAIN/delete", allow: prodAdmins, ok: []int{http.StatusNotFound}},
}

// Keep the deployer set referenced until deploy routes land.
var _ = prodDeployers

// roleFixture is a Studio with one person per role.
type roleFixture struct {
	s      *webtest.Server
	prod   *store.Environment
	emails map[string]string
	target int64
}

func newRoleFixture(t *testing.T) *roleFixture {
	t.Helper()
	s := webtest.Start(t, webtest.WithAdmins("root@example.test"), webtest.WithValueKeys())
	f := &roleFixture{s: s, emails: map[string]string{
		outsider:     "outsider@example.test",
		viewer:       "viewer@example.test",
		deployer:     "deployer@example.test",
		envAdmin:     "admin@example.test",
		otherEnv:     "stager@example.test",
		installAdmin: "root@example.test",
	}}
	f.prod = s.CreateEnvironment(t, "", "production")
	staging := s.CreateEnvironment(t, "", "staging")
	s.AddMember(t, f.prod, f.emails[viewer], store.RoleViewer)
	s.AddMember(t, f.prod, f.emails[deployer], store.RoleDeployer)
	s.AddMember(t, f.prod, f.emails[envAdmin], store.RoleAdmin)
	s.AddMember(t, staging, f.emails[otherEnv], store.RoleAdmin)
	f.ensureTarget(t)
	f.target = s.UserID(t, "target@example.test")
	return f
}

// client returns a fresh client signed in as role (anonymous: none).
func (f *roleFixture) client(t *testing.T, role string) *http.Client {
	t.Helper()
	if role == anonymous {
		return f.s.NewClient()
	}
	return f.s.SignInAs(t, f.emails[role], role)
}

func (f *roleFixture) ensureTarget(t *testing.T) {
	t.Helper()
	f.removeMember(t, "target@example.test")
	f.s.AddMember(t, f.prod, "target@example.test", store.RoleViewer)
}

func (f *roleFixture) removeMember(t *testing.T, email string) {
	t.Helper()
	_, err := f.s.DB.Pool.Exec(t.Context(), `
		DELETE FROM memberships WHERE environment_id = $1 AND user_id IN (SELECT id FROM users WHERE lower(email) = lower($2))`,
		f.prod.ID, email)
	if err != nil {
		t.Fatal(err)
	}
}

// TestEveryRouteWithEveryRole calls every route of the Studio as every role
// and checks the answer: allowed, the 403 page, or 303 to sign-in.
func TestEveryRouteWithEveryRole(t *testing.T) {
	f := newRoleFixture(t)

	// Every registered route has a row.
	rows := map[string]bool{}
	for _, rc := range routeTable {
		rows[rc.method+" "+rc.pattern] = true
	}
	var missing []string
	registered := map[string]bool{}
	err := chi.Walk(f.s.Config.Handler.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		registered[method+" "+route], registered["* "+route] = true, true
		if !rows[method+" "+route] && !rows["* "+route] {
			missing = append(missing, method+" "+route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(registered) < 10 {
		t.Fatalf("walked only %d routes: is the router still a chi.Routes?", len(registered))
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("route %s has no row in routeTable (web/roles_test.go): add one saying who may call it", m)
	}

	replacer := strings.NewReplacer("{target}", fmt.Sprint(f.target), "{static}", static.Path("css/app.css"))
	for _, rc := range routeTable {
		if !registered[rc.method+" "+rc.pattern] {
			t.Logf("routeTable row %s %s matches no registered route (not added yet?)", rc.method, rc.pattern)
			continue
		}
		for _, role := range allRoles {
			t.Run(rc.method+" "+rc.pattern+"/"+role, func(t *testing.T) {
				c := f.client(t, role)
				if rc.prepare != nil {
					rc.prepare(t, f)
				}
				method := rc.method
				if method == "*" {
					method = "GET"
				}
				path := replacer.Replace(rc.path)
				var resp *http.Response
				var body string
				if method == "POST" {
					resp, body = f.s.PostForm(t, c, path, rc.form)
				} else {
					resp, body = f.s.Follow(t, c, f.s.URL+path)
				}
				location := resp.Header.Get("Location")
				allowed := slices.Contains(rc.allow, role)
				switch {
				case allowed:
					ok := resp.StatusCode >= 200 && resp.StatusCode < 300 ||
						resp.StatusCode == http.StatusSeeOther && location != "/login" ||
						resp.StatusCode == http.StatusFound && location != "/login" ||
						slices.Contains(rc.ok, resp.StatusCode)
					if rc.toLogin {
						ok = resp.StatusCode == http.StatusSeeOther && location == "/login"
					}
					if !ok {
						t.Errorf("%s %s as %s = %d (Location %q), want it allowed", method, rc.path, role, resp.StatusCode, location)
					}
				case role == anonymous:
					if resp.StatusCode != http.StatusSeeOther || location != "/login" {
						t.Errorf("%s %s anonymous = %d (Location %q), want 303 to /login", method, rc.path, resp.StatusCode, location)
					}
				default:
					if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "You do not have access") {
						t.Errorf("%s %s as %s = %d, want the 403 page", method, rc.path, role, resp.StatusCode)
					}
				}
			})
		}
	}
}
