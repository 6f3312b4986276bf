package runs_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// countingListener is a receiver that only counts the connections and
// requests reaching it.
type countingListener struct {
	srv            *httptest.Server
	conns, request atomic.Int64
}

func newCountingListener(t *testing.T) *countingListener {
	c := &countingListener{}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.request.Add(1) }))
	c.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.conns.Add(1)
		}
	}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

// TestWebhookRefusesLoopbackLinkLocalAndTheStudioItself: without
// --webhook-allow-networks, a delivery to a loopback address (written as
// such, as an IPv4-mapped IPv6 address, or as a name resolving to it) or
// to a link-local one is refused when it would connect: once, not
// retried, the sentence stored with the delivery and as the reason its
// endpoint was turned off, and nothing reaches the listener.
func TestWebhookRefusesLoopbackLinkLocalAndTheStudioItself(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	target := newCountingListener(t)
	port := target.srv.Listener.Addr().(*net.TCPAddr).Port
	portText := ":" + strconv.Itoa(port)
	cases := []struct {
		url, want string
	}{
		{target.srv.URL + "/hook", "refused: 127.0.0.1 is a loopback address; allow it with --webhook-allow-networks"},
		{"http://[::ffff:127.0.0.1]" + portText + "/hook", "refused: 127.0.0.1 is a loopback address; allow it with --webhook-allow-networks"},
		{"http://localhost" + portText + "/hook", " is a loopback address; allow it with --webhook-allow-networks"},
		{"http://169.254.169.254/latest/meta-data/", "refused: 169.254.169.254 is a link-local address; allow it with --webhook-allow-networks"},
		{"http://[fe80::1]:80/", "refused: fe80::1 is a link-local address; allow it with --webhook-allow-networks"},
		{"http://0.0.0.0" + portText + "/", "refused: 0.0.0.0 is an unspecified address"},
		{"http://10.1.2.3:9/", "refused: 10.1.2.3 is a private address; allow it with --webhook-allow-networks"},
	}
	var eps []*store.WebhookEndpoint
	for _, c := range cases {
		ep, _ := f.addEndpoint(c.url, store.WebhookFormatStandard, store.WebhookDeploySucceeded)
		eps = append(eps, ep)
	}
	startWebhookRiver(t, f.svc, runs.WebhookOptions{Backoff: tinyBackoff, Timeout: 2 * time.Second})
	run := f.deploy(runs.DeployRequest{})
	waitFinished(t, f.db, []int64{run.ID})
	for i, c := range cases {
		d := waitDeliveries(t, f.db, eps[i].ID, 1)[0]
		if d.Status != store.WebhookFailed || d.Attempts != 1 || d.ResponseCode != nil || !strings.Contains(d.LastError, c.want) {
			t.Errorf("%s: %s after %d attempts (code %v), error %q; want failed at its first attempt, with no answer, saying %q",
				c.url, d.Status, d.Attempts, d.ResponseCode, d.LastError, c.want)
		}
		ep, err := f.db.WebhookEndpointByID(f.ctx, eps[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if ep.DisabledAt == nil || !strings.Contains(ep.DisabledReason, c.want) {
			t.Errorf("%s: endpoint turned off %v with reason %q, want turned off saying %q", c.url, ep.DisabledAt != nil, ep.DisabledReason, c.want)
		}
	}
	if n, r := target.conns.Load(), target.request.Load(); n != 0 || r != 0 {
		t.Errorf("the listener saw %d connections and %d requests, want none", n, r)
	}
}

// TestWebhookNeverReachesTheStudiosOwnListener: allowing loopback opens
// it, but never the Studio's own listener.
func TestWebhookNeverReachesTheStudiosOwnListener(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	studio := newCountingListener(t)
	own := studio.srv.Listener.Addr().(*net.TCPAddr).AddrPort()
	ownEp, _ := f.addEndpoint(studio.srv.URL+"/login", store.WebhookFormatStandard, store.WebhookDeploySucceeded)
	other := newReceiver(t, func(int) int { return http.StatusOK })
	otherEp, secret := f.addEndpoint(other.srv.URL, store.WebhookFormatStandard, store.WebhookDeploySucceeded)
	other.secret = secret
	startWebhookRiver(t, f.svc, runs.WebhookOptions{Backoff: tinyBackoff, Timeout: 2 * time.Second,
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Own:           []runs.OwnAddress{{Addr: own, What: "the Studio's own listener"}}})
	run := f.deploy(runs.DeployRequest{})
	waitFinished(t, f.db, []int64{run.ID})
	od := waitDeliveries(t, f.db, ownEp.ID, 1)
	if want := "refused: 127.0.0.1 is the Studio's own listener, which webhooks never reach"; od[0].Status != store.WebhookFailed || !strings.Contains(od[0].LastError, want) {
		t.Errorf("delivery to the Studio's own listener: %s, %q; want failed saying %q", od[0].Status, od[0].LastError, want)
	}
	if n := studio.conns.Load(); n != 0 {
		t.Errorf("the Studio's own listener saw %d connections, want none", n)
	}
	if d := waitDeliveries(t, f.db, otherEp.ID, 1); d[0].Status != store.WebhookSucceeded {
		t.Errorf("a receiver in the allowed range: %s (%q), want succeeded", d[0].Status, d[0].LastError)
	}
}

// TestWebhookAnswersAreBoundedWhateverTheReceiverSends: a redirect names
// its target by scheme and host only; a 100 KB Location, a 1 MB header, a
// 1 MB body or a 100 KB line of garbage leave a short error, stored and as
// the endpoint's reason.
func TestWebhookAnswersAreBoundedWhateverTheReceiverSends(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	long := strings.Repeat("a", 100<<10)
	serve := func(h http.HandlerFunc) string {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s.URL
	}
	garbage, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = garbage.Close() })
	go func() {
		for {
			c, err := garbage.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 4096)
				_, _ = c.Read(buf)
				_, _ = c.Write([]byte("NOTHTTP " + long + "\r\n\r\n"))
			}()
		}
	}()
	cases := []struct {
		name, url, want, never string
	}{
		{"a redirect with a credential in its path", serve(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://hooks.example.test:8443/services/T0/B0/SECRETPATH?token=SECRETQUERY", http.StatusTemporaryRedirect)
		}), "The endpoint answered 307, redirected to https://hooks.example.test:8443, which is not followed", "SECRET"},
		{"a redirect to the metadata service", serve(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam", http.StatusFound)
		}), "The endpoint answered 302, redirected to http://169.254.169.254, which is not followed", "meta-data"},
		{"a redirect with a 100 KB Location", serve(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.2/"+long, http.StatusFound)
		}), "headers exceeded", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{"a 1 MB header", serve(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Big", strings.Repeat(long, 10))
			w.WriteHeader(http.StatusOK)
		}), "headers exceeded", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{"a 1 MB body", serve(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			for range 10 {
				if _, err := w.Write([]byte(long)); err != nil {
					return
				}
			}
		}), "The endpoint answered 500 Internal Server Error.", "aaaa"},
		{"100 KB of garbage", "http://" + garbage.Addr().String() + "/", "The request failed", ""},
	}
	var eps []*store.WebhookEndpoint
	for _, c := range cases {
		ep, _ := f.addEndpoint(c.url, store.WebhookFormatStandard, store.WebhookDeploySucceeded)
		eps = append(eps, ep)
	}
	startWebhookRiver(t, f.svc, runs.WebhookOptions{Backoff: []time.Duration{10 * time.Millisecond}, Timeout: 5 * time.Second,
		AllowNetworks: testReceivers})
	run := f.deploy(runs.DeployRequest{})
	waitFinished(t, f.db, []int64{run.ID})
	for i, c := range cases {
		d := waitDeliveries(t, f.db, eps[i].ID, 1)[0]
		if d.Status != store.WebhookFailed || !strings.Contains(d.LastError, c.want) || len(d.LastError) > store.WebhookErrorLimit ||
			(c.never != "" && strings.Contains(d.LastError, c.never)) {
			t.Errorf("%s: %s, error of %d bytes %q; want failed saying %q in at most %d bytes", c.name, d.Status, len(d.LastError),
				clipForLog(d.LastError), c.want, store.WebhookErrorLimit)
		}
		ep, err := f.db.WebhookEndpointByID(f.ctx, eps[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if ep.DisabledAt == nil || len(ep.DisabledReason) > store.WebhookErrorLimit+200 {
			t.Errorf("%s: turned off %v, reason of %d bytes; want turned off with a short reason", c.name, ep.DisabledAt != nil, len(ep.DisabledReason))
		}
	}
}

func clipForLog(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}
