package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
)

// TestBrowserFailedPostOpensAtTheError: on a phone, a failed post opens
// with the cursor in the field that failed, on screen, the name kept; a
// wrong confirmation of a deletion does the same and deletes nothing.
func TestBrowserFailedPostOpensAtTheError(t *testing.T) {
	s, _ := wikiServer(t)
	// The browser checks the name's pattern itself; the length limit is
	// the server's.
	long := strings.Repeat("A", 300)
	b := browsertest.New(t)
	b.Emulate(390, "light")
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	inView := func(id string) bool {
		return browsertest.Eval[bool](b, `(() => {
			const el = document.getElementById(`+"`"+id+"`"+`);
			const r = el.getBoundingClientRect();
			return document.activeElement === el && r.top >= 0 && r.bottom <= innerHeight;
		})()`)
	}
	b.Do(
		chromedp.Navigate(s.URL+envPath+"/values"),
		chromedp.WaitVisible(chromedp.CSS("#value-name")),
		chromedp.SetValue(chromedp.CSS("#value-name"), long),
		chromedp.Click(chromedp.CSS("#set button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#value-name-error")),
	)
	if !inView("value-name") {
		t.Errorf("after a failed set the name field is not focused and on screen")
	}
	if got := browsertest.Eval[string](b, `document.getElementById("value-name").value`); got != long {
		t.Errorf("name field = %q, want the name as typed", got)
	}
	b.Screenshot("values-failed-set-390")

	b.Do(
		chromedp.Navigate(s.URL+envPath),
		chromedp.WaitVisible(chromedp.CSS("#delete-confirm")),
		chromedp.SetValue(chromedp.CSS("#delete-confirm"), "prod"),
		chromedp.Click(chromedp.CSS("#danger-zone button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#delete-confirm-error")),
	)
	if !inView("delete-confirm") {
		t.Errorf("after a wrong confirmation the field is not focused and on screen")
	}
	if status, _ := s.Get(t, s.SignInLocal(t), envPath); status != 200 {
		t.Fatalf("the environment is gone after a wrong confirmation (%d)", status)
	}
	b.Do(
		chromedp.SetValue(chromedp.CSS("#delete-confirm"), "production"),
		chromedp.Click(chromedp.CSS("#danger-zone button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	)
	if got := browsertest.Eval[string](b, `location.pathname`); got != "/projects/team-wiki" {
		t.Errorf("after deleting, the browser is at %q, want the project", got)
	}
	if got := b.Text(".flash"); got == "" {
		t.Errorf("no message after deleting")
	}
}
