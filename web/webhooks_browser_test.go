package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserAddsAWebhookAndSeesItsSecretOnce: an environment's Webhooks
// page reached from the environment, an endpoint added with chosen events
// and the Slack body, its signing secret shown once and never after a
// reload; a failed deploy then appears among the recent deliveries, for
// this endpoint and for one of every environment (the installation's page)
// but not for an endpoint that chose other events.
func TestBrowserAddsAWebhookAndSeesItsSecretOnce(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithValueKeys())
	env := s.CreateEnvironment(t, "", "production")
	b := browsertest.New(t)
	b.Emulate(1280, "light")
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(
		chromedp.Navigate(s.URL+"/projects/hello-world/environments/production"),
		chromedp.Click(chromedp.CSS(`a[href="/projects/hello-world/environments/production/webhooks"]`)),
		chromedp.WaitVisible(chromedp.CSS("#webhook-url")),
		chromedp.SetValue(chromedp.CSS("#webhook-url"), "https://hooks.slack.example.test/services/T000/B000"),
		chromedp.Click(chromedp.CSS(`input[name=events][value="deploy.failed"]`)),
		chromedp.Click(chromedp.CSS(`input[name=events][value="backup.alarm_raised"]`)),
		chromedp.Click(chromedp.CSS(`input[name=format][value=slack]`)),
		chromedp.Click(chromedp.CSS(`form[action="/projects/hello-world/environments/production/webhooks"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("[data-webhook-secret]")),
	)
	secret := b.Text("[data-webhook-secret]")
	if !strings.HasPrefix(secret, "whsec_") || len(secret) < 40 {
		t.Fatalf("the shown secret does not look like a Standard Webhooks secret (%d characters)", len(secret))
	}
	if got := b.Text(`[data-webhook-state]`); !strings.Contains(got, "active") || !strings.Contains(got, "slack") || !strings.Contains(got, "Deploy failed") {
		t.Errorf("endpoint row reads %q, want it active, slack, with its events", got)
	}
	b.Do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#webhook-url")))
	if n := browsertest.Eval[int](b, `document.querySelectorAll("[data-webhook-secret]").length`); n != 0 {
		t.Errorf("the secret is shown again after a reload")
	}
	_, body := s.Get(t, s.SignInLocal(t), "/projects/hello-world/environments/production/webhooks?created=1")
	if strings.Contains(body, secret) {
		t.Errorf("the secret is shown to a later visit of the created address")
	}

	// One endpoint for every environment, one that chose other events.
	b.Do(
		chromedp.Navigate(s.URL+"/admin"),
		chromedp.Click(chromedp.CSS(`a[href="/admin/webhooks"]`)),
		chromedp.WaitVisible(chromedp.CSS("#webhook-url")),
		chromedp.SetValue(chromedp.CSS("#webhook-url"), "https://ops.example.test/studio"),
		chromedp.Click(chromedp.CSS(`input[name=events][value="deploy.failed"]`)),
		chromedp.Click(chromedp.CSS(`form[action="/admin/webhooks"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("[data-webhook-secret]")),
	)
	first := b.Text("[data-webhook-secret]")
	b.Do(
		chromedp.SetValue(chromedp.CSS("#webhook-url"), "https://certs.example.test/hook"),
		chromedp.Click(chromedp.CSS(`input[name=events][value="certificate.issued"]`)),
	)
	// The page already shows the first endpoint's secret: wait for the
	// second one's page (a navigation still under way would abort the
	// test's next one with net::ERR_ABORTED).
	b.Submit(`form[action="/admin/webhooks"] button[type=submit]`, "[data-webhook-secret]")
	if got := b.Text("[data-webhook-secret]"); got == "" || got == first {
		t.Fatalf("the second endpoint's secret was not shown (the page still reads %d characters of the first)", len(got))
	}

	// A deploy fails: its change records the deliveries in its transaction.
	ctx := context.Background()
	run := s.CreateRun(t, env, "deploy")
	for _, st := range []string{store.RunRunning, store.RunFailed} {
		if _, err := s.DB.ApplyRunChange(ctx, store.RunChange{RunID: run, Status: st, Reason: "The rollout of web failed."}); err != nil {
			t.Fatal(err)
		}
	}
	b.Do(chromedp.Navigate(s.URL+"/projects/hello-world/environments/production/webhooks"), chromedp.WaitVisible(chromedp.CSS("[data-delivery]")))
	if n := browsertest.Eval[int](b, `document.querySelectorAll("[data-delivery]").length`); n != 1 {
		t.Errorf("the environment's page lists %d deliveries, want 1 (deploy failed to its own endpoint)", n)
	}
	if got := b.Text("[data-delivery]"); !strings.Contains(got, "Deploy failed") || !strings.Contains(got, "hello-world/production") {
		t.Errorf("delivery row reads %q", got)
	}
	if extra, culprits := b.Overflow(); extra > 0 {
		t.Errorf("the page is %d px too wide: %s", extra, culprits)
	}
	b.Screenshot("webhooks-1280")
	if v := b.Axe([]string{"wcag2a", "wcag2aa"}); len(v) > 0 {
		t.Errorf("accessibility: %v", v)
	}
	b.Do(chromedp.Navigate(s.URL+"/admin/webhooks"), chromedp.WaitVisible(chromedp.CSS("[data-delivery]")))
	if got := b.Text(`[data-testid="webhook-deliveries"]`); strings.Count(got, "Deploy failed") != 1 || !strings.Contains(got, "ops.example.test") || strings.Contains(got, "certs.example.test") {
		t.Errorf("the installation's page lists %q; want one deploy failed, to ops.example.test only", got)
	}
	b.Emulate(390, "light")
	b.Do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("[data-delivery]")))
	if extra, culprits := b.Overflow(); extra > 0 {
		t.Errorf("at 390 px the page is %d px too wide: %s", extra, culprits)
	}
	b.Screenshot("webhooks-admin-390")
}

