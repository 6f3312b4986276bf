package web_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserNextCheckRestartsWhenTheDomainIsStillPending: on the real run
// and environment pages of a deploy whose domain points elsewhere, the
// countdown to the next automatic check reaches "checking…"; the reconciler
// then checks the domain again, still elsewhere, and the countdown counts
// down again from the next check instead of saying "checking…" forever.
func TestBrowserNextCheckRestartsWhenTheDomainIsStillPending(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{ReconcileInterval: 15 * time.Second}
	s, admin := deployableWiki(t, d, dns, "127.0.0.2")
	resp, _ := s.PostForm(t, admin, wikiEnv+"/deploys", url.Values{})
	runPath := resp.Header.Get("Location")
	waitForRun(t, s, admin, runPath)

	b := browsertest.NewFor(t, 3*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	for _, page := range []struct{ name, path, countdown string }{
		{"run page", runPath, `[data-checkpoint-kind="issue-tls"] [data-dns-pending="wiki.test"] [data-next-check] time[data-countdown]`},
		{"environment page", wikiEnv, `#tls [data-dns-pending="wiki.test"] [data-next-check] time[data-countdown]`},
	} {
		b.Do(chromedp.Navigate(s.URL+page.path), chromedp.WaitVisible(chromedp.CSS(page.countdown)))
		waitText(t, b, "the "+page.name+"'s countdown to come due", page.countdown, func(s string) bool { return s == "checking…" })
		// The periodic reconcile checks wiki.test again (as the database
		// shows), and right after the page hears of it, its countdown counts
		// from that check: not merely "in …", which the page also reads
		// when it reads its parts again on its own while "checking…" lasts.
		reconcileRestartsCountdown(t, s, d, b, page.countdown)
		b.Screenshot("next-check-restarted-" + strings.ReplaceAll(page.name, " ", "-"))
		if n := browsertest.Eval[int](b, `document.querySelectorAll('[data-dns-pending="wiki.test"] [data-next-check]').length`); n != 1 {
			t.Errorf("the %s shows %d next-check countdowns for wiki.test after the check, want 1", page.name, n)
		}
	}
}
