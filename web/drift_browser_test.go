package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserSeesDriftLiveAndRestoresIt deploys the wiki on the local
// platform with the health monitor running and opens the environment
// page; web is scaled to 0 and its image set outside the Studio (the
// local platform's drift faults): the page lists both without a reload.
// "Restore what the Studio deployed" opens the redeploy's plan, ticked
// and listing the drift; deploying it and coming back to the environment
// page, the drift goes away live when the redeploy's rollout is done.
func TestBrowserSeesDriftLiveAndRestoresIt(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	faults := &local.Faults{}
	// Steps take a while, so the redeploy is still under way when the
	// environment page opens again.
	d := &webtest.Deploys{Faults: faults, StepDelay: 100 * time.Millisecond}
	s, admin := deployableWiki(t, d, dns, "127.0.0.2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = d.Service.WatchHealth(ctx) }()
	startDeploy(t, s, admin, url.Values{})

	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+wikiEnv), chromedp.WaitVisible(chromedp.CSS("#env-health")))
	waitTrue(t, b, `document.getElementById("env-health").dataset.healthLevel === "healthy"`)
	browsertest.Eval[any](b, `window.studioMarker = "not reloaded"`)

	zero := 0
	faults.Set(func(f *local.Faults) {
		f.Drift = map[string]*local.DriftFault{"web": {Replicas: &zero, Image: "nginx:1.27"}}
	})
	waitTrue(t, b, `(document.getElementById("env-drift") || {dataset: {}}).dataset.driftCount === "2"`)
	callout := browsertest.Eval[string](b, `document.getElementById("env-drift").textContent`)
	for _, want := range []string{"web scaled to 0 outside the Studio", "web set to image nginx:1.27 outside the Studio", "just now", "Restore what the Studio deployed"} {
		if !strings.Contains(callout, want) {
			t.Errorf("the drift callout says %q, want %q", strings.Join(strings.Fields(callout), " "), want)
		}
	}
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Fatal("the environment page reloaded itself; it should have followed the environment's stream")
	}
	for _, w := range []struct {
		width  int64
		scheme string
	}{{1280, "light"}, {390, "light"}, {1280, "dark"}} {
		b.Emulate(w.width, w.scheme)
		b.Screenshot("environment-drift-" + w.scheme + "-" + map[bool]string{true: "phone", false: "desktop"}[w.width < 600])
	}
	b.Emulate(1280, "light")

	// Restore: the redeploy's plan, ticked, listing what it undoes.
	b.Do(chromedp.Click(chromedp.CSS("[data-restore-drift]")), chromedp.WaitVisible(chromedp.CSS("#plan-drift")))
	if !browsertest.Eval[bool](b, `document.querySelector('input[name="redeploy"]').checked`) {
		t.Error("the plan Restore opened does not have Redeploy the active revision ticked")
	}
	if got := browsertest.Eval[string](b, `document.getElementById("plan-drift").textContent`); !strings.Contains(got, "web scaled to 0 outside the Studio") || !strings.Contains(got, "undone") {
		t.Errorf("the plan lists %q, want web's scale, undone", strings.Join(strings.Fields(got), " "))
	}
	b.Screenshot("deploy-plan-drift")
	b.Do(chromedp.Click(chromedp.CSS(`form[action$="/deploys"] button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("#run-status")))
	b.Do(chromedp.Navigate(s.URL+wikiEnv), chromedp.WaitVisible(chromedp.CSS("#env-health")))
	browsertest.Eval[any](b, `window.studioMarker = "not reloaded"`)
	if !browsertest.Eval[bool](b, `!!document.getElementById("env-drift")`) {
		t.Log("the redeploy had already undone the drift when the page opened: its going away was not seen live")
	}
	waitTrue(t, b, `!document.getElementById("env-drift") && !document.querySelector("[data-in-progress]")`)
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Error("the environment page reloaded itself while the redeploy ran")
	}
	waitTrue(t, b, `document.getElementById("env-health").dataset.healthLevel === "healthy"`)
}
