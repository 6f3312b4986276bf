package web_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// TestWebhookPageSaysWhyADeliveryWasRefused: an endpoint on a loopback
// address the installation did not allow (the test Studio allows only
// 127.0.0.1, this listener is on 127.0.0.2) and one on a link-local
// address are refused when added; stored anyway (before the setting
// changed), their deliveries are refused, nothing reaches the listener,
// and the page says why in a sentence, with the endpoint turned off. A
// stored error however long (a row written before errors were bounded) is
// shown clipped.
func TestWebhookPageSaysWhyADeliveryWasRefused(t *testing.T) {
	t.Parallel()
	d := &webtest.Deploys{}
	s := webtest.Start(t, webtest.WithDeploys(d))
	env := s.CreateEnvironment(t, "name: plain\napplications:\n  api:\n    image: ghcr.io/acme/api:1\n", "production")
	admin := s.SignInLocal(t)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no second loopback address here: %v", err)
	}
	var reached atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				reached.Add(1)
			}
		}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	const page = "/projects/plain/environments/production/webhooks"
	refused := []string{"http://" + ln.Addr().String() + "/hook", "http://169.254.169.254/latest/meta-data/"}
	// Added through the page, an address deliveries refuse is refused at
	// once, with the same sentence, and nothing is stored.
	for _, u := range refused {
		resp, body := s.PostForm(t, admin, page, url.Values{"url": {u}, "events": {"deploy.succeeded"}, "format": {"standard"}})
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Deliveries to this URL would be refused: ") ||
			!strings.Contains(body, "; allow it with --webhook-allow-networks.") {
			t.Errorf("adding %s = %d, want 422 saying why:\n%s", u, resp.StatusCode, pageMain(body))
		}
	}
	var stored int
	if err := s.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_endpoints`).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("%d endpoints stored (%v) after refusals, want none", stored, err)
	}
	// Endpoints stored before (another setting, or a name that resolves
	// there now) are refused when a delivery would connect.
	for _, u := range refused {
		if _, _, err := d.Service.Vault.CreateWebhookEndpoint(context.Background(), store.Actor{}, env,
			store.NewWebhookEndpoint{URL: u, Events: []string{store.WebhookDeploySucceeded}, Format: store.WebhookFormatStandard}); err != nil {
			t.Fatal(err)
		}
	}
	resp, _ := s.PostForm(t, admin, "/projects/plain/environments/production/deploys", url.Values{})
	waitForRun(t, s, admin, resp.Header.Get("Location"))
	var body string
	for range 600 {
		_, body = s.Get(t, admin, page)
		// Both deliveries failed and both endpoints turned off: the
		// endpoint is turned off after its delivery is recorded.
		if strings.Count(body, `data-delivery-status="failed"`) == 2 && strings.Count(body, "was turned off.") == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	main := body[max(strings.Index(body, "<main"), 0):]
	for _, want := range []string{
		"refused: 127.0.0.2 is a loopback address; allow it with --webhook-allow-networks",
		"refused: 169.254.169.254 is a link-local address; allow it with --webhook-allow-networks",
	} {
		if strings.Count(main, want) < 2 {
			t.Errorf("the page says %q %d times, want at least twice (the delivery, the endpoint turned off):\n%s", want, strings.Count(main, want), pageMain(body))
		}
	}
	if n := strings.Count(main, "was turned off."); n != 2 {
		t.Errorf("the page says %d endpoints were turned off, want 2", n)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the refused listener saw %d connections and requests, want none", n)
	}

	before := len(body)
	ctx := context.Background()
	huge := strings.Repeat("é", 500_000)
	if _, err := s.DB.Pool.Exec(ctx, `UPDATE webhook_deliveries SET last_error = $1`, huge); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.Pool.Exec(ctx, `UPDATE webhook_endpoints SET disabled_reason = $1`, huge); err != nil {
		t.Fatal(err)
	}
	_, body = s.Get(t, admin, page)
	if grown := len(body) - before; grown > 6*1024 || strings.Contains(body, strings.Repeat("é", 700)) {
		t.Errorf("with 1 MB errors stored, the page grew by %d bytes; want the texts clipped to a few hundred bytes each", grown)
	}
	if !strings.Contains(body, "é…") {
		t.Errorf("the clipped texts do not end with …")
	}
}
