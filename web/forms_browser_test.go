package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
)

// TestBrowserFailedPostOpensAtTheError: on a phone, a failed post opens
// with the cursor in the field that failed, on screen, the name kept; a
// wrong confirmation of a deletion does the same and deletes nothing.
func TestBrowserFailedPostOpensAtTheError(t *testing.T) {
	t.Parallel()
	s, _ := wikiServer(t)
	// The browser checks the name's pattern itself; the length limit is
	// the server's.
	long := strings.Repeat("A", 300)
	b := browsertest.New(t)
	b.Emulate(390, "light")
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	// inView waits (up to 10 s) until the field is focused and on screen:
	// the page's script focuses it once the page has loaded, which may be
	// after the error is visible.
	inView := func(id string) bool {
		js := `(() => {
			const el = document.getElementById(` + "`" + id + "`" + `);
			const r = el.getBoundingClientRect();
			return document.activeElement === el && r.top >= 0 && r.bottom <= innerHeight;
		})()`
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if browsertest.Eval[bool](b, js) {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
		}
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
		chromedp.Navigate(s.URL+envPath+"/settings"),
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
	)
	b.Submit("#danger-zone button[type=submit]", ".flash")
	if got := browsertest.Eval[string](b, `location.pathname`); got != "/projects/team-wiki" {
		t.Errorf("after deleting, the browser is at %q, want the project", got)
	}
	if got := b.Text(".flash"); got == "" {
		t.Errorf("no message after deleting")
	}
}

// TestBrowserKeyboardSeesTheSkipLinkAndFocusRing: the first Tab shows the
// skip link, and a focused control wears a solid ring.
func TestBrowserKeyboardSeesTheSkipLinkAndFocusRing(t *testing.T) {
	t.Parallel()
	s, _ := wikiServer(t)
	b := browsertest.New(t)
	b.Do(
		chromedp.Navigate(s.LocalLoginURL(t)),
		chromedp.WaitVisible(chromedp.CSS("h1")),
		chromedp.Navigate(s.URL+envPath+"/values"),
		chromedp.WaitVisible(chromedp.CSS("main")),
		chromedp.KeyEvent("\t"),
	)
	got := browsertest.Eval[map[string]any](b, `(() => {
		const el = document.activeElement, cs = getComputedStyle(el), r = el.getBoundingClientRect();
		return {cls: el.className, top: r.top, outline: cs.outlineStyle, width: parseFloat(cs.outlineWidth)};
	})()`)
	if got["cls"] != "skip-link" || got["top"].(float64) < 0 {
		t.Errorf("first Tab focuses %v at top %v, want the skip link on screen", got["cls"], got["top"])
	}
	if got["outline"] != "solid" || got["width"].(float64) < 2 {
		t.Errorf("focus ring = %v %vpx, want a solid ring of at least 2px", got["outline"], got["width"])
	}
	b.Do(chromedp.KeyEvent("\r"))
	if id := browsertest.Eval[string](b, `document.activeElement.id`); id != "main" {
		t.Errorf("after the skip link the focus is on %q, want main", id)
	}
}
