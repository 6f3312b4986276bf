package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserPhoneNavigationShowsEveryItem: at 390 px every item of the
// navigation ("Installation" included) is within the screen, none cut off
// or scrolled away.
func TestBrowserPhoneNavigationShowsEveryItem(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	b := browsertest.New(t)
	b.Emulate(390, "light")
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS(".nav")))
	cut := browsertest.Eval[[]string](b, `[...document.querySelectorAll(".nav a")].filter(a => { const r = a.getBoundingClientRect(); return r.left < 0 || r.right > window.innerWidth; }).map(a => a.textContent.trim())`)
	items := browsertest.Eval[[]string](b, `[...document.querySelectorAll(".nav a")].map(a => a.textContent.trim())`)
	if len(cut) > 0 || len(items) < 5 {
		t.Errorf("at 390 px the navigation %v cuts off %v", items, cut)
	}
	if extra, culprits := b.Overflow(); extra > 0 {
		t.Errorf("at 390 px the page is %d px too wide: %s", extra, culprits)
	}
	b.Screenshot("nav-390")
}