// TestBrowserWebhookDeliveriesOfARealDeploy: a deploy executed by River
// reaches a receiver that answers 200 (succeeded, one attempt) and one that
// answers 500 (retrying, its answer shown); Redeliver sends a finished
// delivery again with the same webhook-id.
func TestBrowserWebhookDeliveriesOfARealDeploy(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	s.CreateEnvironment(t, "name: plain\napplications:\n  api:\n    image: ghcr.io/acme/api:1\n", "production")
	admin := s.SignInLocal(t)
	var mu sync.Mutex
	ids := map[string]int{}
	var links []string
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Data struct{ URL string } }
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body)
		mu.Lock()
		ids[r.Header.Get("webhook-id")]++
		links = append(links, body.Data.URL)
		mu.Unlock()
	}))
	t.Cleanup(ok.Close)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	const page = "/projects/plain/environments/production/webhooks"
	for _, ep := range []url.Values{
		{"url": {ok.URL + "/studio"}, "events": {"deploy.started", "deploy.succeeded", "deploy.failed"}, "format": {"standard"}},
		{"url": {failing.URL + "/hooks/chat"}, "events": {"deploy.succeeded"}, "format": {"slack"}},
	} {
		if resp, body := s.PostForm(t, admin, page, ep); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("add endpoint = %d\n%s", resp.StatusCode, pageMain(body))
		}
	}
	resp, _ := s.PostForm(t, admin, "/projects/plain/environments/production/deploys", url.Values{})
	waitForRun(t, s, admin, resp.Header.Get("Location"))
	// Wait for the deliveries the page is about to show (a page opened
	// earlier would show some still pending); say what was seen if not.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		_, body := s.Get(t, admin, page)
		succeeded, retrying := strings.Count(body, `data-delivery-status="succeeded"`), strings.Count(body, `data-delivery-status="retrying"`)
		if succeeded == 2 && retrying == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deliveries page shows %d succeeded and %d retrying after a minute, want 2 and 1", succeeded, retrying)
		}
	}
	b := browsertest.New(t)
	b.Emulate(1280, "light")
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+page), chromedp.WaitVisible(chromedp.CSS(`[data-delivery-status="retrying"]`)))
	if got := b.Text(`[data-delivery-status="retrying"]`); !strings.Contains(got, "500") || !strings.Contains(got, "The endpoint answered 500 Internal Server Error.") {
		t.Errorf("the failing endpoint's delivery reads %q, want its 500 answer", got)
	}
	if n := browsertest.Eval[int](b, `document.querySelectorAll('[data-delivery-status="succeeded"]').length`); n != 2 {
		t.Errorf("%d succeeded deliveries shown, want 2 (started, succeeded)", n)
	}
	b.Screenshot("webhooks-1280-light")
	if v := b.Axe([]string{"wcag2a", "wcag2aa"}); len(v) > 0 {
		t.Errorf("accessibility: %v", v)
	}
	b.Do(
		chromedp.Click(chromedp.CSS(`[data-delivery-status="succeeded"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	)
	var twice bool
	for range 600 {
		mu.Lock()
		for _, n := range ids {
			twice = twice || n == 2
		}
		mu.Unlock()
		if twice {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !twice {
		t.Errorf("Redeliver did not send a delivery again with its webhook-id: %v", ids)
	}
	mu.Lock()
	for _, l := range links {
		if !strings.HasPrefix(l, s.URL+"/projects/plain/environments/production/runs/") {
			t.Errorf("a body links to %q, want the run's page on the Studio's public URL", l)
		}
	}
	mu.Unlock()
	b.Emulate(390, "light")
	b.Do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-delivery]`)))
	if extra, culprits := b.Overflow(); extra > 0 {
		t.Errorf("at 390 px the page is %d px too wide: %s", extra, culprits)
	}
	b.Screenshot("webhooks-390-light")
}
