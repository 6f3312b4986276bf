package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserEnvironmentHeaderButtonsStayOnOneRow: at 1280 px the
// environment page's buttons (Deploy, Runs, Values, Members, Webhooks) sit
// on one row.
func TestBrowserEnvironmentHeaderButtonsStayOnOneRow(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	b := browsertest.New(t)
	b.Emulate(1280, "light")
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+wikiEnv), chromedp.WaitVisible(chromedp.CSS(".page-header .actions")))
	tops := browsertest.Eval[[]float64](b, `[...document.querySelectorAll(".page-header .actions .button")].map(a => Math.round(a.getBoundingClientRect().top))`)
	if len(tops) < 5 {
		t.Fatalf("the header shows %d buttons, want 5", len(tops))
	}
	for _, top := range tops {
		if top != tops[0] {
			t.Errorf("the header's buttons wrap at 1280 px: their tops are %v", tops)
			break
		}
	}
	b.Screenshot("env-header-1280")
}
