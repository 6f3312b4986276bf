package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

var runStatus = regexp.MustCompile(`id="run-status" data-run-status="([a-z-]+)" data-run-kind="([a-z]+)"`)

// waitForRun reloads the run page until the run has finished, as a person
// watching it would; it asserts nothing about how long that takes.
// It gives up after 3 minutes, saying the run's last status.
func waitForRun(t *testing.T, s *webtest.Server, c *http.Client, path string) string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		status, page := s.Get(t, c, path)
		if status != http.StatusOK {
			t.Fatalf("run page: %d", status)
		}
		m := runStatus.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("the run page marks no status:\n%s", pageMain(page))
		}
		if store.RunFinished(m[1]) {
			return page
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not finish within 3 minutes; it is %s:\n%s", path, m[1], pageMain(page))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDeployFromThePlanToTheRunPage(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{Resolver: dns}))
	c := s.SignInLocal(t)
	env := s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	s.AddMember(t, env, "viewer@example.test", store.RoleViewer)
	const envPath = "/projects/team-wiki/environments/production"

	// Missing values: the plan says so and links to the values page.
	status, page := s.Get(t, c, envPath+"/deploys/new")
	if status != 200 || !strings.Contains(page, "Required values are missing") || !strings.Contains(page, `/values#value-SESSION_SECRET`) {
		t.Fatalf("plan without values: %d\n%s", status, pageMain(page))
	}
	resp, body := s.PostForm(t, c, envPath+"/deploys", url.Values{})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Required values are missing") {
		t.Fatalf("deploy without values: %d", resp.StatusCode)
	}
	for name, value := range map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": "plaintext-of-a-secret"} {
		if resp, _ := s.PostForm(t, c, envPath+"/values", url.Values{"name": {name}, "value": {value}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("set %s: %d", name, resp.StatusCode)
		}
	}
	dns.Set("wiki.test", "127.0.0.1")

	status, page = s.Get(t, c, envPath+"/deploys/new")
	for _, want := range []string{"Deploy revision 1 to production", "First deploy", "<code>wiki.test</code>", "database", "created"} {
		if status != 200 || !strings.Contains(page, want) {
			t.Fatalf("plan lacks %q: %d\n%s", want, status, pageMain(page))
		}
	}
	// A viewer reads the plan without the resolved hostnames.
	viewer := s.SignInAs(t, "viewer@example.test", "Viewer")
	if status, page := s.Get(t, viewer, envPath+"/deploys/new"); status != 200 || strings.Contains(page, "<code>wiki.test</code>") || !strings.Contains(page, "${APP_DOMAIN}") {
		t.Fatalf("viewer's plan: %d\n%s", status, pageMain(page))
	}
	if resp, _ := s.PostForm(t, viewer, envPath+"/deploys", url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer deploys: %d", resp.StatusCode)
	}

	resp, _ = s.PostForm(t, c, envPath+"/deploys", url.Values{"revision": {"1"}})
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), envPath+"/runs/") {
		t.Fatalf("deploy: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	runPath := resp.Header.Get("Location")
	page = waitForRun(t, s, c, runPath)
	if m := runStatus.FindStringSubmatch(page); m[1] != "succeeded" || m[2] != "deploy" {
		t.Fatalf("run ended %s:\n%s", m[1], pageMain(page))
	}
	for _, want := range []string{`id="run-header"`, `id="checkpoint-1"`, "Issue TLS certificate · web / public", "Activate revision 1", "<details", "answered as this installation"} {
		if !strings.Contains(page, want) {
			t.Fatalf("run page lacks %q:\n%s", want, pageMain(page))
		}
	}
	if strings.Contains(page, `http-equiv="refresh"`) {
		t.Fatal("a finished run's page still refreshes itself")
	}
	status, page = s.Get(t, c, envPath)
	if status != 200 || !strings.Contains(page, "running revision 1") || !strings.Contains(page, `data-service-state="issued"`) {
		t.Fatalf("environment page after the deploy: %d\n%s", status, pageMain(page))
	}
	status, page = s.Get(t, c, envPath+"/runs")
	if status != 200 || !strings.Contains(page, `data-run-status="succeeded" data-run-kind="deploy"`) {
		t.Fatalf("runs list: %d\n%s", status, pageMain(page))
	}
	// Redeploying the active revision needs redeploy=1.
	resp, body = s.PostForm(t, c, envPath+"/deploys", url.Values{"revision": {"1"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "already active") {
		t.Fatalf("redeploy without redeploy=1: %d", resp.StatusCode)
	}
	assertAudit(t, s, "deploy.started", "run 1", `"revision": 1`)
	if strings.Contains(s.Logs.String(), "plaintext-of-a-secret") {
		t.Fatal("a value reached the logs")
	}
}

func TestDeferredDomainShowsDNSPendingAndCheckNow(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	s, c := deployableWiki(t, &webtest.Deploys{}, dns, "127.0.0.2")
	const envPath = "/projects/team-wiki/environments/production"
	resp, _ := s.PostForm(t, c, envPath+"/deploys", url.Values{})
	page := waitForRun(t, s, c, resp.Header.Get("Location"))
	for _, want := range []string{`data-run-status="succeeded-with-warnings"`, "succeeded · with warnings", "1 route deferred",
		"cert deferred · domain not pointing here yet", "warning: TLS deferred: wiki.test is not pointing here yet", "no answer: connection refused"} {
		if !strings.Contains(page, want) {
			t.Fatalf("run page lacks %q:\n%s", want, pageMain(page))
		}
	}
	_, page = s.Get(t, c, envPath)
	if !strings.Contains(page, `data-service-state="DNS pending"`) || !strings.Contains(page, "Check now") {
		t.Fatalf("environment page:\n%s", pageMain(page))
	}
	// The run's and the environment's live parts say the same, for the
	// pages' scripts to swap in (a deferral seen live, a check run out).
	runLive := resp.Header.Get("Location") + "/live"
	for _, live := range []string{runLive, envPath + "/live"} {
		if status, parts := s.Get(t, c, live); status != http.StatusOK || !strings.Contains(parts, `data-dns-pending="wiki.test"`) ||
			!strings.Contains(parts, "Check now") || strings.Contains(parts, "<html") {
			t.Fatalf("%s: %d\n%s", live, status, parts)
		}
	}
	// The domain arrives; Check now issues at once.
	dns.Set("wiki.test", "127.0.0.1")
	resp, _ = s.PostForm(t, c, envPath+"/probe", url.Values{"domain": {"wiki.test"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != envPath {
		t.Fatalf("check now: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	for range 600 {
		if _, page = s.Get(t, c, envPath); strings.Contains(page, `data-service-state="issued"`) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(page, `data-service-state="issued"`) {
		t.Fatalf("after check now:\n%s", pageMain(page))
	}
	// Issued: the run's live parts hold an empty slot where the page's
	// script had what to do.
	if status, parts := s.Get(t, c, runLive); status != http.StatusOK || strings.Contains(parts, "data-dns-pending") || !strings.Contains(parts, `class="dns-slot"`) {
		t.Fatalf("%s after the domain was issued: %d\n%s", runLive, status, parts)
	}
	assertAudit(t, s, "domains.checked", "production", "wiki.test")
}

func TestDestructiveDeployAsksForTheEnvironmentsName(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	s, c := deployableWiki(t, &webtest.Deploys{}, dns, "127.0.0.1")
	const envPath = "/projects/team-wiki/environments/production"
	resp, _ := s.PostForm(t, c, envPath+"/deploys", url.Values{})
	waitForRun(t, s, c, resp.Header.Get("Location"))

	// Revision 2 drops the bucket: the plan says so and asks for the name.
	src := exampleManifest(t, "production")
	i := strings.Index(src, "\nbuckets:")
	next := strings.NewReplacer(`      S3_ENDPOINT: "{{buckets.attachments.endpoint}}"`+"\n", "",
		`      S3_BUCKET: "{{buckets.attachments.name}}"`+"\n", "", `      S3_REGION: "{{buckets.attachments.region}}"`+"\n", "",
		`      S3_ACCESS_KEY: "{{buckets.attachments.access_key}}"`+"\n", "", `      S3_SECRET_KEY: "{{buckets.attachments.secret_key}}"`+"\n", "").Replace(src[:i+1])
	if resp, body := s.PostForm(t, c, "/projects/team-wiki/revisions", url.Values{"manifest": {next}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("add revision: %d\n%s", resp.StatusCode, pageMain(body))
	}
	status, page := s.Get(t, c, envPath+"/deploys/new?revision=2")
	if status != 200 || !strings.Contains(page, "Removing bucket attachments destroys its data.") || !strings.Contains(page, `name="confirm"`) {
		t.Fatalf("plan: %d\n%s", status, pageMain(page))
	}
	resp, body := s.PostForm(t, c, envPath+"/deploys", url.Values{"revision": {"2"}, "confirm": {"prod"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `<p class="error-text" id="confirm-error" role="alert">This deploy destroys data. Type the environment&#39;s name, production, to confirm.</p>`) ||
		!strings.Contains(body, `aria-describedby="confirm-error" autofocus`) {
		t.Fatalf("wrong confirmation: %d\n%s", resp.StatusCode, pageMain(body))
	}
	resp, _ = s.PostForm(t, c, envPath+"/deploys", url.Values{"revision": {"2"}, "confirm": {"production"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("confirmed deploy: %d", resp.StatusCode)
	}
	waitForRun(t, s, c, resp.Header.Get("Location"))
	assertAudit(t, s, "deploy.started", "run 2", `"confirmation": true`)
}

// deployableWiki starts a Studio whose deploys use d and dns, with the
// example project's production environment and the values its manifest
// requires, signed in as the local administrator; wiki.test resolves to
// address (127.0.0.1 is this Studio's edge; anything else is elsewhere).
func deployableWiki(t *testing.T, d *webtest.Deploys, dns *webtest.Resolver, address string) (*webtest.Server, *http.Client) {
	t.Helper()
	d.Resolver = dns
	s := webtest.Start(t, webtest.WithDeploys(d))
	s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	admin := s.SignInLocal(t)
	for name, value := range map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": "x"} {
		if resp, _ := s.PostForm(t, admin, "/projects/team-wiki/environments/production/values", url.Values{"name": {name}, "value": {value}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("set %s: %d", name, resp.StatusCode)
		}
	}
	dns.Set("wiki.test", address)
	return s, admin
}
