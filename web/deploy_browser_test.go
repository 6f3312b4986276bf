package web_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserDeploysWithADomainPointingElsewhere deploys the reference's
// production-shaped example while its domain points elsewhere, as a person
// would: the run ends green with TLS deferred, the environment page marks
// the service DNS pending; when the domain arrives but validation fails,
// the page shows the retry time.
func TestBrowserDeploysWithADomainPointingElsewhere(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{}
	s, _ := deployableWiki(t, d, dns, "127.0.0.2")
	const envPath = "/projects/team-wiki/environments/production"

	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+envPath), chromedp.WaitVisible(chromedp.CSS(`a[href$="/deploys/new"]`)))
	b.Screenshot("environment-before-deploy")
	b.Do(chromedp.Click(chromedp.CSS(`a[href$="/deploys/new"]`)), chromedp.WaitVisible(chromedp.CSS("#deploy-form button[type=submit]")))
	b.Screenshot("deploy-plan")
	b.Do(chromedp.EmulateViewport(390, 844))
	b.Screenshot("deploy-plan-phone")
	b.Do(chromedp.EmulateViewport(1280, 900))
	b.Do(chromedp.Click(chromedp.CSS("#deploy-form button[type=submit]")),
		// The unfinished run's page reloads itself until the run ends.
		chromedp.WaitVisible(chromedp.CSS(`#run-status[data-run-status="succeeded-with-warnings"]`)))
	page := b.Text("main")
	for _, want := range []string{"succeeded · with warnings", "1 route deferred", "cert deferred · domain not pointing here yet", "warning: TLS deferred: wiki.test is not pointing here yet"} {
		if !strings.Contains(page, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
	b.Do(chromedp.Click(chromedp.CSS(`#checkpoint-6 details summary`)))
	b.Screenshot("run-deferred")
	b.Do(chromedp.EmulateViewport(390, 844))
	b.Screenshot("run-deferred-phone")
	b.Do(chromedp.EmulateViewport(1280, 900))

	b.Do(chromedp.Navigate(s.URL+envPath), chromedp.WaitVisible(chromedp.CSS("#tls")))
	if got := b.Text("#tls"); !strings.Contains(got, "DNS pending") {
		t.Errorf("certificates card = %q, want DNS pending", got)
	}
	// The domain arrives, but validation fails: Check now shows the retry time.
	dns.Set("wiki.test", "127.0.0.1")
	d.Faults.Set(func(f *local.Faults) {
		f.Issuance = map[string]string{"wiki.test": "403 urn:ietf:params:acme:error:unauthorized"}
	})
	// Wait for the page Check now leads to (and its message), or the
	// next Navigate aborts it.
	b.Submit(`#tls form button`, ".flash")
	// The failed issuance reaches the environment's card as a person
	// reloading it would see, within 2 minutes.
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		b.Do(chromedp.Navigate(s.URL+envPath), chromedp.WaitVisible(chromedp.CSS("#tls")))
		if strings.Contains(b.Text("#tls"), "retry at") {
			break
		}
	}
	if got := b.Text("#tls"); !strings.Contains(got, "cert failed · retry at ") || !strings.Contains(got, "UTC") {
		t.Errorf("certificates card = %q, want the retry time", got)
	}
	b.Screenshot("environment-cert-failed")
	b.Do(chromedp.EmulateViewport(390, 844))
	b.Screenshot("environment-cert-failed-phone")
	b.Do(chromedp.EmulateViewport(1280, 900))
	b.Do(chromedp.Navigate(s.URL+envPath+"/runs"), chromedp.WaitVisible(chromedp.CSS(".runs-table")))
	b.Screenshot("runs")
	b.Do(chromedp.EmulateViewport(390, 844))
	b.Screenshot("runs-phone")
}

// TestBrowserShowsADestructivePlan plans a revision that removes a bucket
// and changes the application, and types the confirmation.
func TestBrowserShowsADestructivePlan(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	s, admin := deployableWiki(t, &webtest.Deploys{}, dns, "127.0.0.1")
	const envPath = "/projects/team-wiki/environments/production"
	resp, _ := s.PostForm(t, admin, envPath+"/deploys", url.Values{})
	waitForRun(t, s, admin, resp.Header.Get("Location"))
	src := exampleManifest(t, "production")
	src = src[:strings.Index(src, "\nbuckets:")+1]
	for _, k := range []string{"endpoint", "name", "region", "access_key", "secret_key"} {
		src = strings.Replace(src, `"{{buckets.attachments.`+k+`}}"`, `"x"`, 1)
	}
	src = strings.Replace(strings.Replace(src, "min: 2", "min: 3", 1), "timeout: 5m", "timeout: 15m", 1)
	if resp, body := s.PostForm(t, admin, "/projects/team-wiki/revisions", url.Values{"manifest": {src}}); resp.StatusCode != 303 {
		t.Fatalf("add revision: %d\n%s", resp.StatusCode, pageMain(body))
	}
	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+envPath+"/deploys/new"), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	if got := b.Text(".plan-destructive"); !strings.Contains(got, "Removing bucket attachments destroys its data.") {
		t.Errorf("destructive callout = %q", got)
	}
	b.Screenshot("deploy-plan-destructive")
	b.Do(chromedp.EmulateViewport(390, 844))
	b.Screenshot("deploy-plan-destructive-phone")
	// A wrong name: the page comes back with the error in red, tied to the
	// field, and the field has the focus.
	// (autofocus may land a moment after the load: polled.)
	b.Do(chromedp.SendKeys(chromedp.CSS("#confirm"), "prod"))
	b.Submit("#deploy-form button[type=submit]", "#confirm-error")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := browsertest.Eval[string](b, `(() => { const e = document.getElementById("confirm-error"), i = document.getElementById("confirm");
			const red = getComputedStyle(document.documentElement).getPropertyValue("--danger").trim();
			const probe = document.createElement("span"); probe.style.color = red; document.body.appendChild(probe);
			const want = getComputedStyle(probe).color; probe.remove();
			return [getComputedStyle(e).color === want, i.getAttribute("aria-describedby") === "confirm-error", document.activeElement === i].join(" ");
		})()`)
		if got == "true true true" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("confirmation error red, described-by, focused = %s, want true true true (the focus is on %s)", got,
				browsertest.Eval[string](b, `document.activeElement ? document.activeElement.tagName + "#" + document.activeElement.id : "nothing"`))
			break
		}
	}
	b.Screenshot("deploy-plan-confirm-error-phone")
	b.Do(chromedp.Evaluate[chromedp.Void](`document.getElementById("confirm").value = ""`), chromedp.SendKeys(chromedp.CSS("#confirm"), "production"), chromedp.Click(chromedp.CSS("#deploy-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(`#run-status[data-run-status="succeeded"]`)))
}
