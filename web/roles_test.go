package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
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
	otherEnv = "admin of staging"
	// otherProject is an admin of an environment of another project.
	otherProject = "admin of another project"
	installAdmin = "installation admin"
)

var allRoles = []string{anonymous, outsider, viewer, deployer, envAdmin, otherEnv, otherProject, installAdmin}

// Who may call a route: the sets a row's allow field names.
var (
	everyone = allRoles
	signedIn = []string{outsider, viewer, deployer, envAdmin, otherEnv, otherProject, installAdmin}
	// projectMembers hold any role on any environment of hello-world.
	projectMembers = []string{viewer, deployer, envAdmin, otherEnv, installAdmin}
	// projectAdmins are admins of at least one environment of hello-world.
	projectAdmins = []string{envAdmin, otherEnv, installAdmin}
	// projectDeployers are deployers or admins of at least one
	// environment of hello-world (who may add a revision).
	projectDeployers = []string{deployer, envAdmin, otherEnv, installAdmin}
	prodViewers      = []string{viewer, deployer, envAdmin, installAdmin}
	prodDeployers    = []string{deployer, envAdmin, installAdmin}
	prodAdmins       = []string{envAdmin, installAdmin}
	// anyEnvAdmin are admins of some environment (the audit log).
	anyEnvAdmin = []string{envAdmin, otherEnv, otherProject, installAdmin}
	// otherProjectAdmins administer the environment of the other project.
	otherProjectAdmins = []string{otherProject, installAdmin}
	installAdmins      = []string{installAdmin}
	// tokenHolders hold a role somewhere, so they can have an API token.
	tokenHolders = []string{viewer, deployer, envAdmin, otherEnv, otherProject, installAdmin}
)

// routeCase is one row of the role table: a route as registered in
// web/web.go, a concrete request to it and who may make it.
type routeCase struct {
	// method and pattern exactly as chi reports the route ("*" method for a
	// route registered with Handle, which answers every method).
	method, pattern string
	// path is the request path; {target} is replaced by the id of a viewer
	// of production kept for member routes, {stager} by the id of a viewer
	// of staging only, {static} by the stylesheet.
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
	// status, when set, is the one status an allowed call must answer
	// (404 for a member or value of another environment named through
	// production's URL).
	status int
	// prepare runs before each call (to restore what an allowed call changed).
	prepare func(t *testing.T, f *roleFixture)
	// api marks a JSON API route: it is called with a bearer token the
	// role created for every environment they hold a role on, at that role,
	// and json (if any) as its body. Roles without a token (anonymous and
	// the outsider, who has no role to give one) must get 401, others not
	// allowed 403, both as problem documents.
	api  bool
	json string
}

