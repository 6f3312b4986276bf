// Package paths builds the URL path of every page and form target of the
// Studio, in one place, so that a route change is one edit here and in
// web/web.go. Project and environment names are keys (lowercase letters,
// digits and hyphens) and value names are capitals, digits and
// underscores, so no part needs escaping.
package paths

import "strconv"

// Home is the projects list, the page the brand and "Projects" lead to.
const Home = "/"

// Validate is the manifest validator, open without signing in.
const Validate = "/validate"

// ValidateCheck is the live editor's JSON check of a manifest (POST).
const ValidateCheck = Validate + "/check"

// Audit is the audit log; AuditFiltered adds its filters.
const Audit = "/audit"

// AuditFiltered is the audit log filtered by query, an encoded query
// string (empty: no filter).
func AuditFiltered(query string) string {
	if query == "" {
		return Audit
	}
	return Audit + "?" + query
}

// Tokens is the page of the signed-in person's API tokens.
const Tokens = "/tokens"

// TokenCreated is the tokens page showing the new token id's secret once.
func TokenCreated(id int64) string { return Tokens + "?created=" + strconv.FormatInt(id, 10) }

// TokenRevoke is where a token is revoked.
func TokenRevoke(id int64) string { return Tokens + "/" + strconv.FormatInt(id, 10) + "/revoke" }

// Admin is the installation page.
const Admin = "/admin"

// AdminBackupTarget is where the installation's backup target is posted.
const AdminBackupTarget = Admin + "/backup-target"

// AdminHostnameMove is where an installation admin posts the move of a
// hostname's claim to another environment.
const AdminHostnameMove = Admin + "/hostnames/move"

// Login is the sign-in page.
const Login = "/login"

// LoginLocal signs in with the local account when no identity provider is
// configured.
const LoginLocal = Login + "/local"

// LoginOIDC starts a sign-in at the identity provider.
const LoginOIDC = Login + "/oidc"

// LoginOIDCCallback is where the identity provider sends the browser back;
// the provider must know it as PublicURL + LoginOIDCCallback.
const LoginOIDCCallback = LoginOIDC + "/callback"

// Logout is where signing out is posted.
const Logout = "/logout"

// NewProject is the form that creates a project from a manifest; the
// project is posted to Projects.
const NewProject = Projects + "/new"

// Projects is where a new project is posted.
const Projects = "/projects"

// Project is a project's page.
func Project(project string) string { return Projects + "/" + project }

// ProjectEnvironmentsPage is page n (from 1) of a project's environments,
// on its page.
func ProjectEnvironmentsPage(project string, n int) string {
	if n <= 1 {
		return Project(project) + "#environments"
	}
	return Project(project) + "?page=" + strconv.Itoa(n) + "#environments"
}

// ProjectDelete is the danger zone that deletes a project.
func ProjectDelete(project string) string { return Project(project) + "/delete" }

// ProjectSettings is a project's settings page, where its danger zone lives.
func ProjectSettings(project string) string { return Project(project) + "/settings" }

// Revisions is where a new revision is posted.
func Revisions(project string) string { return Project(project) + "/revisions" }

// NewRevision is the form that adds a revision.
func NewRevision(project string) string { return Revisions(project) + "/new" }

// Revision is the page of revision n.
func Revision(project string, n int) string { return Revisions(project) + "/" + strconv.Itoa(n) }

// Environments is where a new environment is posted.
func Environments(project string) string { return Project(project) + "/environments" }

// Environment is an environment's overview.
func Environment(project, env string) string { return Environments(project) + "/" + env }

// EnvironmentDelete is the danger zone that deletes an environment.
func EnvironmentDelete(project, env string) string { return Environment(project, env) + "/delete" }

// EnvironmentSettings is an environment's settings page: links to its
// members, webhooks and protection, and its danger zone.
func EnvironmentSettings(project, env string) string { return Environment(project, env) + "/settings" }

// Values is an environment's values page (and where one value is set).
func Values(project, env string) string { return Environment(project, env) + "/values" }

// ValuesImport is where a .env file is posted.
func ValuesImport(project, env string) string { return Values(project, env) + "/import" }

// ValuesPrune confirms and prunes orphaned values.
func ValuesPrune(project, env string) string { return Values(project, env) + "/prune" }

// ValueDelete confirms and deletes one value.
func ValueDelete(project, env, name string) string {
	return Values(project, env) + "/" + name + "/delete"
}

// Members is an environment's members page.
func Members(project, env string) string { return Environment(project, env) + "/members" }

// Member is one member of an environment (append /role or /remove).
func Member(project, env string, userID int64) string {
	return Members(project, env) + "/" + strconv.FormatInt(userID, 10)
}

// DeployPlan is the plan of deploying revision (0: the latest).
func DeployPlan(project, env string, revision int) string {
	p := Environment(project, env) + "/deploys/new"
	if revision > 0 {
		p += "?revision=" + strconv.Itoa(revision)
	}
	return p
}

