package web_test

import (
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// publicSecret is production's SESSION_SECRET in these tests: a valid DNS
// label, so that only the rule, not the hostname check, keeps it private.
const publicSecret = "9f86d081884c7d659a2feaa0c55ad015"

// TestAHostnameCannotPublishAValueByAccident: a value the project uses
// outside hostnames (SESSION_SECRET, in the application's environment) may
// be a secret, and a hostname is public (DNS, certificates, logs). A
// revision whose alias is built from it is refused to production's
// deployer, who never sees it resolved; an admin of production deploys it
// only by typing the environment's name, and the audit says which values
// were published. A value used only in hostnames (APP_DOMAIN) deploys as
// before.
func TestAHostnameCannotPublishAValueByAccident(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{Resolver: dns}))
	prod := s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	s.AddMember(t, prod, "dan@example.test", store.RoleDeployer)
	s.AddMember(t, prod, "ada@example.test", store.RoleAdmin)
	root := s.SignInLocal(t)
	for name, value := range map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": publicSecret} {
		if resp, _ := s.PostForm(t, root, envPath+"/values", url.Values{"name": {name}, "value": {value}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("set %s = %d, want 303", name, resp.StatusCode)
		}
	}
	dns.Set("wiki.test", "127.0.0.1")
	dns.Set("www.wiki.test", "127.0.0.1")
	dns.Set(publicSecret+".x.example", "127.0.0.1")
	deployer := s.SignInAs(t, "dan@example.test", "Dan Deployer")
	admin := s.SignInAs(t, "ada@example.test", "Ada Admin")
	// noSecret fails without ever printing the value.
	noSecret := func(t *testing.T, where, body string) {
		t.Helper()
		if strings.Contains(body, publicSecret) {
			t.Errorf("%s shows the value of SESSION_SECRET", where)
		}
	}
	addRevision := func(t *testing.T, manifest string) {
		t.Helper()
		if resp, body := s.PostForm(t, root, "/projects/team-wiki/revisions", url.Values{"manifest": {manifest}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("add revision = %d:\n%s", resp.StatusCode, pageMain(body))
		}
	}
	// deploy starts a deploy and waits for it; it returns the run page and
	// the run's id.
	deploy := func(t *testing.T, c *http.Client, form url.Values) (string, string) {
		t.Helper()
		resp, body := s.PostForm(t, c, envPath+"/deploys", form)
		if resp.StatusCode != http.StatusSeeOther {
			noSecret(t, "the refused deploy", body)
			t.Fatalf("deploy %v = %d, want 303:\n%s", form, resp.StatusCode, pageMain(body))
		}
		location := resp.Header.Get("Location")
		return waitForRun(t, s, c, location), path.Base(location)
	}
	runs := func(t *testing.T) int {
		t.Helper()
		var n int
		if err := s.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM runs WHERE kind = 'deploy'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	manifest := exampleManifest(t, "production")
	withAlias := func(alias string) string {
		return strings.Replace(manifest, `domain: "${APP_DOMAIN}"`, `domain: "${APP_DOMAIN}"`+"\n        aliases: [\""+alias+"\"]", 1)
	}

	t.Run("a value used only in hostnames deploys without friction", func(t *testing.T) {
		deploy(t, deployer, url.Values{"revision": {"1"}})
		addRevision(t, withAlias("www.${APP_DOMAIN}"))
		_, page := s.Get(t, deployer, envPath+"/deploys/new?revision=2")
		if !strings.Contains(page, "<code>www.wiki.test</code>") || strings.Contains(page, `id="public-values"`) || strings.Contains(page, "confirm_public_value") {
			t.Errorf("the plan of an alias from APP_DOMAIN should resolve it for the deployer and ask nothing more:\n%s", pageMain(page))
		}
		run, _ := deploy(t, deployer, url.Values{"revision": {"2"}})
		if m := runStatus.FindStringSubmatch(run); m[1] != "succeeded" {
			t.Errorf("deploy of revision 2 ended %s", m[1])
		}
	})

	addRevision(t, withAlias("${SESSION_SECRET}.x.example")) // revision 3
	deploys := runs(t)

	t.Run("the deployer sees the expression and the refusal", func(t *testing.T) {
		_, page := s.Get(t, deployer, envPath+"/deploys/new?revision=3")
		noSecret(t, "the deployer's plan", page)
		for _, want := range []string{"This deploy is refused for deployers", "${SESSION_SECRET}.x.example", "web.environment.SESSION_SECRET", "hostnames are public by nature", `type="submit" disabled`} {
			if !strings.Contains(page, want) {
				t.Errorf("the deployer's plan lacks %q:\n%s", want, pageMain(page))
			}
		}
		if strings.Contains(page, `name="confirm_public_value"`) {
			t.Error("the deployer's plan offers to publish the value")
		}
		// Typing the name changes nothing for a deployer.
		for _, form := range []url.Values{{"revision": {"3"}}, {"revision": {"3"}, "confirm_public_value": {"production"}, "confirm": {"production"}}} {
			resp, body := s.PostForm(t, deployer, envPath+"/deploys", form)
			noSecret(t, "the deployer's refused deploy", body)
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Only an admin of production can deploy a hostname built from SESSION_SECRET") {
				t.Errorf("deployer's deploy %v = %d, want 422 with the reason:\n%s", form, resp.StatusCode, pageMain(body))
			}
		}
		if runs(t) != deploys {
			t.Error("a refused deploy created a run")
		}
		for _, p := range []string{envPath, envPath + "/runs", envPath + "/runs/1", envPath + "/runs/2", envPath + "/values", "/projects/team-wiki", "/projects/team-wiki/revisions/3", "/audit", "/"} {
			_, body := s.Get(t, deployer, p)
			noSecret(t, p+" for the deployer", body)
		}
	})

	t.Run("an admin must type the environment's name", func(t *testing.T) {
		_, page := s.Get(t, admin, envPath+"/deploys/new?revision=3")
		noSecret(t, "the admin's plan", page)
		for _, want := range []string{"This deploy publishes SESSION_SECRET in a hostname", `name="confirm_public_value"`, "to publish <code>SESSION_SECRET</code> in a hostname"} {
			if !strings.Contains(page, want) {
				t.Errorf("the admin's plan lacks %q:\n%s", want, pageMain(page))
			}
		}
		for _, typed := range []string{"", "staging"} {
			resp, body := s.PostForm(t, admin, envPath+"/deploys", url.Values{"revision": {"3"}, "confirm_public_value": {typed}, "confirm": {"production"}})
			noSecret(t, "the admin's refused deploy", body)
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Type the environment&#39;s name, production, to publish it.") {
				t.Errorf("admin's deploy with %q typed = %d, want 422 asking for the name:\n%s", typed, resp.StatusCode, pageMain(body))
			}
		}
		// An installation admin is an admin of every environment, and asked the same.
		if resp, _ := s.PostForm(t, root, envPath+"/deploys", url.Values{"revision": {"3"}}); resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("installation admin's deploy without the name = %d, want 422", resp.StatusCode)
		}
		if runs(t) != deploys {
			t.Error("a refused deploy created a run")
		}
		if strings.Contains(s.Logs.String(), publicSecret) {
			t.Error("the value of SESSION_SECRET reached the logs")
		}
	})

	t.Run("an admin who types the name publishes it, audited by name", func(t *testing.T) {
		run, id := deploy(t, admin, url.Values{"revision": {"3"}, "confirm_public_value": {"production"}})
		if m := runStatus.FindStringSubmatch(run); m[1] != "succeeded" {
			t.Errorf("the admin's deploy ended %s", m[1])
		}
		assertAudit(t, s, "deploy.started", "run "+id, `"published_values": ["SESSION_SECRET"]`)
		var leaked bool
		if err := s.DB.Pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM audit_events WHERE detail::text LIKE '%' || $1 || '%')`, publicSecret).Scan(&leaked); err != nil || leaked {
			t.Errorf("the audit records the value itself (err %v)", err)
		}
		var published int
		if err := s.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_events WHERE action = 'deploy.started' AND detail ? 'published_values'`).Scan(&published); err != nil || published != 1 {
			t.Errorf("deploys recorded as publishing values = %d (err %v), want 1", published, err)
		}
	})
}
