package web_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// TestAFailedFirstDeployShowsTheNextStep: production's first deploy fails
// on its certificate. Its environment page says so in one sentence with
// "Deploy again", shows the Certificates card with the retry's countdown
// and Check now, and the hostname as the next deploy will serve it; a
// viewer gets the expression only, as before.
func TestAFailedFirstDeployShowsTheNextStep(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	faults := &local.Faults{Issuance: map[string]string{"wiki.test": "the CA refused the order"}}
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{Resolver: dns, Faults: faults}))
	manifest := strings.Replace(exampleManifest(t, "production"), "    deployment:\n", "    deployment:\n      rollout:\n        timeout: 2s\n", 1)
	prod := s.CreateEnvironment(t, manifest, "production")
	s.AddMember(t, prod, "vera@example.test", store.RoleViewer)
	admin := s.SignInLocal(t)
	for n, v := range map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": "x"} {
		s.PostForm(t, admin, wikiEnv+"/values", url.Values{"name": {n}, "value": {v}})
	}
	dns.Set("wiki.test", "127.0.0.1")
	resp, body := s.PostForm(t, admin, wikiEnv+"/deploys", url.Values{})
	if resp.StatusCode != 303 {
		t.Fatalf("deploy = %d:\n%s", resp.StatusCode, pageMain(body))
	}
	if m := runStatus.FindStringSubmatch(waitForRun(t, s, admin, resp.Header.Get("Location"))); m[1] != "failed" {
		t.Fatalf("the first deploy ended %s, want failed", m[1])
	}
	_, page := s.Get(t, admin, wikiEnv)
	main := page[strings.Index(page, "<main"):]
	banner := regexp.MustCompile(`(?s)<div class="callout callout-danger callout-action" data-last-deploy-failed>.*?</div>`).FindString(main)
	for _, want := range []string{"Deploy #1 (revision 1) failed: Issue TLS certificate for wiki.test failed", "the CA refused the order.", `href="` + wikiEnv + `/deploys/new"`, "Deploy again"} {
		if !strings.Contains(banner, want) {
			t.Errorf("the failure banner lacks %q:\n%s", want, banner)
		}
	}
	certs := regexp.MustCompile(`(?s)<div class="card" id="tls">.*?</ul>`).FindString(main)
	for _, want := range []string{"<code>wiki.test</code>", "cert failed", "next retry at", "data-countdown", "Check now"} {
		if !strings.Contains(certs, want) {
			t.Errorf("the Certificates card lacks %q:\n%s", want, certs)
		}
	}
	apps := regexp.MustCompile(`(?s)<div class="card" id="applications">.*?</table>`).FindString(main)
	if !strings.Contains(apps, "<code>wiki.test</code>") || !strings.Contains(apps, "after the next deploy") {
		t.Errorf("the route shows no hostname as the next deploy will serve it:\n%s", apps)
	}
	viewer := s.SignInAs(t, "vera@example.test", "Vera Viewer")
	_, page = s.Get(t, viewer, wikiEnv)
	if strings.Contains(page, "Deploy again") || strings.Contains(page, "after the next deploy") || !strings.Contains(page, "values set · shown after deploy") {
		t.Errorf("the viewer's page should name the hostname by its expression and offer no deploy:\n%s", envStatusOf(page))
	}
}
