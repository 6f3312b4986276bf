package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// TestAPublicationIsConfirmedOncePerValueVersion: a manifest whose
// application reads PUBLIC_ORIGIN "https://${APP_DOMAIN}" publishes
// APP_DOMAIN through its route. Production's admin confirms it once, by
// typing the name; after that the plan shows the hostname it serves and
// "published since …", and the deployer redeploys and rolls back without
// being asked; a new version of APP_DOMAIN asks again. A deployer's token
// typing the name is refused, as the README says.
func TestAPublicationIsConfirmedOncePerValueVersion(t *testing.T) {
	t.Parallel()
	const envPath = "/projects/team-wiki/environments/production"
	dns := &webtest.Resolver{}
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{Resolver: dns}))
	manifest := strings.Replace(exampleManifest(t, "production"), `      SESSION_SECRET: "${SESSION_SECRET}"`,
		`      SESSION_SECRET: "${SESSION_SECRET}"`+"\n"+`      PUBLIC_ORIGIN: "https://${APP_DOMAIN}"`, 1)
	prod := s.CreateEnvironment(t, manifest, "production")
	s.AddMember(t, prod, "dan@example.test", store.RoleDeployer)
	s.AddMember(t, prod, "ada@example.test", store.RoleAdmin)
	root := s.SignInLocal(t)
	for name, value := range map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": publicSecret} {
		if resp, _ := s.PostForm(t, root, envPath+"/values", url.Values{"name": {name}, "value": {value}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("set %s = %d, want 303", name, resp.StatusCode)
		}
	}
	dns.Set("wiki.test", "127.0.0.1")
	dns.Set("wiki2.test", "127.0.0.1")
	deployer := s.SignInAs(t, "dan@example.test", "Dan Deployer")
	admin := s.SignInAs(t, "ada@example.test", "Ada Admin")
	deploy := func(t *testing.T, c *http.Client, form url.Values) string {
		t.Helper()
		resp, body := s.PostForm(t, c, envPath+"/deploys", form)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("deploy %v = %d, want 303:\n%s", form, resp.StatusCode, pageMain(body))
		}
		return waitForRun(t, s, c, resp.Header.Get("Location"))
	}
	hostnameCell := `<code>wiki.test</code>`

	// Before the publication: the deployer is refused and sees the expression only.
	_, page := s.Get(t, deployer, envPath+"/deploys/new")
	if !strings.Contains(page, "This deploy is refused for deployers") || strings.Contains(page, hostnameCell) {
		t.Fatalf("the deployer's first plan should refuse and withhold the hostname:\n%s", pageMain(page))
	}
	// A deployer's token typing the name is refused (422, the field named).
	_, dtoken := s.CreateToken(t, deployer, "ci", "1", "team-wiki/production:deployer")
	resp, body := apiCall(t, s, nil, dtoken, "POST", "/api/v1"+envPath+"/deploys", map[string]any{"confirm_public_value": "production"})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Only an admin of production can deploy a hostname built from APP_DOMAIN") {
		t.Fatalf("a deployer's token publishing APP_DOMAIN = %d, want 422:\n%s", resp.StatusCode, body)
	}

	// The admin publishes it once.
	run := deploy(t, admin, url.Values{"confirm_public_value": {"production"}})
	if m := runStatus.FindStringSubmatch(run); m == nil || m[1] != "succeeded" {
		t.Fatalf("the admin's publishing deploy did not succeed:\n%s", pageMain(run))
	}

	// Now every plan of that version shows the hostname and asks nothing.
	for who, c := range map[string]*http.Client{"deployer": deployer, "admin": admin} {
		_, page := s.Get(t, c, envPath+"/deploys/new")
		for _, want := range []string{hostnameCell, "<code>APP_DOMAIN</code> v1 is published since", "by Ada Admin", "asks nothing more"} {
			if !strings.Contains(page, want) {
				t.Errorf("the %s's plan after the publication lacks %q:\n%s", who, want, pageMain(page))
			}
		}
		if strings.Contains(page, `id="public-values"`) || strings.Contains(page, `name="confirm_public_value"`) || strings.Contains(page, "not shown · uses") {
			t.Errorf("the %s's plan still asks to publish APP_DOMAIN:\n%s", who, pageMain(page))
		}
	}
	// The API's plan names the hostname the deploy serves.
	resp, body = apiCall(t, s, nil, dtoken, "GET", "/api/v1"+envPath+"/plan", nil)
	var plan struct {
		CanStart  bool `json:"can_start"`
		Hostnames []struct {
			Expression, Hostname string
		} `json:"hostnames"`
	}
	if err := json.Unmarshal([]byte(body), &plan); err != nil || resp.StatusCode != 200 || len(plan.Hostnames) == 0 || plan.Hostnames[0].Hostname != "wiki.test" || !plan.CanStart {
		t.Errorf("the API plan = %d, want hostname wiki.test and can_start (err %v):\n%s", resp.StatusCode, err, body)
	}
	// The deployer redeploys without typing anything.
	run = deploy(t, deployer, url.Values{"redeploy": {"1"}})
	if m := runStatus.FindStringSubmatch(run); m == nil || m[1] != "succeeded" {
		t.Fatalf("the deployer's redeploy did not succeed:\n%s", pageMain(run))
	}

	// A new version of APP_DOMAIN is a new publication: asked again.
	if resp, _ := s.PostForm(t, root, envPath+"/values", url.Values{"name": {"APP_DOMAIN"}, "value": {"wiki2.test"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set APP_DOMAIN v2 = %d", resp.StatusCode)
	}
	_, page = s.Get(t, admin, envPath+"/deploys/new")
	if !strings.Contains(page, `name="confirm_public_value"`) || strings.Contains(page, "<code>wiki2.test</code>") || strings.Contains(page, "is published since") {
		t.Errorf("the plan of APP_DOMAIN v2 should ask again and withhold the new hostname:\n%s", pageMain(page))
	}
	var published int
	if err := s.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_events WHERE action = 'deploy.started' AND detail ? 'published_values'`).Scan(&published); err != nil || published != 1 {
		t.Errorf("deploys recorded as publishing values = %d (err %v), want 1", published, err)
	}
}
