package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/web/webtest"
)

// TestACancelledRedeployLeavesARunningEnvironmentAsItWas: production runs
// revision 1; a redeploy is started and cancelled. The home page, the
// project page and the environment page still say "running revision 1" in
// green, with a neutral note linking to the cancelled run, and no red pill
// or banner anywhere.
func TestACancelledRedeployLeavesARunningEnvironmentAsItWas(t *testing.T) {
	t.Parallel()
	const envPath = "/projects/team-wiki/environments/production"
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{StepDelay: 200 * time.Millisecond}
	s, admin := deployableWiki(t, d, dns, "127.0.0.1")
	dns.Set("www.wiki.test", "127.0.0.1")
	resp, body := s.PostForm(t, admin, envPath+"/deploys", url.Values{"revision": {"1"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first deploy = %d:\n%s", resp.StatusCode, pageMain(body))
	}
	if m := runStatus.FindStringSubmatch(waitForRun(t, s, admin, resp.Header.Get("Location"))); m[1] != "succeeded" && m[1] != "succeeded-with-warnings" {
		t.Fatalf("first deploy ended %s", m[1])
	}
	// The redeploy's web rollout waits until the cancel was asked for, so
	// the redeploy cannot end before it (its activation comes after).
	d.Faults.Set(func(f *local.Faults) { f.Hold = map[string]bool{"web": true} })
	release := func() { d.Faults.Set(func(f *local.Faults) { f.Hold = nil }) }
	t.Cleanup(release)
	resp, body = s.PostForm(t, admin, envPath+"/deploys", url.Values{"revision": {"1"}, "redeploy": {"1"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("redeploy = %d:\n%s", resp.StatusCode, pageMain(body))
	}
	runPath := resp.Header.Get("Location")
	if resp, _ := s.PostForm(t, admin, runPath+"/cancel", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel = %d", resp.StatusCode)
	}
	release()
	if m := runStatus.FindStringSubmatch(waitForRun(t, s, admin, runPath)); m[1] != "cancelled" {
		t.Fatalf("the redeploy ended %s, want cancelled", m[1])
	}
	status := regexp.MustCompile(`data-env-status="([a-z-]+)"`)
	for _, p := range []string{"/", "/projects/team-wiki", envPath} {
		_, page := s.Get(t, admin, p)
		main := page[strings.Index(page, "<main"):]
		if m := status.FindStringSubmatch(main); m == nil || m[1] != "running" {
			t.Errorf("%s: the environment's status is %v, want running", p, m)
		}
		for _, want := range []string{"running revision 1", "Deploy #2 (revision 1) was cancelled. Still running revision 1.", `href="` + runPath + `"`} {
			if !strings.Contains(main, want) {
				t.Errorf("%s lacks %q:\n%s", p, want, envStatusOf(main))
			}
		}
		for _, red := range []string{"deploy cancelled", "data-last-deploy-failed", "badge-danger", "callout-danger"} {
			if strings.Contains(main, red) {
				t.Errorf("%s shows %q for a cancelled redeploy:\n%s", p, red, envStatusOf(main))
			}
		}
	}
}

// envStatusOf is the part of a page around its environment status.
func envStatusOf(page string) string {
	i := max(strings.Index(page, "data-env-status"), 0)
	return page[max(0, i-200):min(len(page), i+1200)]
}