// routeTable holds a row for EVERY route of web/web.go. TestEveryRouteWithEveryRole
// walks the router and fails for a route without a row: when you add a
// route, add its row here, naming who may call it.
var routeTable = []routeCase{
	// Probes and assets.
	{method: "GET", pattern: "/healthz", path: "/healthz", allow: everyone},
	{method: "GET", pattern: "/readyz", path: "/readyz", allow: everyone},
	{method: "*", pattern: "/static/*", path: "{static}", allow: everyone},
	{method: "GET", pattern: "/schema/skali.json", path: "/schema/skali.json", allow: everyone},

	// Event stream websockets: a plain GET (no upgrade) is refused with 400
	// once access is granted; the run does not exist (404) in this fixture.
	{method: "GET", pattern: "/projects/{project}/environments/{env}/runs/{run}/events",
		path: "/projects/hello-world/environments/production/runs/999999/events?after=0", allow: prodViewers, ok: []int{http.StatusNotFound}},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/events",
		path: "/projects/hello-world/environments/production/events?after=0", allow: prodViewers, ok: []int{http.StatusBadRequest}},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/apps/{app}/logs/follow",
		path: "/projects/hello-world/environments/production/apps/web/logs/follow", allow: prodViewers, ok: []int{http.StatusBadRequest, http.StatusNotFound}},

	// Sign-in and sign-out.
	{method: "GET", pattern: "/login", path: "/login", allow: everyone},
	{method: "GET", pattern: "/login/local", path: "/login/local?token=not-a-token", allow: everyone, ok: []int{http.StatusUnauthorized}},
	{method: "POST", pattern: "/logout", path: "/logout", allow: everyone, toLogin: true},
	{method: "GET", pattern: "/login/oidc", path: "/login/oidc", allow: everyone},
	{method: "GET", pattern: "/login/oidc/callback", path: "/login/oidc/callback?state=x&code=y", allow: everyone, ok: []int{http.StatusBadRequest}},

	// The manifest validator is public.
	{method: "GET", pattern: "/validate", path: "/validate", allow: everyone},
	{method: "POST", pattern: "/validate", path: "/validate", form: url.Values{"manifest": {webtest.MinimalManifest}}, allow: everyone},
	// The live editor's check takes JSON only; this table posts a form.
	{method: "POST", pattern: "/validate/check", path: "/validate/check", form: url.Values{"manifest": {webtest.MinimalManifest}}, allow: everyone, ok: []int{http.StatusUnsupportedMediaType}},

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
	{method: "GET", pattern: "/projects/{project}/revisions/new", path: "/projects/hello-world/revisions/new", allow: projectDeployers},
	{method: "POST", pattern: "/projects/{project}/revisions", path: "/projects/hello-world/revisions",
		form: url.Values{"manifest": {webtest.MinimalManifest + "\ndescription: changed\n"}}, allow: projectDeployers},
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
	{method: "POST", pattern: "/projects/{project}/environments/{env}/values/{name}/restore",
		path: "/projects/hello-world/environments/production/values/APP_DOMAIN/restore", form: url.Values{"version": {"1"}},
		allow: prodAdmins, ok: []int{http.StatusNotFound, http.StatusConflict}},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/live", path: "/projects/hello-world/environments/production/live", allow: prodViewers},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/values/{name}/delete",
		path: "/projects/hello-world/environments/production/values/APP_DOMAIN/delete", allow: prodAdmins, ok: []int{http.StatusNotFound}},

	// Revision pages, deletions (a wrong or refused confirmation changes
	// nothing), the confirmation page of removing a member.
	{method: "GET", pattern: "/projects/{project}/revisions/{n}", path: "/projects/hello-world/revisions/1", allow: projectMembers},
	{method: "GET", pattern: "/projects/{project}/settings", path: "/projects/hello-world/settings", allow: installAdmins},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/settings", path: "/projects/hello-world/environments/production/settings", allow: prodAdmins},
	{method: "GET", pattern: "/projects/{project}/delete", path: "/projects/hello-world/delete", allow: installAdmins},
	{method: "POST", pattern: "/projects/{project}/delete", path: "/projects/hello-world/delete",
		form: url.Values{"confirm": {"hello-world"}}, allow: installAdmins, status: http.StatusConflict},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/delete", path: "/projects/hello-world/environments/production/delete", allow: prodAdmins},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/delete", path: "/projects/hello-world/environments/production/delete",
		form: url.Values{"confirm": {"staging"}}, allow: prodAdmins, status: http.StatusUnprocessableEntity},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/members/{user}/remove",
		path:  "/projects/hello-world/environments/production/members/{target}/remove",
		allow: prodAdmins, prepare: func(t *testing.T, f *roleFixture) { f.ensureTarget(t) }},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/members/{user}/remove",
		path: "/projects/hello-world/environments/production/members/{stager}/remove", allow: prodAdmins, status: http.StatusNotFound},

	// Addresses that take posts answer GET with a redirect to their form.
	{method: "GET", pattern: "/projects", path: "/projects", allow: signedIn},
	{method: "GET", pattern: "/projects/{project}/revisions", path: "/projects/hello-world/revisions", allow: projectMembers},
	{method: "GET", pattern: "/projects/{project}/environments", path: "/projects/hello-world/environments", allow: projectMembers},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/values/import", path: "/projects/hello-world/environments/production/values/import", allow: prodViewers},

	// Ids and names of another environment through production's URLs
	// (IDOR): a member of staging only, a value stored in staging only.
	{method: "POST", pattern: "/projects/{project}/environments/{env}/members/{user}/role",
		path: "/projects/hello-world/environments/production/members/{stager}/role", form: url.Values{"role": {"admin"}},
		allow: prodAdmins, status: http.StatusNotFound},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/members/{user}/remove",
		path: "/projects/hello-world/environments/production/members/{stager}/remove", allow: prodAdmins, status: http.StatusNotFound},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/values/{name}/delete",
		path: "/projects/hello-world/environments/production/values/STAGING_ONLY/delete", allow: prodAdmins, status: http.StatusNotFound},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/values/{name}/delete",
		path: "/projects/hello-world/environments/production/values/STAGING_ONLY/delete", allow: prodAdmins, status: http.StatusNotFound},

	// Another project: its admin may, production's people may not.
	{method: "GET", pattern: "/projects/{project}", path: "/projects/other-shop", allow: otherProjectAdmins},
	{method: "GET", pattern: "/projects/{project}/environments/{env}", path: "/projects/other-shop/environments/production", allow: otherProjectAdmins},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/values", path: "/projects/other-shop/environments/production/values", allow: otherProjectAdmins},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/values", path: "/projects/other-shop/environments/production/values",
		form: url.Values{"name": {"APP_DOMAIN"}, "value": {"other.example.test"}}, allow: otherProjectAdmins},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/members", path: "/projects/other-shop/environments/production/members", allow: otherProjectAdmins},
	{method: "POST", pattern: "/projects/{project}/revisions", path: "/projects/other-shop/revisions",
		form: url.Values{"manifest": {strings.Replace(webtest.MinimalManifest, "hello-world", "other-shop", 1) + "\ndescription: changed\n"}}, allow: otherProjectAdmins},

	// Deploys, runs, Check now, the edge.
	{method: "GET", pattern: "/projects/{project}/environments/{env}/deploys/new", path: "/projects/hello-world/environments/production/deploys/new", allow: prodViewers},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/deploys", path: "/projects/hello-world/environments/production/deploys",
		form: url.Values{"revision": {"1"}}, allow: prodDeployers, ok: []int{http.StatusUnprocessableEntity, http.StatusConflict}},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/runs", path: "/projects/hello-world/environments/production/runs", allow: prodViewers},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/runs/{run}", path: "/projects/hello-world/environments/production/runs/{run}", allow: prodViewers},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/runs/{run}/log", path: "/projects/hello-world/environments/production/runs/{run}/log", allow: prodViewers},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/runs/{run}/live", path: "/projects/hello-world/environments/production/runs/{run}/live", allow: prodViewers},
	// Runtime logs (issue 39): production runs nothing in the fixture, so
	// a viewer is told so (404); the follow websocket answers a plain GET 400.
	{method: "GET", pattern: "/projects/{project}/environments/{env}/apps/{app}/logs", path: "/projects/hello-world/environments/production/apps/web/logs",
		allow: prodViewers, ok: []int{http.StatusNotFound}},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/runs/{run}/cancel", path: "/projects/hello-world/environments/production/runs/{run}/cancel",
		allow: prodDeployers, ok: []int{http.StatusConflict}},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/probe", path: "/projects/hello-world/environments/production/probe", allow: prodDeployers},
	// Protected environments (issue 40): the rule is its admins'; approving
	// a run that waits for nothing is a conflict for whoever may see it
	// (who may approve is the rule's, checked by the store).
	{method: "GET", pattern: "/projects/{project}/environments/{env}/protection", path: "/projects/hello-world/environments/production/protection", allow: prodAdmins},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/protection", path: "/projects/hello-world/environments/production/protection",
		form: url.Values{"approvals": {"9"}, "role": {"admin"}}, allow: prodAdmins, ok: []int{http.StatusUnprocessableEntity}},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/runs/{run}/approve", path: "/projects/hello-world/environments/production/runs/{run}/approve",
		allow: prodViewers, ok: []int{http.StatusConflict}},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/runs/{run}/reject", path: "/projects/hello-world/environments/production/runs/{run}/reject",
		form: url.Values{"comment": {"no"}}, allow: prodViewers, ok: []int{http.StatusConflict}},
	{method: "GET", pattern: "/approvals", path: "/approvals", allow: signedIn},
	{method: "GET", pattern: "/approvals/live", path: "/approvals/live", allow: signedIn},
	// Backups (issue 13). The fixture has no backup target until the last
	// row sets one, so allowed posts that would change data are refused
	// with 422 (no target, wrong typed confirmation) or 404/409.
	{method: "GET", pattern: "/projects/{project}/environments/{env}/backups", path: "/projects/hello-world/environments/production/backups", allow: prodViewers},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/backups/live", path: "/projects/hello-world/environments/production/backups/live", allow: prodViewers},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/backups/schedule/preview",
		path: "/projects/hello-world/environments/production/backups/schedule/preview?cron=0+3+*+*+*", allow: prodViewers},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/backups", path: "/projects/hello-world/environments/production/backups",
		allow: prodDeployers, ok: []int{http.StatusUnprocessableEntity}},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/backups/schedule", path: "/projects/hello-world/environments/production/backups/schedule",
		form: url.Values{"cron": {"0 3 * * *"}, "keep": {"7d"}}, allow: prodAdmins, ok: []int{http.StatusUnprocessableEntity}},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/backups/drills", path: "/projects/hello-world/environments/production/backups/drills",
		form: url.Values{"cron": {"0 4 * * 0"}}, allow: prodAdmins, ok: []int{http.StatusUnprocessableEntity}},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/backups/drills/run", path: "/projects/hello-world/environments/production/backups/drills/run",
		allow: prodAdmins, ok: []int{http.StatusUnprocessableEntity, http.StatusConflict}},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/backups/schedule/remove",
		path: "/projects/hello-world/environments/production/backups/schedule/remove", allow: prodAdmins, ok: []int{http.StatusNotFound}},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/backups/accept", path: "/projects/hello-world/environments/production/backups/accept",
		form: url.Values{"confirm": {"production"}}, allow: prodAdmins, ok: []int{http.StatusConflict}},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/backups/{backup}/restore",
		path: "/projects/hello-world/environments/production/backups/{backup}/restore", allow: prodAdmins},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/backups/{backup}/restore",
		path: "/projects/hello-world/environments/production/backups/{backup}/restore", form: url.Values{"confirm": {"not-the-name"}},
		allow: prodAdmins, ok: []int{http.StatusUnprocessableEntity}},
	{method: "GET", pattern: "/projects/{project}/environments/{env}/backups/{backup}/remove",
		path: "/projects/hello-world/environments/production/backups/{backup}/remove", allow: prodAdmins},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/backups/{backup}/remove",
		path: "/projects/hello-world/environments/production/backups/{backup}/remove", form: url.Values{"confirm": {"not-the-name"}},
		allow: prodAdmins, ok: []int{http.StatusUnprocessableEntity}},
	// Webhooks (issue 27): an environment's admins, installation admins for
	// every environment. No endpoint or delivery 999999 exists; a post
	// without events is refused and changes nothing.
	{method: "GET", pattern: "/projects/{project}/environments/{env}/webhooks", path: "/projects/hello-world/environments/production/webhooks", allow: prodAdmins},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/webhooks", path: "/projects/hello-world/environments/production/webhooks",
		form: url.Values{"url": {"https://hooks.example.test/x"}}, allow: prodAdmins, status: http.StatusUnprocessableEntity},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/webhooks/{id}/delete", path: "/projects/hello-world/environments/production/webhooks/999999/delete", allow: prodAdmins, status: http.StatusNotFound},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/webhooks/{id}/disable", path: "/projects/hello-world/environments/production/webhooks/999999/disable", allow: prodAdmins, status: http.StatusNotFound},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/webhooks/{id}/enable", path: "/projects/hello-world/environments/production/webhooks/999999/enable", allow: prodAdmins, status: http.StatusNotFound},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/webhooks/{id}/test", path: "/projects/hello-world/environments/production/webhooks/999999/test", allow: prodAdmins, status: http.StatusNotFound},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/webhooks/deliveries/{delivery}/redeliver", path: "/projects/hello-world/environments/production/webhooks/deliveries/999999/redeliver", allow: prodAdmins, status: http.StatusNotFound},
	{method: "GET", pattern: "/admin/webhooks", path: "/admin/webhooks", allow: installAdmins},
	{method: "POST", pattern: "/admin/webhooks", path: "/admin/webhooks", form: url.Values{"url": {"https://hooks.example.test/x"}}, allow: installAdmins, status: http.StatusUnprocessableEntity},
	{method: "POST", pattern: "/admin/webhooks/{id}/delete", path: "/admin/webhooks/999999/delete", allow: installAdmins, status: http.StatusNotFound},
	{method: "POST", pattern: "/admin/webhooks/{id}/disable", path: "/admin/webhooks/999999/disable", allow: installAdmins, status: http.StatusNotFound},
	{method: "POST", pattern: "/admin/webhooks/{id}/enable", path: "/admin/webhooks/999999/enable", allow: installAdmins, status: http.StatusNotFound},
	{method: "POST", pattern: "/admin/webhooks/{id}/test", path: "/admin/webhooks/999999/test", allow: installAdmins, status: http.StatusNotFound},
	{method: "POST", pattern: "/admin/webhooks/deliveries/{delivery}/redeliver", path: "/admin/webhooks/deliveries/999999/redeliver", allow: installAdmins, status: http.StatusNotFound},
	// A snapshot of staging through production's URL (IDOR).
	{method: "GET", pattern: "/projects/{project}/environments/{env}/backups/{backup}/restore",
		path: "/projects/hello-world/environments/production/backups/{stagingBackup}/restore", allow: prodAdmins, status: http.StatusNotFound},
	{method: "POST", pattern: "/projects/{project}/environments/{env}/backups/{backup}/remove",
		path: "/projects/hello-world/environments/production/backups/{stagingBackup}/remove", form: url.Values{"confirm": {"staging-snap"}},
		allow: prodAdmins, status: http.StatusNotFound},
	{method: "GET", pattern: "/admin", path: "/admin", allow: installAdmins},
	{method: "POST", pattern: "/admin/backup-target", path: "/admin/backup-target", form: url.Values{"target": {"s3://bucket/backups"}},
		allow: installAdmins, ok: []int{http.StatusUnprocessableEntity}},
	{method: "POST", pattern: "/admin/backup-target", path: "/admin/backup-target", form: url.Values{"target": {"{backupTarget}"}}, allow: installAdmins},
	// Hostname claims (issue 35): only installation admins move one; no
	// environment holds this one, so the move is refused on the page.
	{method: "POST", pattern: "/admin/hostnames/move", path: "/admin/hostnames/move",
		form:  url.Values{"hostname": {"nobody.example.test"}, "environment": {"1"}, "confirm": {"nobody.example.test"}},
		allow: installAdmins, status: http.StatusUnprocessableEntity},

	// API tokens (issue 27): anyone signed in manages their own.
	{method: "GET", pattern: "/tokens", path: "/tokens", allow: signedIn},
	{method: "POST", pattern: "/tokens", path: "/tokens", form: url.Values{"name": {"x"}, "scope": {"hello-world/production:viewer"}},
		allow: signedIn, ok: []int{http.StatusUnprocessableEntity}},
	{method: "POST", pattern: "/tokens/{id}/revoke", path: "/tokens/999999/revoke", allow: signedIn, status: http.StatusNotFound},

	// The JSON API (issue 27), with bearer tokens.
	{method: "GET", pattern: "/api/v1/openapi.json", path: "/api/v1/openapi.json", allow: everyone},
	{method: "GET", pattern: "/api/v1/environments", path: "/api/v1/environments", api: true, allow: tokenHolders},
	{method: "POST", pattern: "/api/v1/validate", path: "/api/v1/validate", api: true, allow: tokenHolders,
		json: `{"manifest": ` + strconv.Quote(webtest.MinimalManifest) + `}`},
	{method: "POST", pattern: "/api/v1/projects/{project}/revisions", path: "/api/v1/projects/hello-world/revisions", api: true,
		json: `{"manifest": ` + strconv.Quote(webtest.MinimalManifest+"description: from the api\n") + `}`, allow: projectDeployers},
	{method: "GET", pattern: "/api/v1/projects/{project}/environments/{env}/plan", path: "/api/v1/projects/hello-world/environments/production/plan",
		api: true, allow: prodViewers},
	{method: "GET", pattern: "/api/v1/projects/{project}/environments/{env}/plan", path: "/api/v1/projects/other-shop/environments/production/plan",
		api: true, allow: otherProjectAdmins},
	{method: "POST", pattern: "/api/v1/projects/{project}/environments/{env}/deploys", path: "/api/v1/projects/hello-world/environments/production/deploys",
		api: true, json: `{"revision": 1}`, allow: prodDeployers, ok: []int{http.StatusUnprocessableEntity, http.StatusConflict}},
	{method: "GET", pattern: "/api/v1/projects/{project}/environments/{env}/runs/{run}", path: "/api/v1/projects/hello-world/environments/production/runs/{run}",
		api: true, allow: prodViewers},
	{method: "GET", pattern: "/api/v1/projects/{project}/environments/{env}/health", path: "/api/v1/projects/hello-world/environments/production/health",
		api: true, allow: prodViewers},
	{method: "POST", pattern: "/api/v1/projects/{project}/environments/{env}/runs/{run}/cancel",
		path: "/api/v1/projects/hello-world/environments/production/runs/{run}/cancel", api: true, allow: prodDeployers, ok: []int{http.StatusConflict}},
	{method: "POST", pattern: "/api/v1/projects/{project}/environments/{env}/runs/{run}/approve",
		path: "/api/v1/projects/hello-world/environments/production/runs/{run}/approve", api: true, allow: prodViewers, ok: []int{http.StatusConflict}},
	{method: "POST", pattern: "/api/v1/projects/{project}/environments/{env}/runs/{run}/reject",
		path: "/api/v1/projects/hello-world/environments/production/runs/{run}/reject", api: true, json: `{"comment": "no"}`, allow: prodViewers, ok: []int{http.StatusConflict}},
	{method: "GET", pattern: "/api/v1/projects/{project}/environments/{env}/protection",
		path: "/api/v1/projects/hello-world/environments/production/protection", api: true, allow: prodAdmins},
	{method: "PUT", pattern: "/api/v1/projects/{project}/environments/{env}/protection",
		path: "/api/v1/projects/hello-world/environments/production/protection", api: true, json: `{"approvals": 9, "approvers": ["admin"]}`, allow: prodAdmins, ok: []int{http.StatusUnprocessableEntity}},
	{method: "PUT", pattern: "/api/v1/projects/{project}/environments/{env}/values/{name}",
		path: "/api/v1/projects/hello-world/environments/production/values/APP_DOMAIN", api: true, json: `{"value": "shop.example.test"}`, allow: prodAdmins},
	{method: "POST", pattern: "/api/v1/projects/{project}/environments/{env}/values/import",
		path: "/api/v1/projects/hello-world/environments/production/values/import", api: true, json: `{"dotenv": "APP_DOMAIN=shop.example.test\n"}`, allow: prodAdmins},
	{method: "POST", pattern: "/api/v1/projects/{project}/environments/{env}/backups", path: "/api/v1/projects/hello-world/environments/production/backups",
		api: true, allow: prodDeployers, ok: []int{http.StatusUnprocessableEntity}},

	{method: "GET", pattern: "/.well-known/skali-edge", path: "/.well-known/skali-edge?nonce=abc", allow: everyone},
	{method: "GET", pattern: "/.well-known/acme-challenge/*", path: "/.well-known/acme-challenge/token123", allow: everyone},
}

