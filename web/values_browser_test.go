package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserCreatesProjectEnvironmentAndImportsValues walks the path of a
// new environment admin: paste the production-shaped example, create
// production, import a .env, and read the value states.
func TestBrowserCreatesProjectEnvironmentAndImportsValues(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithValueKeys())
	b := browsertest.New(t)
	manifest := exampleManifest(t, "production")
	b.Do(
		chromedp.Navigate(s.LocalLoginURL(t)),
		chromedp.WaitVisible(chromedp.CSS("h1")),
		chromedp.Navigate(s.URL+"/projects/new"),
		chromedp.WaitVisible(chromedp.CSS("#manifest")),
		browsertest.Paste("#manifest", manifest),
		chromedp.Click(chromedp.CSS("#main form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#environments")),
	)
	if got := b.Text("h1"); got != "team-wiki" {
		t.Fatalf("after creating, heading = %q, want team-wiki", got)
	}
	if got := b.Text("#revisions tbody"); !strings.Contains(got, "first revision") {
		t.Errorf("revisions = %q, want revision 1 as the first revision", got)
	}
	b.Do(
		chromedp.SetValue(chromedp.CSS("#env-name"), "production"),
		chromedp.Click(chromedp.CSS("#environments button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#applications")),
	)
	if got := b.Text(".values-callout"); !strings.Contains(got, "APP_DOMAIN") || !strings.Contains(got, "SESSION_SECRET") {
		t.Errorf("missing-values callout = %q, want APP_DOMAIN and SESSION_SECRET", got)
	}
	b.Do(
		chromedp.Navigate(s.URL+envPath+"/values"),
		chromedp.WaitVisible(chromedp.CSS("#dotenv")),
		chromedp.SetValue(chromedp.CSS("#dotenv"), "# production\nAPP_DOMAIN=wiki.example.com\nexport SESSION_SECRET=\"first line\nsecond line\"\nDEBUG_TOOLBAR=1\n"),
		chromedp.Click(chromedp.CSS("#import button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	)
	if got := b.Text(".flash"); !strings.Contains(got, "APP_DOMAIN (v1)") || !strings.Contains(got, "Skipped 1") || !strings.Contains(got, "DEBUG_TOOLBAR") {
		t.Errorf("flash = %q, want the imported names and the skipped DEBUG_TOOLBAR", got)
	}
	states := browsertest.Eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("#values tbody tr")].map(tr => [tr.dataset.name, tr.querySelector("[data-testid=state]").textContent.trim()]))`)
	want := map[string]string{"APP_DOMAIN": "required · set", "SESSION_SECRET": "required · set"}
	for n, st := range want {
		if states[n] != st {
			t.Errorf("%s state = %q, want %q (all: %v)", n, states[n], st, states)
		}
	}
	if inputType := browsertest.Eval[string](b, `document.querySelector("#value-value").type + ":" + document.querySelector("#value-value").value`); inputType != "password:" {
		t.Errorf("value field = %q, want an empty password field", inputType)
	}
	b.Screenshot("values")
	s.ActivateRevision(t, "team-wiki", "production", 1) // hostnames show once deployed
	b.Do(
		chromedp.Navigate(s.URL+envPath),
		chromedp.WaitVisible(chromedp.CSS("#applications")),
	)
	if got := b.Text(".route-domain"); !strings.Contains(got, "wiki.example.com") {
		t.Errorf("route domain = %q, want it resolved to wiki.example.com", got)
	}
	b.Screenshot("environment")
	b.Do(
		chromedp.Navigate(s.URL+"/projects/team-wiki"),
		chromedp.WaitVisible(chromedp.CSS("#environments")),
	)
	b.Screenshot("project")
}
