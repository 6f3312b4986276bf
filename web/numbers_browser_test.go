package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserSettingsAndNumberedRunPages opens the pages issue 42's last
// items changed (the Settings pages that hold the danger zones, and the
// pages that name runs and snapshots by their number in the environment)
// at 1280 and 390 px, light and dark: none overflows, hides a control or
// fails axe.
func TestBrowserSettingsAndNumberedRunPages(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	prod := s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	ctx := context.Background()
	for range 3 {
		s.CreateRun(t, prod, "reconcile")
	}
	if _, err := s.DB.Pool.Exec(ctx, `
		WITH r AS (INSERT INTO runs (environment_id, kind, status, started_at, finished_at)
		           VALUES ($1, 'backup', 'succeeded', now() - interval '1 min', now()) RETURNING id)
		INSERT INTO backups (environment_id, origin, run_id, name, target) SELECT $1, 'manual', id, '20261202-170000', '/srv/backups' FROM r`, prod.ID); err != nil {
		t.Fatal(err)
	}
	s.CreateRun(t, prod, "reconcile")
	env := wikiEnv
	pages := []page{
		{name: "n-environment", path: env},
		{name: "n-environment-settings", path: env + "/settings"},
		{name: "n-project", path: "/projects/team-wiki"},
		{name: "n-project-settings", path: "/projects/team-wiki/settings"},
		{name: "n-runs", path: env + "/runs"},
		{name: "n-run", path: env + "/runs/1"},
		{name: "n-backups", path: env + "/backups"},
		{name: "n-home", path: "/"},
	}
	b := browsertest.NewFor(t, 6*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	visitAll(t, b, s, pages)
}