// roleFixture is a Studio with one person per role.
type roleFixture struct {
	s      *webtest.Server
	prod   *store.Environment
	emails map[string]string
	target int64
	// stager is a viewer of staging only.
	stager int64
	run    int64
	// backup is a finished snapshot of production, stagingBackup one of staging.
	backup, stagingBackup int64
	// tokens are API token secrets by role (see tokenFor).
	tokens map[string]string
	// sessions are clients signed in once per role (see session).
	sessions map[string]*http.Client
}

// session returns a client of role signed in once and kept for the calls
// that cannot end or replace a session (a sign-in runs the whole OpenID
// flow, the most expensive part of a call). Sign-in and sign-out routes get
// a fresh client each time.
func (f *roleFixture) session(t *testing.T, role, pattern string) *http.Client {
	t.Helper()
	if role == anonymous || pattern == "/logout" || strings.HasPrefix(pattern, "/login") {
		return f.client(t, role)
	}
	if c, ok := f.sessions[role]; ok {
		return c
	}
	if f.sessions == nil {
		f.sessions = map[string]*http.Client{}
	}
	f.sessions[role] = f.client(t, role)
	return f.sessions[role]
}

// tokenFor returns an API token of role's person scoped to every
// environment they hold a role on, at that role; "" for roles that hold
// none (anonymous, outsider).
func (f *roleFixture) tokenFor(t *testing.T, role string) string {
	t.Helper()
	if role == anonymous || role == outsider {
		return ""
	}
	if f.tokens == nil {
		f.tokens = map[string]string{}
	}
	if tok, ok := f.tokens[role]; ok {
		return tok
	}
	f.client(t, role)
	u, err := f.s.DB.UserByID(t.Context(), f.s.UserID(t, f.emails[role]))
	if err != nil {
		t.Fatal(err)
	}
	scope, err := f.s.DB.GrantableEnvironments(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := f.s.DB.CreateToken(t.Context(), store.Actor{User: u}, store.NewToken{Name: "roles", Scope: scope, Days: 1})
	if err != nil {
		t.Fatal(err)
	}
	f.tokens[role] = secret
	return secret
}

// hostSecret is production's SECRET_TOKEN. A revision added by the admin
// of staging puts it into an alias (the hostname attack); no answer of any
// route to anyone may contain it.
const hostSecret = "5e884898da28047151d0e56f8dc62927"

func newRoleFixture(t *testing.T) *roleFixture {
	t.Helper()
	s := webtest.Start(t, webtest.WithAdmins("root@example.test"), webtest.WithValueKeys(), webtest.WithDeploys(&webtest.Deploys{}))
	f := &roleFixture{s: s, emails: map[string]string{
		outsider:     "outsider@example.test",
		viewer:       "viewer@example.test",
		deployer:     "deployer@example.test",
		envAdmin:     "admin@example.test",
		otherEnv:     "stager@example.test",
		otherProject: "shopkeeper@example.test",
		installAdmin: "root@example.test",
	}}
	f.prod = s.CreateEnvironment(t, "", "production")
	staging := s.CreateEnvironment(t, "", "staging")
	otherShop := s.CreateEnvironment(t, strings.Replace(webtest.MinimalManifest, "hello-world", "other-shop", 1), "production")
	s.AddMember(t, f.prod, f.emails[viewer], store.RoleViewer)
	s.AddMember(t, f.prod, f.emails[deployer], store.RoleDeployer)
	s.AddMember(t, f.prod, f.emails[envAdmin], store.RoleAdmin)
	s.AddMember(t, staging, f.emails[otherEnv], store.RoleAdmin)
	s.AddMember(t, otherShop, f.emails[otherProject], store.RoleAdmin)
	s.AddMember(t, staging, "stagemember@example.test", store.RoleViewer)
	f.ensureTarget(t)
	f.target = s.UserID(t, "target@example.test")
	f.stager = s.UserID(t, "stagemember@example.test")

	root := f.client(t, installAdmin)
	for _, set := range []struct{ env, name, value string }{
		{"production", "SECRET_TOKEN", hostSecret},
		{"production", "APP_DOMAIN", "shop.example.test"},
		{"staging", "STAGING_ONLY", "staging-value"},
	} {
		if resp, body := s.PostForm(t, root, "/projects/hello-world/environments/"+set.env+"/values",
			url.Values{"name": {set.name}, "value": {set.value}, "confirm_orphan": {"1"}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("set %s in %s = %d:\n%s", set.name, set.env, resp.StatusCode, body)
		}
	}
	attack := webtest.MinimalManifest + "        aliases: [\"${SECRET_TOKEN}.x.example\"]\n"
	if resp, body := s.PostForm(t, f.client(t, otherEnv), "/projects/hello-world/revisions", url.Values{"manifest": {attack}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("staging admin adds the attacking revision = %d:\n%s", resp.StatusCode, body)
	}
	run, err := s.DB.CreateRun(t.Context(), store.Actor{}, f.prod, store.NewRun{EnvironmentID: f.prod.ID, Kind: "reconcile",
		Checkpoints: []store.NewCheckpoint{{Kind: "probe", Name: "Domain arrived · shop.example.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	f.run = run.ID
	// Snapshots recorded whole (no checkpoints), finished at once by River.
	for _, snap := range []struct {
		env  *store.Environment
		name string
		id   *int64
	}{{f.prod, "prod-snap", &f.backup}, {staging, "staging-snap", &f.stagingBackup}} {
		br, err := s.DB.CreateManualBackup(t.Context(), store.Actor{}, snap.env, store.Snapshot{Name: snap.name, Target: t.TempDir(),
			Run: store.NewRun{EnvironmentID: snap.env.ID, Kind: "backup"}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.DB.BackupByRun(t.Context(), br.ID)
		if err != nil {
			t.Fatal(err)
		}
		*snap.id = b.ID
	}
	return f
}

// digest summarises everything a refused request must leave alone (a failed
// sign-in is recorded on purpose, so its audit record is left out).
func (f *roleFixture) digest(t *testing.T) string {
	t.Helper()
	var d string
	err := f.s.DB.Pool.QueryRow(t.Context(), `
		SELECT md5(string_agg(x, '|' ORDER BY x)) FROM (
			SELECT 'p' || row(p.*)::text AS x FROM projects p
			UNION ALL SELECT 'r' || row(r.id, r.project_id, r.number, r.hash, r.source)::text FROM revisions r
			UNION ALL SELECT 'e' || row(e.*)::text FROM environments e
			UNION ALL SELECT 'm' || row(m.*)::text FROM memberships m
			UNION ALL SELECT 'u' || row(u.*)::text FROM users u
			UNION ALL SELECT 'v' || row(v.environment_id, v.name, v.version, v.ciphertext, v.updated_at)::text FROM environment_values v
			UNION ALL SELECT 'a' || row(a.*)::text FROM audit_events a WHERE a.action <> 'sign-in.failed'
			UNION ALL SELECT 'i' || row(i.*)::text FROM installation_settings i
			UNION ALL SELECT 'b' || row(b.*)::text FROM backups b
			UNION ALL SELECT 's' || row(s.*)::text FROM backup_schedules s
			UNION ALL SELECT 'R' || r.id::text FROM runs r
		) t`).Scan(&d)
	if err != nil {
		t.Fatal(err)
	}
	return d
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
	t.Parallel()
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

	// The digest does see a change.
	d0 := f.digest(t)
	if resp, _ := f.s.PostForm(t, f.client(t, installAdmin), "/projects/hello-world/environments/production/values",
		url.Values{"name": {"DIGEST_CHECK"}, "value": {"x"}, "confirm_orphan": {"1"}}); resp.StatusCode != http.StatusSeeOther || f.digest(t) == d0 {
		t.Fatalf("setting a value = %d and left the digest as it was: the digest sees nothing", resp.StatusCode)
	}

	replacer := strings.NewReplacer("{backup}", fmt.Sprint(f.backup), "{stagingBackup}", fmt.Sprint(f.stagingBackup),
		"{target}", fmt.Sprint(f.target), "{stager}", fmt.Sprint(f.stager), "{run}", fmt.Sprint(f.run), "{static}", static.Path("css/app.css"),
		// A directory of its own: setting a backup target writes this
		// installation's marker in it.
		"{backupTarget}", t.TempDir())
	for _, role := range allRoles {
		f.tokenFor(t, role)
	}
	for _, rc := range routeTable {
		if !registered[rc.method+" "+rc.pattern] {
			t.Logf("routeTable row %s %s matches no registered route (not added yet?)", rc.method, rc.pattern)
			continue
		}
		for _, role := range allRoles {
			t.Run(rc.method+" "+rc.pattern+"/"+role, func(t *testing.T) {
				c := f.session(t, role, rc.pattern)
				if rc.prepare != nil {
					rc.prepare(t, f)
				}
				method := rc.method
				if method == "*" {
					method = "GET"
				}
				path := replacer.Replace(rc.path)
				before := f.digest(t)
				var resp *http.Response
				var body string
				if rc.api {
					req, err := http.NewRequest(method, f.s.URL+path, strings.NewReader(rc.json))
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Content-Type", "application/json")
					if tok := f.tokenFor(t, role); tok != "" {
						req.Header.Set("Authorization", "Bearer "+tok)
					}
					r, err := f.s.NewClient().Do(req)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(r.Body)
					r.Body.Close()
					resp, body = r, string(b)
				} else if method == "POST" {
					form := url.Values{}
					for k, vs := range rc.form {
						for _, v := range vs {
							form.Add(k, replacer.Replace(v))
						}
					}
					resp, body = f.s.PostForm(t, c, path, form)
				} else {
					resp, body = f.s.Follow(t, c, f.s.URL+path)
				}
				location := resp.Header.Get("Location")
				allowed := slices.Contains(rc.allow, role)
				if strings.Contains(body, hostSecret) {
					t.Errorf("%s %s as %s shows production's SECRET_TOKEN", method, rc.path, role)
				}
				refused := !allowed || resp.StatusCode >= 400
				if after := f.digest(t); refused && after != before {
					t.Errorf("%s %s as %s was refused (%d) but changed what is stored", method, rc.path, role, resp.StatusCode)
				}
				switch {
				case allowed && rc.status != 0:
					if resp.StatusCode != rc.status {
						t.Errorf("%s %s as %s = %d, want %d", method, rc.path, role, resp.StatusCode, rc.status)
					}
				case allowed:
					ok := resp.StatusCode >= 200 && resp.StatusCode < 300 ||
						resp.StatusCode == http.StatusSeeOther && !toSignIn(location) ||
						resp.StatusCode == http.StatusFound && !toSignIn(location) ||
						slices.Contains(rc.ok, resp.StatusCode)
					if rc.toLogin {
						ok = resp.StatusCode == http.StatusSeeOther && toSignIn(location)
					}
					if !ok {
						t.Errorf("%s %s as %s = %d (Location %q), want it allowed", method, rc.path, role, resp.StatusCode, location)
					}
				case rc.api:
					want := http.StatusForbidden
					if f.tokenFor(t, role) == "" {
						want = http.StatusUnauthorized
					}
					if resp.StatusCode != want || resp.Header.Get("Content-Type") != "application/problem+json" {
						t.Errorf("%s %s as %s = %d (%s), want a %d problem document", method, rc.path, role, resp.StatusCode, resp.Header.Get("Content-Type"), want)
					}
				case role == anonymous:
					if resp.StatusCode != http.StatusSeeOther || !toSignIn(location) {
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

// toSignIn reports whether location is the sign-in page (with or without
// the page to return to).
func toSignIn(location string) bool {
	return location == "/login" || strings.HasPrefix(location, "/login?")
}