// Redeploy is the plan of deploying the active revision again, with
// "Redeploy the active revision" ticked: how drift is restored.
func Redeploy(project, env string, revision int) string {
	return DeployPlan(project, env, revision) + "&redeploy=1"
}

// Deploys is where a deploy is started.
func Deploys(project, env string) string { return Environment(project, env) + "/deploys" }

// Probe is Check now.
func Probe(project, env string) string { return Environment(project, env) + "/probe" }

// Runs is an environment's runs list.
func Runs(project, env string) string { return Environment(project, env) + "/runs" }

// RunsBefore is the page of the runs list after run before: the runs older
// than it.
func RunsBefore(project, env string, before int64) string {
	return Runs(project, env) + "?before=" + strconv.FormatInt(before, 10)
}

// Run is a run's page.
func Run(project, env string, id int64) string {
	return Runs(project, env) + "/" + strconv.FormatInt(id, 10)
}

// RunCancel is where a run's cancellation is requested.
func RunCancel(project, env string, id int64) string { return Run(project, env, id) + "/cancel" }

// RunLog is where a run's whole log downloads as text.
func RunLog(project, env string, id int64) string { return Run(project, env, id) + "/log" }

// RunLine is the anchor of line n of a run's log on its page.
func RunLine(project, env string, id, n int64) string {
	return Run(project, env, id) + "#L" + strconv.FormatInt(n, 10)
}

// RunEvents is a run's websocket event stream.
func RunEvents(project, env string, id int64) string { return Run(project, env, id) + "/events" }

// EnvironmentEvents is an environment's websocket event stream.
func EnvironmentEvents(project, env string) string { return Environment(project, env) + "/events" }

// Backups is an environment's backups page (and where a snapshot is taken).
func Backups(project, env string) string { return Environment(project, env) + "/backups" }

// RollbackPlan is the plan of rolling back to the release of an earlier
// successful deploy (run runID): its revision and value versions.
func RollbackPlan(project, env string, runID int64) string {
	return Environment(project, env) + "/deploys/new?release=" + strconv.FormatInt(runID, 10)
}

// EnvironmentLive is the environment page's live parts (state, what runs,
// what changed since, releases), re-fetched by the page's script when the
// environment's stream brings an event.
func EnvironmentLive(project, env string) string { return Environment(project, env) + "/live" }

// BackupsLive is the backups page's live parts (an alert, the header's
// action, the status card, the snapshots), re-fetched by the page's script
// when a snapshot or a restore starts or ends.
func BackupsLive(project, env string) string { return Backups(project, env) + "/live" }

// RunLive is the run page's live parts that depend on the reader's role
// (what to do about a DNS-pending domain, Check now among it), re-fetched
// by the page's script when a checkpoint defers a domain or a countdown
// to its next check runs out.
func RunLive(project, env string, id int64) string { return Run(project, env, id) + "/live" }

// ValueRestore restores an earlier version of a value as its next version.
func ValueRestore(project, env, name string) string {
	return Values(project, env) + "/" + name + "/restore"
}

// Webhooks is an environment's webhooks page, where its endpoints are
// added (posted) and its deliveries listed.
func Webhooks(project, env string) string { return Environment(project, env) + "/webhooks" }

// AdminWebhooks is the page of the webhook endpoints that hear of every
// environment (installation admins).
const AdminWebhooks = Admin + "/webhooks"

// WebhookCreated is a webhooks page (base) showing the new endpoint id's
// secret once.
func WebhookCreated(base string, id int64) string {
	return base + "?created=" + strconv.FormatInt(id, 10)
}

// WebhookAction is where action (delete, disable, enable) is posted for
// endpoint id of a webhooks page (base).
func WebhookAction(base string, id int64, action string) string {
	return base + "/" + strconv.FormatInt(id, 10) + "/" + action
}

// WebhookRedeliver is where a delivery of a webhooks page (base) is sent again.
func WebhookRedeliver(base string, deliveryID int64) string {
	return base + "/deliveries/" + strconv.FormatInt(deliveryID, 10) + "/redeliver"
}

// Protection is an environment's protection page (its rule).
func Protection(project, env string) string { return Environment(project, env) + "/protection" }

// RunApprove and RunReject are where a waiting run is approved or rejected.
func RunApprove(project, env string, id int64) string { return Run(project, env, id) + "/approve" }

// RunReject is where a waiting run is rejected (with a comment).
func RunReject(project, env string, id int64) string { return Run(project, env, id) + "/reject" }

// Approvals is the signed-in person's inbox of runs waiting for them.
const Approvals = "/approvals"

// ApprovalsLive is the navigation's count of runs waiting for the
// signed-in person, re-fetched by every page's script.
const ApprovalsLive = Approvals + "/live"

// AppLogs is an application's runtime logs page; with ?download=1 its
// filtered lines as a file.
func AppLogs(project, env, app string) string {
	return Environment(project, env) + "/apps/" + app + "/logs"
}

// AppLogsFollow is the websocket that follows an application's runtime
// log live.
func AppLogsFollow(project, env, app string) string { return AppLogs(project, env, app) + "/follow" }
