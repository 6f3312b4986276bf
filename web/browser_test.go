package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

func TestBrowserSignsInAndSeesTheHomePage(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	b := browsertest.New(t)
	b.Do(
		chromedp.Navigate(s.LocalLoginURL(t)),
		chromedp.WaitVisible(chromedp.CSS("h1")),
	)
	if got := b.Text("h1"); got != "Projects" {
		t.Errorf("heading = %q, want %q", got, "Projects")
	}
	if got := b.Text("[data-testid=user-name]"); got != "Local administrator" {
		t.Errorf("signed-in user shown as %q, want %q", got, "Local administrator")
	}
	if got := b.Text(".empty h2"); !strings.Contains(got, "No projects yet") {
		t.Errorf("empty state = %q, want it to say there are no projects yet", got)
	}
	// The stylesheet loaded under its hashed name: the top bar is styled.
	if pos := browsertest.Eval[string](b, `getComputedStyle(document.querySelector(".topbar")).position`); pos != "sticky" {
		t.Errorf("top bar position = %q, want sticky (is the stylesheet served?)", pos)
	}
	b.Screenshot("home")
}
