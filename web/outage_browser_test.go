package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserSeesTheOutagePageAndTriesAgain: during a database outage a
// person in the browser sees the calm 503 page, accessible, with a "Try
// again" button; once the database is back, that button brings the page
// they asked for.
func TestBrowserSeesTheOutagePageAndTriesAgain(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	s.CreateEnvironment(t, "", "production")
	b := browsertest.New(t)
	b.Do(
		chromedp.Navigate(s.LocalLoginURL(t)),
		chromedp.WaitVisible(chromedp.CSS("h1")),
	)
	end := databaseOutage(t, s)
	b.Do(
		chromedp.Navigate(s.URL+"/projects/hello-world/environments/production"),
		chromedp.WaitVisible(chromedp.CSS("h1")),
	)
	if got := b.Text("h1"); got != "Temporarily unavailable" {
		t.Errorf("heading during the outage = %q, want %q", got, "Temporarily unavailable")
	}
	if got := b.Text(".empty p"); !strings.Contains(got, outageSentence) {
		t.Errorf("the page says %q, want %q", got, outageSentence)
	}
	if v := b.Axe(browsertest.WCAG21AA); len(v) > 0 {
		for _, x := range v {
			t.Errorf("accessibility: %s", x)
		}
	}
	b.Screenshot("outage")
	end()
	// The outage page has a heading too: wait for the next document.
	b.Submit(`a.button-primary`, "h1")
	if got := b.Text("h1"); !strings.Contains(got, "production") {
		t.Errorf("after the outage, Try again shows %q, want the environment page", got)
	}
}
