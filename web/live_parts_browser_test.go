package web_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/browsertest"
)

// TestBrowserRoleDependentPartsComeFromTheLiveEndpoint keeps an admin's
// backups page open while a deployer, in a session of their own, takes a
// snapshot. The admin's page shows the new snapshot with what only an
// admin may do to it (Restore, Remove) without a reload: the stream says a
// backup run changed, and the page's script reads the page's …/live parts,
// never the whole page. The deployer reading the same parts gets the
// snapshot without those actions.
func TestBrowserRoleDependentPartsComeFromTheLiveEndpoint(t *testing.T) {
	s, env, _, _ := backupsReady(t)
	const page = "/projects/vault/environments/production/backups"
	s.AddMember(t, env, "dana@example.test", store.RoleDeployer)
	dana := s.SignInAs(t, "dana@example.test", "Dana Scully")

	b := browsertest.NewFor(t, 3*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+page), chromedp.WaitVisible(chromedp.CSS("#snapshots")),
		chromedp.WaitReady(chromedp.CSS(`[data-stream][data-stream-status="live"]`)))
	if got := b.Text("#snapshots"); !strings.Contains(got, "No snapshots yet") {
		t.Fatalf("snapshots of a new environment = %q", got)
	}
	browsertest.Eval[any](b, `window.studioMarker = "not reloaded"`)

	// The deployer takes a snapshot in their own session.
	if resp, _ := s.PostForm(t, dana, page, url.Values{}); resp.StatusCode != 303 {
		t.Fatalf("the deployer takes a snapshot: %d", resp.StatusCode)
	}
	const restore = `#snapshots tr[data-origin="manual"] a[href$="/restore"]`
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#snapshots tr[data-origin="manual"] [data-run-status="succeeded"]`)),
		chromedp.WaitVisible(chromedp.CSS(restore)))
	if got := b.Text(`#snapshots tr[data-origin="manual"] .row-actions`); !strings.Contains(got, "Restore") || !strings.Contains(got, "Remove") {
		t.Errorf("the admin's row of the deployer's snapshot offers %q, want Restore and Remove", got)
	}
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Error("the backups page reloaded itself; it should have read its live parts")
	}
	// What the page read: its …/live parts, and never the page itself.
	read := browsertest.Eval[[]string](b, `performance.getEntriesByType("resource").map(function (e) { return new URL(e.name).pathname; })`)
	var live, whole int
	for _, p := range read {
		switch p {
		case paths.BackupsLive("vault", "production"):
			live++
		case page:
			whole++
		}
	}
	if live == 0 || whole != 0 {
		t.Errorf("the page read its live parts %d times and itself %d times, want at least once and never: %v", live, whole, read)
	}
	b.Screenshot("backups-live-parts-admin")

	// The same parts, read by the deployer: the snapshot, not the actions.
	status, parts := s.Get(t, dana, paths.BackupsLive("vault", "production"))
	if status != 200 || !strings.Contains(parts, `data-origin="manual"`) {
		t.Fatalf("the deployer's live parts: %d\n%s", status, parts)
	}
	if strings.Contains(parts, `/restore"`) || strings.Contains(parts, `/remove"`) {
		t.Errorf("the deployer's live parts offer a restore or a removal:\n%s", parts)
	}
	if !strings.Contains(parts, `data-testid="take-snapshot"`) {
		t.Errorf("the deployer's live parts do not offer a snapshot:\n%s", parts)
	}
}
