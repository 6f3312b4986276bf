package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/store"
)

// hookReceiver records the webhook deliveries it gets, in arrival order,
// with whether their Standard Webhooks signature is right.
type hookReceiver struct {
	srv    *httptest.Server
	secret string
	mu     sync.Mutex
	got    []hookDelivery
}

type hookDelivery struct {
	id, event string
	at        time.Time
	signed    bool
}

func newHookReceiver(t *testing.T) *hookReceiver {
	rc := &hookReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p struct {
			Type      string    `json:"type"`
			Timestamp time.Time `json:"timestamp"`
		}
		json.Unmarshal(body, &p)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		for _, d := range rc.got {
			if d.id == id {
				return // a delivery sent again: counted once
			}
		}
		rc.got = append(rc.got, hookDelivery{id: id, event: p.Type, at: p.Timestamp, signed: standardSignatureOK(rc.secret, id, ts, body, r.Header.Get("webhook-signature"))})
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *hookReceiver) deliveries() []hookDelivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hookDelivery(nil), rc.got...)
}

// standardSignatureOK checks a webhook-signature header as the Standard
// Webhooks libraries do, written here apart from the sender's code.
func standardSignatureOK(secret, id, ts string, body []byte, header string) bool {
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

// TestProtectedProductionAsTheIssueChecksIt follows issue 40's "How it
// will be checked" through the built binary (`studio serve`, `studio
// deploy`, `studio runs approve`, `studio values import`, the API and the
// pages), with three people (Alice deploys, Bob and Carol approve) and an
// admin: production needs 2 approvals without self-approval; a deploy
// waits, is approved once (still waiting), a value changes, the second
// approval starts it and the runner voids the approvals, the run page
// saying which value; approved twice again, it runs; a second deploy is
// rejected; the inbox lists what waits; the webhook events arrive signed
// and in order. (Freeze windows with kill -9: protect_kill_test.go.)
func TestProtectedProductionAsTheIssueChecksIt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Studio processes")
	}
	ctx := context.Background()
	db, dbURL, key := newKilledEnvironment(t)
	env, err := db.EnvironmentByName(ctx, "killed", "production")
	if err != nil {
		t.Fatal(err)
	}
	token := func(subject string, role store.Role) string {
		u, err := db.UpsertSignIn(ctx, "https://idp.example", subject, subject+"@example.test", subject, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.AddMember(ctx, store.Actor{}, env, u.Email, role); err != nil {
			t.Fatal(err)
		}
		_, tok, err := db.CreateToken(ctx, store.Actor{User: u}, store.NewToken{Name: subject, Scope: []store.TokenGrant{{EnvironmentID: env.ID, Role: role}}, Days: 1})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	alice, bob, carol, admin := token("Alice", store.RoleDeployer), token("Bob", store.RoleDeployer), token("Carol", store.RoleDeployer), token("Erin", store.RoleAdmin)
	hooks := newHookReceiver(t)
	keys, err := store.OpenKeyring(ctx, db, store.KeyringOptions{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := store.NewVault(db, keys).CreateWebhookEndpoint(ctx, store.Actor{}, env, store.NewWebhookEndpoint{URL: hooks.srv.URL + "/hook",
		Events: []string{store.WebhookApprovalRequested, store.WebhookApprovalGranted, store.WebhookApprovalRejected, store.WebhookDeploySucceeded}, Format: store.WebhookFormatStandard})
	if err != nil {
		t.Fatal(err)
	}
	hooks.secret = secret
	studio := startStudio(t, dbURL, key, "--local-step-delay", "30ms", "--webhook-allow-networks", "127.0.0.1/32")
	api := func(tok, method, path, body string) (int, string) {
		t.Helper()
		return apiCall(t, studio, tok, method, "/projects/killed/environments/production"+path, body)
	}
	status := func(runID int64) string {
		var s string
		db.Pool.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1`, runID).Scan(&s)
		return s
	}

	// The admin protects production: 2 approvals by deployers, not self.
	if code, body := api(admin, "PUT", "/protection", `{"approvals": 2, "approvers": ["deployer"], "self_approval": false, "expires": "7d", "bypass": "nobody"}`); code != http.StatusOK {
		t.Fatalf("protect: %d %s", code, body)
	}
	if code, body := api(admin, "PUT", "/protection", `{"approvals": 6, "approvers": ["deployer"]}`); code != http.StatusUnprocessableEntity ||
		!strings.Contains(body, "This rule asks for 6 approvals, but production has only 4 members who may approve.") {
		t.Fatalf("a rule asking too much: %d %s", code, body)
	}

	// Alice deploys: it waits; her --approval-timeout exits 4.
	r := studioCLI(t, alice, "deploy", "--url", studio.addr, "--project", "killed", "--env", "production", "--wait", "--poll", "100ms", "--approval-timeout", "1s")
	if r.code != 4 || !strings.Contains(r.stdout, "waiting for approval (0 of 2: may approve: ") {
		t.Fatalf("alice's deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var runID int64
	if err := db.Pool.QueryRow(ctx, `SELECT id FROM runs`).Scan(&runID); err != nil {
		t.Fatal(err)
	}
	runURL := fmt.Sprintf("%s/projects/killed/environments/production/runs/%d", studio.addr, runID)

	// The inbox of the installation admin (the local one, who counts for
	// the deployer role) lists it, and the navigation counts it.
	c := signedIn(t, studio)
	inbox := getPage(t, c, studio.addr+"/approvals")
	if !strings.Contains(inbox, fmt.Sprintf("/runs/%d", runID)) || !strings.Contains(inbox, "data-approvals-count") {
		t.Fatalf("the inbox does not list the waiting run or count it:\n%s", inbox)
	}

	if r := studioCLI(t, alice, "runs", "approve", runURL); r.code != 2 || !strings.Contains(r.stderr, "someone else must approve it") {
		t.Fatalf("alice approves her own deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := studioCLI(t, bob, "runs", "approve", "--comment", "looks right", runURL); r.code != 0 || !strings.Contains(r.stdout, "Approved run") {
		t.Fatalf("bob approves: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := studioCLI(t, bob, "runs", "approve", runURL); r.code != 2 || !strings.Contains(r.stderr, "approved run") {
		t.Fatalf("bob approves twice: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if s := status(runID); s != store.RunWaiting {
		t.Fatalf("after one approval of two the run is %s", s)
	}

	// The admin changes API_TOKEN before Carol approves: her approval
	// meets the rule, and the runner finds the plan changed.
	dotenv := filepath.Join(t.TempDir(), "prod.env")
	os.WriteFile(dotenv, []byte("API_TOKEN=n3w-t0ken\n"), 0o600)
	if r := studioCLI(t, admin, "values", "import", "--url", studio.addr, "--project", "killed", "--env", "production", dotenv); r.code != 0 {
		t.Fatalf("values import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := studioCLI(t, carol, "runs", "approve", runURL); r.code != 0 {
		t.Fatalf("carol approves: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var page string
	waitFor(t, func() bool {
		page = getPage(t, c, runURL)
		return status(runID) == store.RunWaiting && strings.Contains(page, "value API_TOKEN changed: version 1 → 2")
	})
	if !strings.Contains(page, `data-run-status="waiting"`) || strings.Contains(page, "n3w-t0ken") || strings.Contains(page, "t0ken\"") {
		t.Fatal("the run page after the approvals were void does not show the run waiting, or shows a value")
	}
	if aps, _ := db.Approvals(ctx, runID); len(aps) != 0 {
		t.Fatalf("%d approvals left after the plan changed, want none", len(aps))
	}

	// Approved again by both, it runs; Alice's CLI follows it to the end.
	for _, tok := range []string{bob, carol} {
		if r := studioCLI(t, tok, "runs", "approve", runURL); r.code != 0 {
			t.Fatalf("approve again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	if r := studioCLI(t, alice, "runs", "watch", "--poll", "100ms", runURL); r.code != 0 || !strings.Contains(r.stdout, "succeeded") {
		t.Fatalf("watch: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	checkApprovedRunSucceededOnce(t, db, runID)

	// A second deploy, rejected by Carol with a comment.
	if r := studioCLI(t, alice, "deploy", "--url", studio.addr, "--project", "killed", "--env", "production", "--redeploy"); r.code != 0 {
		t.Fatalf("second deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var second int64
	if err := db.Pool.QueryRow(ctx, `SELECT max(id) FROM runs`).Scan(&second); err != nil || second == runID {
		t.Fatalf("no second run (%v)", err)
	}
	if code, body := api(carol, "POST", fmt.Sprintf("/runs/%d/reject", second), `{"comment": "not on a Friday"}`); code != http.StatusOK {
		t.Fatalf("reject: %d %s", code, body)
	}
	if s := status(second); s != store.RunRejected {
		t.Fatalf("the rejected run is %s", s)
	}
	if page := getPage(t, c, fmt.Sprintf("%s/projects/killed/environments/production/runs/%d", studio.addr, second)); !strings.Contains(page, "Rejected by Carol: not on a Friday") {
		t.Fatal("the rejected run's page does not say who rejected it and why")
	}
	if inbox := getPage(t, c, studio.addr+"/approvals"); strings.Contains(inbox, fmt.Sprintf("/runs/%d\"", second)) || strings.Contains(inbox, "data-approvals-count") {
		t.Fatal("the inbox still lists a run or a count after everything was decided")
	}

	// The webhook events, signed, in the order things happened: the
	// body's timestamp (the change's, to the microsecond) orders them;
	// deliveries are sent concurrently, so two moments apart may arrive
	// in either order.
	want := []string{"approval.requested", "approval.granted", "approval.granted", "approval.requested", "approval.granted", "approval.granted",
		"deploy.succeeded", "approval.requested", "approval.rejected"}
	var got []hookDelivery
	waitFor(t, func() bool { got = hooks.deliveries(); return len(got) >= len(want) })
	slices.SortStableFunc(got, func(a, b hookDelivery) int { return a.at.Compare(b.at) })
	var events []string
	for _, d := range got {
		events = append(events, d.event)
		if !d.signed {
			t.Errorf("%s (%s) is not signed with the endpoint's secret", d.event, d.id)
		}
	}
	if strings.Join(events, " ") != strings.Join(want, " ") {
		t.Fatalf("webhook events:\n got %v\nwant %v", events, want)
	}
}
