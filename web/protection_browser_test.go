package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserProtectionPagesFitAndPassAxe visits the protection page, a
// run waiting for approval (one of two given) and the approvals inbox at
// 1280 and 390 px, light and dark, each checked by axe-core
// (STUDIO_SCREENSHOTS=DIR keeps the screenshots).
func TestBrowserProtectionPagesFitAndPassAxe(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	admin := s.SignInLocal(t)
	env := s.CreateEnvironment(t, protectedManifest, "production")
	for _, p := range []string{"alice", "bob", "carol"} {
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
		{admin, envPath + "/protection", url.Values{"section": {"freeze"}, "freeze_cron": {weekendFreezeAwayFromNow(), ""}, "freeze_duration": {"60h", ""},
			"freeze_from": {"", time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")}, "freeze_to": {"", time.Now().UTC().Add(134 * time.Minute).Format("2006-01-02T15:04")},
			"freeze_action": {"refuse", "wait"}}},
		{alice, envPath + "/deploys", url.Values{}},
	} {
		if resp, body := s.PostForm(t, step.c, step.path, step.form); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("fixture %s = %d\n%s", step.path, resp.StatusCode, pageMain(body))
		}
	}
	runPath := envPath + "/runs/1"
	_, runPage := s.Get(t, bob, runPath)
	if resp, _ := s.PostForm(t, bob, runPath+"/approve", url.Values{"digest": {digestOf(t, runPage)}, "comment": {"Checked the plan with the team"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob approves: %d", resp.StatusCode)
	}
	b := browsertest.NewFor(t, 5*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	visitAll(t, b, s, []page{
		{name: "protection", path: envPath + "/protection"},
		{name: "run-waiting-for-approval", path: runPath},
		{name: "approvals", path: "/approvals"},
		{name: "environment-waiting", path: envPath},
	})

	// The navigation's count follows the inbox: the run leaves it when it
	// is rejected, and the open environment page's count goes without a
	// reload, pushed by the page's live stream. The page's 20 s poll of the
	// count is turned off here (its interval is never set), so only the
	// push can take the count away, however long that takes.
	b.Do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: `(() => {
			const setInterval = window.setInterval;
			window.__pollsOff = 0;
			window.setInterval = function (f, ms, ...args) {
				if (ms === 20000) { window.__pollsOff++; return 0; }
				return setInterval.call(this, f, ms, ...args);
			};
		})()`})
		return err
	}))
	b.Do(chromedp.Navigate(s.URL+envPath), chromedp.WaitVisible(chromedp.CSS("a[data-approvals-nav] [data-approvals-count]")),
		chromedp.WaitVisible(chromedp.CSS(`[data-stream-status="live"]`)))
	if n := browsertest.Eval[int](b, `window.__pollsOff`); n != 1 {
		t.Fatalf("%d polls of the approvals count turned off, want the page's one (every 20 s): has its interval changed?", n)
	}
	rejected := time.Now()
	if resp, _ := s.PostForm(t, bob, runPath+"/reject", url.Values{"comment": {"wrong week"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reject: %d", resp.StatusCode)
	}
	if _, err := chromedp.Run(b.Ctx, chromedp.Poll[bool](`!document.querySelector("a[data-approvals-nav] [data-approvals-count]")`,
		chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the navigation's count still reads %q a minute after the rejection (%v): the push did not take it away",
			b.Text("a[data-approvals-nav]"), err)
	}
	t.Logf("the navigation's count went %v after the rejection", time.Since(rejected).Round(time.Millisecond))
}

// weekendFreezeAwayFromNow is a weekly 60 h freeze window's cron that
// starts at 18:00 three days from today: the window (days +3 18:00 to +6
// 06:00, and a week before) never holds now, whatever the day the test
// runs (a fixed Friday-evening window refused the deploy on weekends).
func weekendFreezeAwayFromNow() string {
	return fmt.Sprintf("0 18 * * %d", int(time.Now().UTC().AddDate(0, 0, 3).Weekday()))
}
