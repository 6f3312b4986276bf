package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserValuesPageOfManyValuesIsPaged: an environment with 120
// values, each with an earlier version, shows 50 a page with a way to the
// next, each value's earlier versions as a link to its history (too many
// for one page's restore buttons), and that history offers the restore.
func TestBrowserValuesPageOfManyValuesIsPaged(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithValueKeys())
	s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	admin := s.SignInLocal(t)
	for round := range 2 {
		for i := range 120 {
			form := url.Values{"name": {fmt.Sprintf("EXTRA_%03d", i)}, "value": {fmt.Sprintf("round-%d-secret", round)}, "confirm_orphan": {"1"}}
			if resp, _ := s.PostForm(t, admin, wikiEnv+"/values", form); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("set EXTRA_%03d: %d", i, resp.StatusCode)
			}
		}
	}
	_, page := s.Get(t, admin, wikiEnv+"/values")
	if n := len(regexp.MustCompile(`<tr [^>]*data-name=`).FindAllString(page, -1)); n != 50 {
		t.Errorf("the first page shows %d values, want 50", n)
	}
	if !strings.Contains(page, `rel="next"`) || strings.Contains(page, "restore v1") || strings.Contains(page, "round-0-secret") {
		t.Errorf("the first page has no next link, or lists restore buttons of every value, or shows a value")
	}
	for _, width := range []int64{1280, 390} {
		b := browsertest.New(t)
		b.Emulate(width, "light")
		b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
		b.Do(chromedp.Navigate(s.URL+wikiEnv+"/values"), chromedp.WaitVisible(chromedp.CSS(`a[rel=next]`)))
		b.Screenshot(fmt.Sprintf("values-paged-%d", width))
		b.Do(chromedp.Click(chromedp.CSS(`tr[data-name=EXTRA_001] a.value-history-link`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-name=EXTRA_001] [data-earlier-version="1"] button`)))
		if n := len(b.Text("#values tbody")); n == 0 {
			t.Errorf("at %d px the history page shows no value", width)
		}
		if got := b.Text(`tr[data-name=EXTRA_001] [data-earlier-version="1"] button`); !strings.Contains(got, "restore v1") {
			t.Errorf("at %d px the history of EXTRA_001 offers %q, want restore v1", width, got)
		}
		b.Screenshot(fmt.Sprintf("values-history-%d", width))
		if extra, culprits := b.Overflow(); extra > 0 {
			t.Errorf("at %d px the page is %d px too wide: %s", width, extra, culprits)
		}
	}
}

// TestBrowserTokensPageFindsEnvironmentsWithASearch: with more
// environments than the form lists, the tokens page lists 25, says how
// many more there are and finds the others with a search.
func TestBrowserTokensPageFindsEnvironmentsWithASearch(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	for i := range 40 {
		s.CreateEnvironment(t, "", fmt.Sprintf("env-%02d", i))
	}
	for _, width := range []int64{1280, 390} {
		b := browsertest.New(t)
		b.Emulate(width, "light")
		b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
		b.Do(chromedp.Navigate(s.URL+"/tokens"), chromedp.WaitVisible(chromedp.CSS("#token-env-search")))
		if got := b.Text(".token-more"); !strings.Contains(got, "15 more environments") {
			t.Errorf("at %d px the form says %q, want 15 more environments", width, got)
		}
		b.Screenshot(fmt.Sprintf("tokens-many-%d", width))
		// The first page lists scopes too: wait for the search's page.
		b.Do(chromedp.SetValue(chromedp.CSS("#token-env-search"), "env-37"))
		b.Submit(`button[form=token-env-search-form]`, `select[name=scope]`)
		if got := b.Text(".token-scopes"); !strings.Contains(got, "env-37") || strings.Contains(got, "env-36") {
			t.Errorf("at %d px the search for env-37 lists %q", width, got)
		}
		b.Screenshot(fmt.Sprintf("tokens-search-%d", width))
		if extra, culprits := b.Overflow(); extra > 0 {
			t.Errorf("at %d px the page is %d px too wide: %s", width, extra, culprits)
		}
	}
}

// TestBrowserBackupsPagerShowsOlderSnapshots: with 30 snapshot rows the
// backups page lists 25; its Older link, followed in the browser, shows
// the 5 oldest and a way back to the newest, at both widths.
func TestBrowserBackupsPagerShowsOlderSnapshots(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	env := s.CreateEnvironment(t, backupWebManifest, "production")
	if _, err := s.DB.Pool.Exec(t.Context(), `INSERT INTO backups (environment_id, origin, scheduled_at, skipped)
		SELECT $1, 'scheduled', timestamptz '2026-01-01' + make_interval(mins => i), 'skip ' || lpad(i::text, 2, '0')
		FROM generate_series(1, 30) AS i`, env.ID); err != nil {
		t.Fatal(err)
	}
	for _, width := range []int64{1280, 390} {
		b := browsertest.New(t)
		b.Emulate(width, "light")
		b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
		b.Do(chromedp.Navigate(s.URL+"/projects/vault/environments/production/backups"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=older]`)))
		b.Screenshot(fmt.Sprintf("backups-paged-%d", width))
		b.Do(chromedp.Click(chromedp.CSS(`[data-testid=older]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=newest]`)))
		got := b.Text("#snapshots tbody")
		if !strings.Contains(got, "skip 05") || !strings.Contains(got, "skip 01") || strings.Contains(got, "skip 06") {
			t.Errorf("at %d px the older page lists %q, want skips 05 to 01", width, got)
		}
		b.Screenshot(fmt.Sprintf("backups-older-%d", width))
		if extra, culprits := b.Overflow(); extra > 0 {
			t.Errorf("at %d px the page is %d px too wide: %s", width, extra, culprits)
		}
	}
}

// TestBrowserAuditOlderAndNewerPagesKeepTheFilter: the audit log's Older
// link, followed in the browser, shows the next records of the filtered
// list and Newer goes back, at both widths.
func TestBrowserAuditOlderAndNewerPagesKeepTheFilter(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	for i := range 60 {
		if err := s.DB.Audit(t.Context(), store.AuditEvent{Actor: "script", Action: "test.event", Target: fmt.Sprintf("t%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, width := range []int64{1280, 390} {
		b := browsertest.New(t)
		b.Emulate(width, "light")
		b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
		b.Do(chromedp.Navigate(s.URL+"/audit?action=test.event"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=older]`)))
		b.Do(chromedp.Click(chromedp.CSS(`[data-testid=older]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=newer]`)))
		got := b.Text("main table tbody")
		if !strings.Contains(got, "t09") || strings.Contains(got, "t10") || strings.Contains(got, "sign-in") {
			t.Errorf("at %d px the older page lists %q, want the filtered t09 to t00", width, got)
		}
		b.Screenshot(fmt.Sprintf("audit-older-%d", width))
		// The older page has an Older link too (t09 to t00 are not the
		// last of all): wait for the newer page itself.
		b.Submit(`[data-testid=newer]`, `[data-testid=older]`)
		if got := b.Text("main table tbody"); !strings.Contains(got, "t59") || !strings.Contains(got, "t10") || strings.Contains(got, "t09") {
			t.Errorf("at %d px Newer lists %q, want t59 to t10", width, got)
		}
		if extra, culprits := b.Overflow(); extra > 0 {
			t.Errorf("at %d px the page is %d px too wide: %s", width, extra, culprits)
		}
	}
}
