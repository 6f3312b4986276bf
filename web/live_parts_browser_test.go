package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserRoleDependentPartsComeFromTheLiveEndpoint keeps an admin's
// backups page open while a deployer, in a session of their own, takes a
// snapshot. The admin's page shows the new snapshot with what only an
// admin may do to it (Restore, Remove) without a reload: the stream says a
// backup run changed, and the page's script reads the page's …/live parts,
// never the whole page. The deployer reading the same parts gets the
// snapshot without those actions.
func TestBrowserRoleDependentPartsComeFromTheLiveEndpoint(t *testing.T) {
	t.Parallel()
	s, env, _, _, _ := backupsReady(t)
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
	// A later event of the run (its retention) may replace the row again
	// between two reads: the text is read until it holds both.
	if got := b.TextWithin(`#snapshots tr[data-origin="manual"] .row-actions`, time.Minute, func(s string) bool {
		return strings.Contains(s, "Restore") && strings.Contains(s, "Remove")
	}); !strings.Contains(got, "Restore") || !strings.Contains(got, "Remove") {
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

// TestBrowserApprovalCardFollowsAnotherPersonsApproval keeps the run page
// of a deploy waiting for two approvals open in the admin's browser while
// an approver, in a session of their own, approves: the page's approval
// card counts the approval and names the approver without a reload, read
// from the run's …/live parts when the run's stream says it still waits.
func TestBrowserApprovalCardFollowsAnotherPersonsApproval(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	admin := s.SignInLocal(t)
	env := s.CreateEnvironment(t, protectedManifest, "production")
	for _, p := range []string{"alice", "bob"} {
		s.AddMember(t, env, p+"@example.test", store.RoleDeployer)
	}
	alice := s.SignInAs(t, "alice@example.test", "Alice Martin")
	bob := s.SignInAs(t, "bob@example.test", "Bob Okafor")
	const envPath = "/projects/shop/environments/production"
	for _, step := range []struct {
		c    *http.Client
		path string
		form url.Values
	}{
		{admin, envPath + "/values", url.Values{"name": {"API_KEY"}, "value": {"screens-secret"}}},
		{admin, envPath + "/protection", url.Values{"approvals": {"2"}, "role": {"deployer"}, "expires": {"7d"}, "wait": {"0s"}, "bypass": {"admins"}}},
		{alice, envPath + "/deploys", url.Values{}},
	} {
		if resp, body := s.PostForm(t, step.c, step.path, step.form); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("fixture %s = %d\n%s", step.path, resp.StatusCode, pageMain(body))
		}
	}
	runPath := envPath + "/runs/1"

	b := browsertest.NewFor(t, 3*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+runPath), chromedp.WaitVisible(chromedp.CSS(`#approval[data-approvals="0"]`)),
		chromedp.WaitReady(chromedp.CSS(`[data-stream][data-stream-status="live"]`)))
	browsertest.Eval[any](b, `window.studioMarker = "not reloaded"`)

	_, runPage := s.Get(t, bob, runPath)
	if resp, _ := s.PostForm(t, bob, runPath+"/approve", url.Values{"digest": {digestOf(t, runPage)}, "comment": {"Read the plan"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob approves: %d", resp.StatusCode)
	}
	got := b.TextWithin(`#approval[data-approvals="1"]`, time.Minute, func(s string) bool { return strings.Contains(s, "Bob Okafor") })
	if !strings.Contains(got, "1 of 2 approvals") || !strings.Contains(got, "Read the plan") {
		t.Errorf("the admin's approval card after Bob's approval says %q, want 1 of 2 with Bob's comment", got)
	}
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Error("the run page reloaded itself; it should have read its live parts")
	}
	b.Screenshot("run-approval-live")
}
