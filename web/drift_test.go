package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// TestDriftOnTheEnvironmentPageAndItsRestore, over real HTTP on the local
// platform: web scaled to 0 and its image and environment changed outside
// the Studio appear on the environment page with what the Studio applied
// and when each was seen; a viewer sees them without the offer to
// restore; "Restore what the Studio deployed" opens the redeploy's plan
// ticked and listing the drift it undoes; the redeploy clears the drift.
// Nothing clears it before that.
func TestDriftOnTheEnvironmentPageAndItsRestore(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	faults := &local.Faults{}
	d := &webtest.Deploys{Faults: faults}
	s, admin := deployableWiki(t, d, dns, "127.0.0.2")
	env, err := s.DB.EnvironmentByName(context.Background(), "team-wiki", "production")
	if err != nil {
		t.Fatal(err)
	}
	s.AddMember(t, env, "viewer@example.test", store.RoleViewer)
	viewer := s.SignInAs(t, "viewer@example.test", "Viewer")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = d.Service.WatchHealth(ctx) }()
	startDeploy(t, s, admin, url.Values{})
	if _, page := s.Get(t, admin, wikiEnv); strings.Contains(page, `id="env-drift"`) {
		t.Fatalf("right after the deploy the page shows drift:\n%s", pageMain(page))
	}

	zero := 0
	faults.Set(func(f *local.Faults) {
		f.Drift = map[string]*local.DriftFault{"web": {Replicas: &zero, Image: "nginx:1.27", Env: map[string]string{"SESSION_SECRET": "typed-by-hand", "DEBUG": "1"}}}
	})
	page := waitForPage(t, s, admin, wikiEnv, `data-drift-count="4"`)
	for _, want := range []string{
		"web scaled to 0 outside the Studio", "the Studio applied <code>2 to 5</code>, now <code>0</code>",
		"web set to image nginx:1.27 outside the Studio",
		"SESSION_SECRET of web changed outside the Studio", "DEBUG added to web outside the Studio",
		"Restore what the Studio deployed",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the environment page does not say %q:\n%s", want, pageMain(page))
		}
	}
	if strings.Contains(page, "typed-by-hand") {
		t.Error("the environment page shows the value an environment variable was set to by hand")
	}
	if _, vp := s.Get(t, viewer, wikiEnv); !strings.Contains(vp, "web scaled to 0 outside the Studio") || strings.Contains(vp, "data-restore-drift") {
		t.Errorf("a viewer should see the drift without the offer to restore it:\n%s", pageMain(vp))
	}

	// Nothing undoes it on its own: the health is read again and again.
	for range 3 {
		if err := d.Service.SyncHealth(ctx, d.Service.Platform.(*local.Platform), "team-wiki", "production"); err != nil {
			t.Fatal(err)
		}
	}
	if drift, _ := s.DB.DriftOf(ctx, env.ID); len(drift) != 4 {
		t.Fatalf("after the health was read again, %d drift items stored, want the 4 still", len(drift))
	}

	m := restoreLink.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no Restore link on the environment page:\n%s", pageMain(page))
	}
	restore := strings.ReplaceAll(m[1], "&amp;", "&")
	status, plan := s.Get(t, admin, restore)
	if status != http.StatusOK || !strings.Contains(plan, `id="plan-drift"`) || !strings.Contains(plan, "web scaled to 0 outside the Studio") ||
		!strings.Contains(plan, `name="redeploy" value="1" checked`) {
		t.Fatalf("%s: %d, want the redeploy's plan ticked and listing the drift it undoes:\n%s", restore, status, pageMain(plan))
	}
	u, _ := url.Parse(restore)
	startDeploy(t, s, admin, url.Values{"revision": {u.Query().Get("revision")}, "redeploy": {"1"}})
	waitForPageWithout(t, s, admin, wikiEnv, `id="env-drift"`)
	if drift, _ := s.DB.DriftOf(ctx, env.ID); len(drift) != 0 {
		t.Errorf("after the redeploy %d drift items stored, want none", len(drift))
	}
}

// waitForPageWithout reloads path until its page no longer contains
// gone, as a person watching it would; on timeout it shows what it saw.
func waitForPageWithout(t *testing.T, s *webtest.Server, c *http.Client, path, gone string) string {
	t.Helper()
	var page string
	for range 600 {
		if _, page = s.Get(t, c, path); !strings.Contains(page, gone) {
			return page
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s still shows %q:\n%s", path, gone, pageMain(page))
	return ""
}

var restoreLink = regexp.MustCompile(`href="([^"]+)" data-restore-drift`)
