package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/skali-dev/studio/runs/platform/s3target/s3test"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserBackupsS3TargetForm sets an S3 target on the installation
// page as a person would: a wrong secret key is refused beside its field,
// the right one is saved, the keys then read "set" and their fields stay
// empty; the page fits a phone and passes axe.
func TestBrowserBackupsS3TargetForm(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t, "backups")
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	b := browsertest.NewFor(t, 2*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+"/admin"), chromedp.WaitVisible(chromedp.CSS("#target")))
	fill := func(secret string) {
		b.Do(chromedp.SetValue(chromedp.CSS("#target"), "s3://backups/studio"),
			chromedp.SetValue(chromedp.CSS("#endpoint"), srv.Endpoint),
			chromedp.SetValue(chromedp.CSS("#region"), srv.Region),
			chromedp.Click(chromedp.CSS(`input[name="path_style"][value="1"]`)),
			chromedp.SetValue(chromedp.CSS("#access_key"), srv.Access),
			chromedp.SendKeys(chromedp.CSS("#secret_key"), secret),
			chromedp.Click(chromedp.CSS(`.backup-target-form button[type="submit"]`)))
	}
	fill("not-the-secret")
	b.Do(chromedp.WaitVisible(chromedp.CSS(`.field-error #secret_key`)))
	if got := b.Text(`[data-testid="target-error"]`); !strings.Contains(got, "the secret key is wrong") {
		t.Fatalf("the refusal reads %q", got)
	}
	// What was typed stays (but the keys), so only the key is typed again.
	if v := browsertest.Eval[string](b, `document.getElementById("endpoint").value`); v != srv.Endpoint {
		t.Fatalf("the endpoint field lost what was typed: %q", v)
	}
	if v := browsertest.Eval[string](b, `document.getElementById("secret_key").value + document.getElementById("access_key").value`); v != "" {
		t.Fatal("a key field is filled in again after a refusal")
	}
	b.Screenshot("admin-s3-refused")
	fill(srv.Secret)
	b.Do(chromedp.WaitVisible(chromedp.CSS(".flash")), chromedp.WaitVisible(chromedp.CSS(`[data-testid="secret_key-set"]`)))
	if v := browsertest.Eval[string](b, `document.getElementById("secret_key").value`); v != "" {
		t.Fatal("the secret key field is filled in after the save")
	}
	if html := browsertest.Eval[string](b, `document.documentElement.outerHTML`); strings.Contains(html, srv.Secret) || strings.Contains(html, srv.Access) {
		t.Fatal("the page holds a key of the target")
	}
	if v := b.Axe(browsertest.WCAG21AA); len(v) > 0 {
		t.Errorf("axe: %v", v)
	}
	b.Screenshot("admin-s3")
	b.Do(chromedp.EmulateViewport(390, 844))
	b.Screenshot("admin-s3-phone")
	if w := browsertest.Eval[int](b, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the admin page is %dpx wide on a 390px phone", w)
	}
}
