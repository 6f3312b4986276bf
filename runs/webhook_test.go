package runs_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// receiver is a webhook endpoint of the test's own: it checks each
// request's Standard Webhooks signature with the endpoint's secret, and
// answers what answer says for the n-th request of a message.
type receiver struct {
	t      *testing.T
	mu     sync.Mutex
	secret string
	// answer is the status for the n-th (1-based) request of a message id.
	answer func(n int) int
	// requests counts requests per webhook-id; bodies are those answered 2xx.
	requests map[string]int
	bodies   []string
	badSigs  int
	srv      *httptest.Server
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	rc := &receiver{t: t, answer: answer, requests: map[string]int{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id, ts, sig := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature")
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !verifySignature(rc.secret, id, ts, body, sig) {
		rc.badSigs++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	rc.requests[id]++
	code := rc.answer(rc.requests[id])
	if code < 300 {
		rc.bodies = append(rc.bodies, string(body))
	}
	w.WriteHeader(code)
}

// verifySignature checks a webhook-signature header the way the Standard
// Webhooks libraries do, written here independently of the sender.
func verifySignature(secret, id, ts string, body []byte, header string) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || id == "" || ts == "" {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := mac.Sum(nil)
	for _, s := range strings.Fields(header) {
		v, sig, ok := strings.Cut(s, ",")
		got, err := base64.StdEncoding.DecodeString(sig)
		if ok && v == "v1" && err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

func (rc *receiver) snapshot() (map[string]int, []string, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	reqs := map[string]int{}
	for k, v := range rc.requests {
		reqs[k] = v
	}
	return reqs, append([]string(nil), rc.bodies...), rc.badSigs
}

func (f *fixture) addEndpoint(url string, format string, events ...string) (*store.WebhookEndpoint, string) {
	f.t.Helper()
	ep, secret, err := f.vault.CreateWebhookEndpoint(f.ctx, store.Actor{}, f.env, store.NewWebhookEndpoint{URL: url, Events: events, Format: format})
	if err != nil {
		f.t.Fatal(err)
	}
	return ep, secret
}

func startWebhookRiver(t *testing.T, svc *runs.Service, o runs.WebhookOptions) {
	t.Helper()
	if err := svc.StartRiver(context.Background(), runs.RiverOptions{PollInterval: 50 * time.Millisecond, ReconcileInterval: -1,
		BackupInterval: -1, WebhookSweepInterval: -1, Webhooks: o}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopRiver(svc) })
}

func stopRiver(svc *runs.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	svc.StopRiver(ctx)
}

// waitDeliveries polls until the endpoint has n deliveries, each done
// (succeeded or failed); it asserts nothing about time.
func waitDeliveries(t *testing.T, db *store.DB, endpointID int64, n int) []store.WebhookDelivery {
	t.Helper()
	var ds []store.WebhookDelivery
	for range 2400 {
		var err error
		if ds, err = db.WebhookDeliveries(context.Background(), []int64{endpointID}, 100); err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, d := range ds {
			if d.Status == store.WebhookSucceeded || d.Status == store.WebhookFailed {
				done++
			}
		}
		if len(ds) == n && done == n {
			return ds
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("endpoint %d: deliveries %+v, want %d done", endpointID, ds, n)
	return nil
}

// testReceivers opens the address the tests' receivers listen on, which
// deliveries refuse by default.
var testReceivers = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

var tinyBackoff = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}

func TestWebhookFailingThreeTimesIsDeliveredOnceWithFourAttempts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	const plaintext = "hunter2-webhook-plaintext"
	f.setValue("API_SECRET", plaintext)

	flaky := newReceiver(t, func(n int) int {
		if n <= 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	ep, secret := f.addEndpoint(flaky.srv.URL+"/hook", store.WebhookFormatStandard,
		store.WebhookDeployStarted, store.WebhookDeploySucceeded, store.WebhookDeployFailed)
	flaky.secret = secret
	// An endpoint that chose only certificate events hears nothing of deploys.
	quiet := newReceiver(t, func(int) int { return http.StatusOK })
	quietEp, quietSecret := f.addEndpoint(quiet.srv.URL, store.WebhookFormatStandard, store.WebhookCertificateIssued)
	quiet.secret = quietSecret
	if !strings.HasPrefix(secret, "whsec_") || secret == quietSecret {
		t.Fatalf("secrets are not per endpoint Standard Webhooks secrets")
	}

	startWebhookRiver(t, f.svc, runs.WebhookOptions{PublicURL: "https://studio.example.test/", Backoff: tinyBackoff, Timeout: 5 * time.Second,
		AllowNetworks: testReceivers})
	run := f.deploy(runs.DeployRequest{})
	waitFinished(t, f.db, []int64{run.ID})
	ds := waitDeliveries(t, f.db, ep.ID, 2)
	// Stop River: whatever it would still send has been sent once it stops.
	stopRiver(f.svc)

	for _, d := range ds {
		if d.Status != store.WebhookSucceeded || d.Attempts != 4 || d.ResponseCode == nil || *d.ResponseCode != 200 {
			t.Errorf("delivery %s: status %s, attempts %d, code %v; want succeeded after 4 attempts with 200", d.Event, d.Status, d.Attempts, d.ResponseCode)
		}
	}
	reqs, bodies, bad := flaky.snapshot()
	if bad != 0 {
		t.Errorf("%d requests had a signature the receiver could not verify", bad)
	}
	if len(reqs) != 2 {
		t.Errorf("receiver heard of %d messages, want 2 (started, succeeded)", len(reqs))
	}
	for id, n := range reqs {
		if n != 4 {
			t.Errorf("message %s was received %d times, want 4 (three 500s, then one 200, nothing after)", id, n)
		}
	}
	if len(bodies) != 2 {
		t.Fatalf("receiver accepted %d bodies, want 2", len(bodies))
	}
	var types []string
	for _, b := range bodies {
		if strings.Contains(b, plaintext) {
			t.Errorf("a webhook body carries a value's plaintext")
		}
		var got struct {
			Type string `json:"type"`
			Data struct {
				Project, Environment, URL string
				Run                       struct {
					ID     int64
					Status string
				}
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(b), &got); err != nil {
			t.Fatalf("body is not JSON: %v", err)
		}
		types = append(types, got.Type)
		wantURL := "https://studio.example.test/projects/plain/environments/production/runs/"
		if got.Data.Project != "plain" || got.Data.Environment != "production" || got.Data.Run.ID != run.ID ||
			!strings.HasPrefix(got.Data.URL, wantURL) {
			t.Errorf("body %s: want project plain, environment production, run %d and a link under %s", b, run.ID, wantURL)
		}
	}
	// Deliveries are independent jobs: a retried one may succeed after a
	// later event's (receivers order by the body's timestamp).
	slices.Sort(types)
	if strings.Join(types, ",") != "deploy.started,deploy.succeeded" {
		t.Errorf("event types %v, want deploy.started and deploy.succeeded", types)
	}
	if reqs, _, _ := quiet.snapshot(); len(reqs) != 0 {
		t.Errorf("an endpoint that chose only certificate events received %d deploy messages", len(reqs))
	}
	if qd, err := f.db.WebhookDeliveries(f.ctx, []int64{quietEp.ID}, 10); err != nil || len(qd) != 0 {
		t.Errorf("quiet endpoint deliveries %d (%v), want none", len(qd), err)
	}
	var completed int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM river_job WHERE kind = 'studio_webhook' AND state = 'completed'`).Scan(&completed); err != nil {
		t.Fatal(err)
	}
	if completed != 2 {
		t.Errorf("%d webhook jobs completed, want 2 (one per delivery)", completed)
	}
}

// silentEndpoint is a webhook endpoint that reads each request and never
// answers it until let go (then 200); arrived is closed at its first
// request.
type silentEndpoint struct {
	srv        *httptest.Server
	arrived    chan struct{}
	gone       chan struct{}
	arriveOnce sync.Once
	goneOnce   sync.Once
}

func newSilentEndpoint(t *testing.T) *silentEndpoint {
	s := &silentEndpoint{arrived: make(chan struct{}), gone: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.arriveOnce.Do(func() { close(s.arrived) })
		select {
		case <-r.Context().Done():
		case <-s.gone:
		}
	}))
	t.Cleanup(s.srv.Close)
	t.Cleanup(s.letGo) // before the server closes: Close waits for its requests
	return s
}

// letGo makes the endpoint answer the requests it holds, and the next ones.
func (s *silentEndpoint) letGo() { s.goneOnce.Do(func() { close(s.gone) }) }

// afterSilent answers with h only once the silent endpoint holds a
// request: a request to it is in flight at the same time as that one.
func (s *silentEndpoint) afterSilent(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-s.arrived:
			h.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	})
}

// An endpoint that never answers fails each attempt at the timeout, and
// its final failure turns it off. The timeout is short: a slower machine
// only makes the endpoint look more silent.
func TestWebhookSilentEndpointTimesOutAndIsTurnedOff(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	silent := newSilentEndpoint(t)
	silentEp, _ := f.addEndpoint(silent.srv.URL, store.WebhookFormatStandard, store.WebhookDeploySucceeded)

	startWebhookRiver(t, f.svc, runs.WebhookOptions{Backoff: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond},
		Timeout: 300 * time.Millisecond, AllowNetworks: testReceivers})
	run := f.deploy(runs.DeployRequest{})
	waitFinished(t, f.db, []int64{run.ID})

	sd := waitDeliveries(t, f.db, silentEp.ID, 1)
	if d := sd[0]; d.Status != store.WebhookFailed || d.Attempts != 3 || d.ResponseCode != nil || !strings.Contains(d.LastError, "did not answer within 300ms") {
		t.Errorf("silent endpoint: %s, %d attempts, code %v, error %q; want failed after 3 attempts that timed out", d.Status, d.Attempts, d.ResponseCode, d.LastError)
	}
	ep, err := f.db.WebhookEndpointByID(f.ctx, silentEp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ep.DisabledAt == nil || !strings.Contains(ep.DisabledReason, "did not answer") {
		t.Errorf("silent endpoint after a final failure: disabled %v (%q), want turned off with the reason", ep.DisabledAt, ep.DisabledReason)
	}
}

// While an endpoint holds its request, the other endpoints' deliveries of
// the same event are made and recorded: a healthy one succeeds at its
// first attempt, a redirect is not followed. The timeout is long, so that
// only an endpoint that holds the others could keep them from ending.
func TestWebhookSilentEndpointDoesNotHoldOthers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	silent := newSilentEndpoint(t)
	silentEp, _ := f.addEndpoint(silent.srv.URL, store.WebhookFormatStandard, store.WebhookDeploySucceeded)

	hits := 0
	var hitsMu sync.Mutex
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hitsMu.Lock()
		hits++
		hitsMu.Unlock()
	}))
	t.Cleanup(target.Close)
	redirecting := httptest.NewServer(silent.afterSilent(http.RedirectHandler(target.URL+"/elsewhere", http.StatusFound)))
	t.Cleanup(redirecting.Close)
	redirectEp, _ := f.addEndpoint(redirecting.URL, store.WebhookFormatStandard, store.WebhookDeploySucceeded)

	healthy := &receiver{t: t, answer: func(int) int { return http.StatusNoContent }, requests: map[string]int{}}
	healthy.srv = httptest.NewServer(silent.afterSilent(http.HandlerFunc(healthy.serve)))
	t.Cleanup(healthy.srv.Close)
	healthyEp, secret := f.addEndpoint(healthy.srv.URL, store.WebhookFormatSlack, store.WebhookDeploySucceeded)
	healthy.secret = secret

	startWebhookRiver(t, f.svc, runs.WebhookOptions{Backoff: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond},
		Timeout: time.Minute, AllowNetworks: testReceivers})
	run := f.deploy(runs.DeployRequest{})
	waitFinished(t, f.db, []int64{run.ID})

	hd := waitDeliveries(t, f.db, healthyEp.ID, 1)
	rd := waitDeliveries(t, f.db, redirectEp.ID, 1)
	// Both ended while the silent endpoint still holds its request.
	sd, err := f.db.WebhookDeliveries(f.ctx, []int64{silentEp.ID}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(sd) != 1 || sd[0].Status != store.WebhookPending || sd[0].Attempts != 0 || sd[0].InFlightSince == nil {
		t.Fatalf("silent endpoint's deliveries once the others ended: %+v; want one whose first attempt is still in flight", sd)
	}
	if hd[0].Status != store.WebhookSucceeded || hd[0].Attempts != 1 {
		t.Errorf("healthy endpoint: %s after %d attempts, want succeeded at once", hd[0].Status, hd[0].Attempts)
	}
	_, bodies, _ := healthy.snapshot()
	if len(bodies) != 1 || !strings.HasPrefix(bodies[0], `{"text":"`) || !strings.Contains(bodies[0], "Deploy succeeded: plain/production") {
		t.Errorf("slack body %q, want {\"text\": ...} naming the deploy", bodies)
	}
	if d := rd[0]; d.Status != store.WebhookFailed || d.ResponseCode == nil || *d.ResponseCode != http.StatusFound || !strings.Contains(d.LastError, "not followed") {
		t.Errorf("redirecting endpoint: %s, code %v, error %q; want failed with 302 not followed", d.Status, d.ResponseCode, d.LastError)
	}
	hitsMu.Lock()
	if hits != 0 {
		t.Errorf("the redirect's target was sent %d requests, want none", hits)
	}
	hitsMu.Unlock()

	// Let go, the silent endpoint answers the attempt it held.
	silent.letGo()
	if d := waitDeliveries(t, f.db, silentEp.ID, 1)[0]; d.Status != store.WebhookSucceeded || d.Attempts != 1 {
		t.Errorf("silent endpoint once it answered: %s after %d attempts (%s), want succeeded at its first", d.Status, d.Attempts, d.LastError)
	}
}

// TestADeployWithDeferredRoutesSaysWhichAndWhoInItsWebhook: the
// deploy.succeeded_with_warnings event of a deploy whose route waits for
// DNS names the deferred hostnames and who started the deploy, in the
// standard body and in the chat line.
func TestADeployWithDeferredRoutesSaysWhichAndWhoInItsWebhook(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("www.wiki.test", here)
	ep, _ := f.addEndpoint("https://hooks.example.test/studio", store.WebhookFormatSlack, store.WebhookDeploySucceededWithWarnings)
	ada, err := f.db.UpsertSignIn(f.ctx, "https://idp.example", "ada", "ada@example.test", "Ada Admin", true)
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.svc.StartDeploy(f.ctx, store.Actor{User: ada}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	if got := f.run(run.ID).Status; got != store.RunSucceededWithWarnings {
		t.Fatalf("run %s, want succeeded-with-warnings", got)
	}
	ds, err := f.db.WebhookDeliveries(f.ctx, []int64{ep.ID}, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("%d deliveries (%v), want 1", len(ds), err)
	}
	r := ds[0].Data.Run
	if r == nil || strings.Join(r.Deferred, ",") != "wiki.test" || r.StartedBy != "Ada Admin" {
		t.Fatalf("the event's run = %+v, want wiki.test deferred and who started it", r)
	}
	body, err := runs.WebhookBody(store.WebhookFormatSlack, &ds[0], "https://studio.example.test")
	if err != nil || !strings.Contains(string(body), "Deferred (DNS pending): wiki.test") || !strings.Contains(string(body), "started by "+r.StartedBy) {
		t.Errorf("the chat line = %s (%v), want the deferred hostname and who started it", body, err)
	}
	body, _ = runs.WebhookBody(store.WebhookFormatStandard, &ds[0], "https://studio.example.test")
	if !strings.Contains(string(body), `"deferred":["wiki.test"]`) || !strings.Contains(string(body), `"started_by":`) {
		t.Errorf("the standard body = %s, want deferred and started_by", body)
	}
}
