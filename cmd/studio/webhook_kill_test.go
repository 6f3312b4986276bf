package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/store"
)

// slowReceiver is a webhook endpoint that holds its first request until
// the sender goes away, and answers 200 to every later one.
type slowReceiver struct {
	srv   *httptest.Server
	first chan struct{}
	mu    sync.Mutex
	ids   []string
	at    []time.Time
}

func newSlowReceiver(t *testing.T) *slowReceiver {
	r := &slowReceiver{first: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.ids = append(r.ids, req.Header.Get("webhook-id"))
		r.at = append(r.at, time.Now())
		n := len(r.ids)
		r.mu.Unlock()
		if n == 1 {
			close(r.first)
			<-req.Context().Done() // the sender went away
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *slowReceiver) requests() ([]string, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...), append([]time.Time(nil), r.at...)
}

// getPage returns the body of a page the signed-in client c reads.
func getPage(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	return string(b)
}

// TestAWebhookInFlightWhenItsStudioIsKilledIsSentAgainWithinAMinute points
// an endpoint at a receiver that holds its first request, deploys, and
// kills the Studio with SIGKILL while the receiver holds the delivery of
// "deploy succeeded": while it is held, the webhooks page shows the attempt
// in flight (not "pending, 0 attempts"); after the kill, the next Studio
// process sends it again within a minute (River's own rescue would take 15),
// with the same webhook-id, once, and the page shows it succeeded at its
// second attempt, the first one said to have been lost with its process.
func TestAWebhookInFlightWhenItsStudioIsKilledIsSentAgainWithinAMinute(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Studio processes")
	}
	ctx := context.Background()
	db, dbURL, key := newKilledEnvironment(t)
	recv := newSlowReceiver(t)
	keys, err := store.OpenKeyring(ctx, db, store.KeyringOptions{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	vault := store.NewVault(db, keys)
	env, err := db.EnvironmentByName(ctx, "killed", "production")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := vault.CreateWebhookEndpoint(ctx, store.Actor{}, env, store.NewWebhookEndpoint{URL: recv.srv.URL + "/hook",
		Events: []string{store.WebhookDeploySucceeded}, Format: store.WebhookFormatStandard}); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--local-step-delay", "50ms", "--webhook-allow-networks", "127.0.0.1/32"}
	first := startStudio(t, dbURL, key, flags...)
	c := signedIn(t, first)
	deployRevision1(t, c, first.addr, db)
	select {
	case <-recv.first:
	case <-time.After(2 * time.Minute):
		t.Fatal("the receiver got no delivery within two minutes of the deploy")
	}
	page := first.addr + "/projects/killed/environments/production/webhooks"
	var body string
	waitFor(t, func() bool {
		body = getPage(t, c, page)
		return strings.Contains(body, "data-delivery-in-flight")
	})
	if !strings.Contains(body, "Attempt 1 in flight since") || !strings.Contains(body, ">sending<") {
		t.Errorf("while the receiver holds the delivery, the webhooks page does not show attempt 1 in flight:\n%s", deliveryRows(body))
	}

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.cmd.Wait()

	// Measured from when the new process serves (starting a -race binary
	// on a starved machine is not the Studio's doing): River alone would
	// rescue the attempt after 15 min.
	second := startStudio(t, dbURL, key, flags...)
	serving := time.Now()
	var ids []string
	var at []time.Time
	waitFor(t, func() bool {
		ids, at = recv.requests()
		return len(ids) >= 2
	})
	after := at[1].Sub(serving)
	t.Logf("sent again %s after the new process served", after.Round(time.Millisecond))
	if after > time.Minute {
		t.Errorf("the delivery was sent again %s after a new Studio served; want within a minute", after.Round(time.Second))
	}
	if ids[0] == "" || ids[1] != ids[0] {
		t.Errorf("webhook-id of the attempts: %q then %q; want the same one, so the receiver can tell the duplicate", ids[0], ids[1])
	}
	var status, lastError string
	var attempts int
	waitFor(t, func() bool {
		db.Pool.QueryRow(ctx, `SELECT status, attempts, last_error FROM webhook_deliveries`).Scan(&status, &attempts, &lastError)
		return status == store.WebhookSucceeded
	})
	if attempts != 2 {
		t.Errorf("the delivery succeeded with %d attempts recorded, want 2 (the lost one and the one that succeeded)", attempts)
	}
	c2 := signedIn(t, second)
	body = getPage(t, c2, second.addr+"/projects/killed/environments/production/webhooks")
	if strings.Contains(body, "data-delivery-in-flight") || !strings.Contains(body, `data-delivery-status="succeeded"`) {
		t.Errorf("after the second attempt, the webhooks page does not show the delivery succeeded:\n%s", deliveryRows(body))
	}
	// Nothing more is sent: River never runs the lost attempt's job again.
	waitFor(t, func() bool {
		var cancelled int
		db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'studio_webhook' AND metadata ? 'cancel_attempted_at'`).Scan(&cancelled)
		return cancelled == 1
	})
	if ids, _ := recv.requests(); len(ids) != 2 {
		t.Errorf("the receiver got %d requests, want 2", len(ids))
	}
}

// deliveryRows is the deliveries table of a webhooks page, for a failure
// message.
func deliveryRows(body string) string {
	i := strings.Index(body, `data-testid="webhook-deliveries"`)
	if i < 0 {
		return "(no deliveries table)"
	}
	j := strings.Index(body[i:], "</table>")
	if j < 0 {
		j = len(body) - i
	}
	return body[i : i+j]
}
