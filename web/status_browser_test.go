package web_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserEnvironmentPageIsLiveAsAWhole opens the environment page of
// production running revision 1 with revision 2 available, then a deploy
// of revision 2 starts elsewhere: without a reload, the header says
// deploying with a notice linking the run, then running revision 2, the
// notice goes, and the "available" hint goes with it.
func TestBrowserEnvironmentPageIsLiveAsAWhole(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{StepDelay: 300 * time.Millisecond}
	s, admin := deployableWiki(t, d, dns, "127.0.0.1")
	startDeploy(t, s, admin, url.Values{})
	manifest := strings.Replace(exampleManifest(t, "production"), "max: 5", "max: 8", 1)
	if resp, body := s.PostForm(t, admin, "/projects/team-wiki/revisions", url.Values{"manifest": {manifest}}); resp.StatusCode != 303 {
		t.Fatalf("new revision = %d: %.300s", resp.StatusCode, body)
	}

	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+wikiEnv), chromedp.WaitVisible(chromedp.CSS(`#env-status[data-env-status="running"]`)))
	if got := b.Text("#env-live-head"); !strings.Contains(got, "running revision 1") || !strings.Contains(got, "Revision 2 is available") {
		t.Fatalf("header before the deploy = %q, want running revision 1 and revision 2 available", got)
	}
	browsertest.Eval[any](b, `window.studioMarker = "not reloaded"`)

	// The deploy's web rollout waits until the page was seen deploying.
	d.Faults.Set(func(f *local.Faults) { f.Hold = map[string]bool{"web": true} })
	release := func() { d.Faults.Set(func(f *local.Faults) { f.Hold = nil }) }
	t.Cleanup(release)
	resp, body := s.PostForm(t, admin, wikiEnv+"/deploys", url.Values{"revision": {"2"}})
	if resp.StatusCode != 303 {
		t.Fatalf("deploy of revision 2 = %d: %.300s", resp.StatusCode, body)
	}
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#env-status[data-env-status="deploying"]`)))
	if got := b.Text("#env-live-notices"); !strings.Contains(got, "is in progress") {
		t.Errorf("notices while deploying = %q, want the deploy in progress", got)
	}
	if href := browsertest.Eval[string](b, `document.querySelector("[data-in-progress] a").getAttribute("href")`); href != resp.Header.Get("Location") {
		t.Errorf("the in-progress notice links %q, want the run %q", href, resp.Header.Get("Location"))
	}
	b.Screenshot("environment-live-deploying")
	release()
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#env-status[data-env-status="running"]`)))
	if got := b.Text("#env-live-head"); !strings.Contains(got, "running revision 2") || strings.Contains(got, "is available") {
		t.Errorf("header after the deploy = %q, want running revision 2 and no newer revision", got)
	}
	if n := browsertest.Eval[int](b, `document.querySelectorAll("[data-in-progress]").length`); n != 0 {
		t.Error("the in-progress notice stayed after the deploy ended")
	}
	if n := browsertest.Eval[int](b, `document.querySelectorAll("#env-releases [data-release]").length`); n != 2 {
		t.Errorf("%d releases listed after the second deploy, want 2", n)
	}
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Error("the environment page reloaded itself; it should have followed the environment's stream")
	}
	b.Screenshot("environment-live-running")
}
