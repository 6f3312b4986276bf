package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestEnvironmentOnAnotherClusterIsSaidOnItsPageAndPlan: the environment
// ran its active revision on another cluster (the record says a Kubernetes
// cluster; this Studio drives the local platform): its page says so in
// one sentence, and its deploy plan too; on its own platform neither does.
func TestEnvironmentOnAnotherClusterIsSaidOnItsPageAndPlan(t *testing.T) {
	t.Parallel()
	s, c := deployableWiki(t, &webtest.Deploys{}, &webtest.Resolver{}, "127.0.0.2")
	const envPath = "/projects/team-wiki/environments/production"
	resp, _ := s.PostForm(t, c, envPath+"/deploys", url.Values{})
	waitForRun(t, s, c, resp.Header.Get("Location"))
	if _, page := s.Get(t, c, envPath); strings.Contains(page, `id="other-cluster"`) {
		t.Fatal("the page says another cluster right after a deploy on this one")
	}
	var envID int64
	if err := s.DB.Pool.QueryRow(context.Background(), `SELECT e.id FROM environments e JOIN projects p ON p.id = e.project_id
		WHERE p.name = 'team-wiki' AND e.name = 'production'`).Scan(&envID); err != nil {
		t.Fatal(err)
	}
	if err := s.DB.SetEnvironmentPlatform(context.Background(), envID, "kubernetes/0a1b2c3d-5e6f"); err != nil {
		t.Fatal(err)
	}
	want := "The active revision of production runs on the kubernetes cluster 0a1b2c3d, not on the local platform, where this Studio deploys: nothing of it runs here, so the next deploy deploys everything."
	for _, p := range []string{envPath, envPath + "/deploys/new"} {
		_, page := s.Get(t, c, p)
		if !strings.Contains(page, want) {
			t.Errorf("%s does not say %q", p, want)
		}
	}
	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	for _, w := range []int64{1280, 390} {
		b.Emulate(w, "light")
		b.Do(chromedp.Navigate(s.URL+envPath), chromedp.WaitVisible(chromedp.CSS("#other-cluster")))
		b.Screenshot("other-cluster-" + map[int64]string{1280: "1280", 390: "390"}[w])
	}
}
