package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserSeesAnApplicationsHealthChangeLive deploys the wiki on the
// local platform with the health monitor running, opens the environment
// page and makes web crash loop, then be scaled to zero, then recover:
// each time the header's word and web's card follow within a second of
// the platform's report, without a reload. A page of an environment never
// deployed says so instead of claiming health.
func TestBrowserSeesAnApplicationsHealthChangeLive(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	faults := &local.Faults{}
	d := &webtest.Deploys{Faults: faults}
	s, admin := deployableWiki(t, d, dns, "127.0.0.2")

	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+wikiEnv), chromedp.WaitVisible(chromedp.CSS("#env-health")))
	if got := browsertest.Eval[string](b, `document.getElementById("env-health").textContent`); got != "not deployed" {
		t.Errorf("before any deploy the header says %q, want not deployed", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = d.Service.WatchHealth(ctx) }()
	startDeploy(t, s, admin, url.Values{})

	b.Do(chromedp.Navigate(s.URL+wikiEnv), chromedp.WaitVisible(chromedp.CSS("#env-health")))
	waitTrue(t, b, `document.getElementById("env-health").dataset.healthLevel === "healthy"`)
	browsertest.Eval[any](b, `window.studioMarker = "not reloaded"`)
	if got := browsertest.Eval[string](b, `document.getElementById("app-health-web").textContent`); !strings.Contains(got, "running") || !strings.Contains(got, "ready") {
		t.Errorf("web's card says %q, want running and its replicas", got)
	}

	code := 3
	steps := []struct {
		fault *local.RuntimeFault
		level string
		state string
		words []string
	}{
		{&local.RuntimeFault{State: platform.StateCrashLooping, Reason: "exit code 3", ExitCode: &code, Restarts: 4}, "down", "crash looping", []string{"exit code 3", "0 of", "4 restarts in the last hour"}},
		{&local.RuntimeFault{State: platform.StateScaledToZero}, "down", "scaled to zero", []string{"scaled to 0 outside the Studio", "0 of 0 ready"}},
		{nil, "healthy", "running", []string{"ready", "0 restarts"}},
	}
	for _, st := range steps {
		at := time.Now()
		faults.Set(func(f *local.Faults) {
			if st.fault == nil {
				f.Runtime = nil
			} else {
				f.Runtime = map[string]*local.RuntimeFault{"web": st.fault}
			}
		})
		waitTrue(t, b, `document.getElementById("app-health-web").dataset.appState === "`+st.state+`" && document.getElementById("env-health").dataset.healthLevel === "`+st.level+`"`)
		// The goal (within a second) is a benchmark's, not this test's
		// (cmd/studio's BenchmarkRealContainerKilledToPainted on real pods).
		t.Logf("%s: painted %v after the platform reported it", st.state, time.Since(at).Round(time.Millisecond))
		card := browsertest.Eval[string](b, `document.getElementById("app-health-web").textContent`)
		for _, w := range st.words {
			if !strings.Contains(card, w) {
				t.Errorf("%s: web's card says %q, want it to say %q", st.state, strings.Join(strings.Fields(card), " "), w)
			}
		}
		if st.state == "crash looping" {
			for _, w := range []struct {
				width  int64
				scheme string
			}{{1280, "light"}, {390, "light"}, {1280, "dark"}, {390, "dark"}} {
				b.Emulate(w.width, w.scheme)
				b.Screenshot("environment-health-" + w.scheme + "-" + map[bool]string{true: "phone", false: "desktop"}[w.width < 600])
			}
			b.Emulate(1280, "light")
		}
	}
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Fatal("the environment page reloaded itself; it should have followed the environment's stream")
	}

	// The home and project pages say the same per environment.
	faults.Set(func(f *local.Faults) {
		f.Runtime = map[string]*local.RuntimeFault{"web": {State: platform.StateNotReady, Ready: 1, Reason: "GET /healthz answered 503"}}
	})
	waitTrue(t, b, `document.getElementById("env-health").dataset.healthLevel === "degraded"`)
	for _, page := range []string{"/", "/projects/team-wiki"} {
		b.Do(chromedp.Navigate(s.URL+page), chromedp.WaitVisible(chromedp.CSS("h1")))
		if got := browsertest.Eval[string](b, `(document.querySelector('[data-env="production"] [data-health-level]') || {}).textContent || ""`); got != "degraded" {
			t.Errorf("%s shows production's health as %q, want degraded", page, got)
		}
		if page == "/projects/team-wiki" {
			b.Screenshot("project-health")
		}
	}
}
