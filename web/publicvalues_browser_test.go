package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserPlanOfAHostnameBuiltFromAValueUsedElsewhere opens, as a
// person would, the plan of a revision whose alias is built from
// SESSION_SECRET: production's deployer reads why the deploy is refused and
// has no button to press; production's admin types the environment's name
// in the field the plan asks for and lands on the run. Both pages fit a
// phone and pass axe, and neither holds the value anywhere in its HTML.
func TestBrowserPlanOfAHostnameBuiltFromAValueUsedElsewhere(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{Resolver: dns}))
	manifest := strings.Replace(exampleManifest(t, "production"), `domain: "${APP_DOMAIN}"`,
		`domain: "${APP_DOMAIN}"`+"\n        aliases: [\"${SESSION_SECRET}.x.example\"]", 1)
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
	dns.Set(publicSecret+".x.example", "127.0.0.1")

	b := browsertest.New(t)
	holdsSecret := func() bool {
		return browsertest.Eval[bool](b, `document.documentElement.outerHTML.includes(`+strconv.Quote(publicSecret)+`)`)
	}
	signIn := func(email, name string) {
		s.OIDC.SetDefaultIdentity(webtest.Identity(email, name))
		b.Do(chromedp.Navigate(s.URL+"/login"), chromedp.WaitVisible(chromedp.CSS("[data-testid=oidc-sign-in]")),
			chromedp.Click(chromedp.CSS("[data-testid=oidc-sign-in]")), chromedp.WaitVisible(chromedp.CSS("[data-testid=user-name]")))
	}
	check := func(who string) {
		t.Helper()
		for _, width := range []int64{1280, 390} {
			b.Emulate(width, "light")
			b.Do(chromedp.Navigate(s.URL+envPath+"/deploys/new"), chromedp.WaitVisible(chromedp.CSS("#public-values")))
			if extra, culprits := b.Overflow(); extra > 0 {
				t.Errorf("%s's plan at %d px is %d px wider than the screen: %s", who, width, extra, culprits)
			}
			for _, v := range b.Axe(browsertest.WCAG21AA) {
				t.Errorf("%s's plan at %d px: %s", who, width, v)
			}
			if holdsSecret() {
				t.Errorf("%s's plan holds the value of SESSION_SECRET", who)
			}
			b.Screenshot("deploy-plan-public-value-" + who + "-" + strconv.FormatInt(width, 10))
		}
		b.Emulate(1280, "light")
	}

	signIn("dan@example.test", "Dan Deployer")
	check("deployer")
	if got := b.Text("#public-values"); !strings.Contains(got, "This deploy is refused for deployers") || !strings.Contains(got, "SESSION_SECRET") {
		t.Errorf("the deployer's plan says %q, want the refusal and the value's name", got)
	}
	if !browsertest.Eval[bool](b, `document.querySelector("#deploy-form button[type=submit]").disabled`) {
		t.Error("the deployer's Deploy button is enabled")
	}
	b.Do(chromedp.Click(chromedp.CSS("form[action='/logout'] button")), chromedp.WaitVisible(chromedp.CSS("[data-testid=oidc-sign-in]")))

	signIn("ada@example.test", "Ada Admin")
	check("admin")
	b.Do(chromedp.SendKeys(chromedp.CSS("#confirm-public-value"), "production"),
		chromedp.Click(chromedp.CSS("#deploy-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(`#run-status[data-run-status="succeeded"]`)))
	assertAudit(t, s, "deploy.started", "run 1", `"published_values": ["SESSION_SECRET"]`)
}
