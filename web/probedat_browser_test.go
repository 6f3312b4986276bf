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

// TestBrowserProbedAtMovesWithEveryProbe: on the run page and the
// environment page of a deploy whose domain points elsewhere, "as probed
// at" changes in place when the automatic check probes the domain again,
// and after Check now; a countdown left at "checking…" (no check came)
// turns into the next time within seconds.
func TestBrowserProbedAtMovesWithEveryProbe(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{ReconcileInterval: 3 * time.Second}
	s, admin := deployableWiki(t, d, dns, "127.0.0.2")
	resp, _ := s.PostForm(t, admin, wikiEnv+"/deploys", url.Values{})
	runPath := resp.Header.Get("Location")
	waitForRun(t, s, admin, runPath)

	b := browsertest.NewFor(t, 3*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	for _, page := range []struct{ name, path, block string }{
		{"run page", runPath, `[data-checkpoint-kind="issue-tls"] [data-dns-pending="wiki.test"]`},
		{"environment page", wikiEnv, `#tls [data-dns-pending="wiki.test"]`},
	} {
		probedAt, countdown := page.block+" [data-probed-at]", page.block+" [data-next-check] time[data-countdown]"
		b.Do(chromedp.Navigate(s.URL+page.path), chromedp.WaitVisible(chromedp.CSS(probedAt)))
		before := b.Text(probedAt)
		// The countdown comes due; the automatic check probes again.
		waitText(t, b, "the "+page.name+"'s countdown to come due", countdown, func(s string) bool { return s == "checking…" })
		if err := d.Service.Reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		after := waitText(t, b, "the "+page.name+"'s probe time to move", probedAt, func(s string) bool { return s != before && strings.HasPrefix(s, "as probed at ") })
		t.Logf("%s: %q, then %q after the automatic check", page.name, before, after)

		// No check comes: "checking…" turns into the next time by itself.
		waitText(t, b, "the "+page.name+"'s countdown to come due again", countdown, func(s string) bool { return s == "checking…" })
		waitText(t, b, "the "+page.name+"'s countdown to show the next time", countdown, func(s string) bool { return strings.HasPrefix(s, "in ") })

		// Check now moves it too (the page comes back after the post).
		b.Submit(page.block+" .dns-next button[type=submit]", probedAt)
		waitText(t, b, "the "+page.name+"'s probe time after Check now", probedAt, func(s string) bool { return s != after && strings.HasPrefix(s, "as probed at ") })
		b.Screenshot("probed-at-" + strings.ReplaceAll(page.name, " ", "-"))
	}
}
