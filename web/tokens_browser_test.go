package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserCreatesATokenAndSeesItOnce: the Tokens page in the main
// navigation, a token created by choosing a role per environment, its
// secret shown once, at desktop and phone widths without sideways scroll.
func TestBrowserCreatesATokenAndSeesItOnce(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	s.CreateEnvironment(t, "", "production")
	s.CreateEnvironment(t, "", "staging")
	for _, width := range []int64{1280, 390} {
		b := browsertest.New(t)
		b.Emulate(width, "light")
		b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
		b.Do(
			chromedp.Click(chromedp.CSS(`.nav a[href="/tokens"]`)),
			chromedp.WaitVisible(chromedp.CSS("#token-name")),
			chromedp.SetValue(chromedp.CSS("#token-name"), "ci-staging"),
			chromedp.SetValue(chromedp.CSS("#scope-1"), "hello-world/staging:deployer"),
			chromedp.Click(chromedp.CSS(`form[action="/tokens"] button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS("[data-token-secret]")),
		)
		secret := b.Text("[data-token-secret]")
		if !strings.HasPrefix(secret, "skst_") || len(secret) < 40 {
			t.Fatalf("the shown secret %q does not look like a token", secret[:min(len(secret), 5)])
		}
		if got := b.Text(`[data-token="ci-staging"] td[data-label=Scope]`); got != "hello-world/staging:deployer" {
			t.Errorf("scope shown as %q", got)
		}
		// A line to use it at once, with its scope.
		wantCommand := "export STUDIO_URL=" + s.URL + " STUDIO_TOKEN=" + secret + " && studio deploy --project hello-world --env staging --wait"
		if got := b.Text("[data-token-command]"); got != wantCommand {
			t.Errorf("the ready command reads %q, want the export and deploy line for hello-world/staging", strings.ReplaceAll(got, secret, "[the secret]"))
		}
		if got := b.Text(".token-scope"); got != "Acts on hello-world/staging (deployer)." {
			t.Errorf("the new token's scope reads %q", got)
		}
		if n := browsertest.Eval[int](b, `[...document.querySelectorAll(".token-created button[data-copy]")].filter(b => !b.hidden).length`); n != 2 {
			t.Errorf("%d copy buttons shown for the new token, want 2 (secret and command)", n)
		}
		if extra, culprits := b.Overflow(); extra > 0 {
			t.Errorf("at %d px the page is %d px too wide: %s", width, extra, culprits)
		}
		b.Screenshot("tokens-" + map[int64]string{1280: "1280", 390: "390"}[width])
		// Reloading does not show it again.
		b.Do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#token-name")))
		if n := browsertest.Eval[int](b, `document.querySelectorAll("[data-token-secret]").length`); n != 0 {
			t.Errorf("the secret is shown again after a reload")
		}
		if v := b.Axe([]string{"wcag2a", "wcag2aa"}); len(v) > 0 {
			t.Errorf("accessibility at %d px: %v", width, v)
		}
	}
}
