package web_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

// TestWebhookEventsChosenByGroup: the form offers the groups (all, deploys,
// certificates, backups); ticking Deploys and Certificates subscribes the
// endpoint to every deploy and certificate event, and nothing else.
func TestWebhookEventsChosenByGroup(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	env := s.CreateEnvironment(t, "name: plain\napplications:\n  api:\n    image: ghcr.io/acme/api:1\n", "production")
	admin := s.SignInLocal(t)
	receiver := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(receiver.Close)
	const page = "/projects/plain/environments/production/webhooks"
	_, form := s.Get(t, admin, page)
	for _, g := range []string{"group:all", "group:deploys", "group:certificates", "group:backups", "group:approvals"} {
		if !strings.Contains(form, `value="`+g+`"`) {
			t.Errorf("the form offers no %s", g)
		}
	}
	resp, body := s.PostForm(t, admin, page, url.Values{"url": {receiver.URL + "/studio"}, "events": {"group:deploys", "group:certificates", "deploy.failed"}, "format": {"standard"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("add endpoint by group = %d\n%s", resp.StatusCode, pageMain(body))
	}
	eps, err := s.DB.WebhookEndpoints(t.Context(), env.ID)
	if err != nil || len(eps) != 1 {
		t.Fatalf("%d endpoints (%v), want 1", len(eps), err)
	}
	want := "deploy.started deploy.succeeded deploy.succeeded_with_warnings deploy.failed deploy.cancelled certificate.issued certificate.failed"
	if got := strings.Join(eps[0].Events, " "); got != want {
		t.Errorf("the endpoint's events = %s\nwant %s", got, want)
	}

	// Send a test event: a delivery of webhook.test, listed at once.
	testPath := page + "/" + strconv.FormatInt(eps[0].ID, 10) + "/test"
	if _, before := s.Get(t, admin, page); !strings.Contains(before, `action="`+testPath+`"`) || !strings.Contains(before, "Send a test event") {
		t.Errorf("the endpoint offers no Send a test event")
	}
	if resp, _ := s.PostForm(t, admin, testPath, url.Values{}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("send a test event = %d, want 303", resp.StatusCode)
	}
	ds, err := s.DB.WebhookDeliveries(t.Context(), []int64{eps[0].ID}, 10)
	if err != nil || len(ds) != 1 || ds[0].Event != "webhook.test" {
		t.Fatalf("deliveries after the test event: %d (%v), want one webhook.test", len(ds), err)
	}
	if _, after := s.Get(t, admin, page); !strings.Contains(after, "Test event") {
		t.Errorf("the deliveries list does not show the test event")
	}

	// Each delivery's body can be read on the page, as it is sent.
	resp, _ = s.PostForm(t, admin, "/projects/plain/environments/production/deploys", url.Values{})
	waitForRun(t, s, admin, resp.Header.Get("Location"))
	_, listed := s.Get(t, admin, page)
	body = html.UnescapeString(listed)
	for _, want := range []string{`<code data-delivery-body>{`, `"type": "deploy.started"`, `"project": "plain"`, `"url": `} {
		if !strings.Contains(body, want) {
			t.Errorf("the deliveries list shows no body with %q", want)
		}
	}
}
