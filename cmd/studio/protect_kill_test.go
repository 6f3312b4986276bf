package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// checkOneActivation checks that the run activated its revision once.
func checkOneActivation(t *testing.T, db *store.DB, runID int64) {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM run_checkpoints WHERE run_id = $1 AND kind = 'activate' AND status = 'succeeded'`, runID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d activations (%v), want 1", n, err)
	}
	var jobs int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'studio_run' AND args->>'run_id' = $1 AND state <> 'cancelled'`, fmt.Sprint(runID)).Scan(&jobs); err != nil || jobs > 1 {
		t.Fatalf("%d River jobs for the run not cancelled (%v), want at most 1 (a job moved by a freeze change is cancelled)", jobs, err)
	}
}

// checkApprovedRunSucceededOnce is checkRunSucceededOnce for a run of a
// protected environment: its Approval checkpoint has the events of its
// waits and its approval, each other checkpoint exactly running and
// succeeded.
func checkApprovedRunSucceededOnce(t *testing.T, db *store.DB, runID int64) {
	t.Helper()
	ctx := context.Background()
	run, err := db.RunByID(ctx, runID)
	if err != nil || run.Status != store.RunSucceeded {
		t.Fatalf("run %v: %v", run, err)
	}
	evs, err := db.RunEventsAfter(ctx, runID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	per := map[int]int{}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i+1, e.Seq)
		}
		if e.Checkpoint != nil {
			per[*e.Checkpoint]++
		}
	}
	cps, _ := db.Checkpoints(ctx, runID)
	for _, cp := range cps {
		if cp.Status != store.CheckpointSucceeded || (cp.Kind != runs.KindApproval && per[cp.Position] != 2) {
			t.Errorf("%s: %s with %d events, want succeeded with 2 (running, succeeded)", cp.Name, cp.Status, per[cp.Position])
		}
	}
}

// TestAFreezeWindowsEndStartsItsRunOnceAfterAKill: a deploy started in a
// freeze window waits, its job scheduled at the window's end; of the two
// `studio serve` replicas, the one that created the run is killed with
// SIGKILL during the window and another starts; when the window ends the
// run starts exactly once, after the end, with every checkpoint run once.
func TestAFreezeWindowsEndStartsItsRunOnceAfterAKill(t *testing.T) {
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
	a, b := startStudio(t, dbURL, key, "--local-step-delay", "100ms"), startStudio(t, dbURL, key, "--local-step-delay", "100ms")
	client := signedIn(t, a)
	// A window of an hour: the kill comes in it, whatever the machine's
	// speed; then an admin shortens it to end in a few seconds.
	from := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	ws, err := runs.CheckFreezeWindows([]runs.FreezeInput{{From: from, To: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutFreezeWindows(ctx, store.Actor{}, env, ws); err != nil {
		t.Fatal(err)
	}
	runID := deployRevision1(t, client, a.addr, db)
	run, err := db.RunByID(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != store.RunWaiting || run.JobID == nil || !strings.HasPrefix(run.Reason, "Frozen until ") {
		t.Fatalf("run %s (%q), job %v: want waiting for the window with a job", run.Status, run.Reason, run.JobID)
	}
	// The run page on the other replica says why it waits.
	if page := getPage(t, client, b.addr+fmt.Sprintf("/projects/killed/environments/production/runs/%d", runID)); !strings.Contains(page, `data-run-status="waiting"`) || !strings.Contains(page, "Frozen until") {
		t.Fatal("the run page does not show the run waiting for the window")
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait()
	startStudio(t, dbURL, key, "--local-step-delay", "100ms")
	// The admin shortens the window on replica b: the waiting run moves to
	// its new end.
	end := time.Now().Add(10 * time.Second).Truncate(time.Second)
	form := url.Values{"section": {"freeze"}, "freeze_cron": {""}, "freeze_duration": {""}, "freeze_from": {from}, "freeze_to": {end.UTC().Format(time.RFC3339)}, "freeze_action": {"wait"}}
	postForm(t, client, b.addr+"/projects/killed/environments/production/protection", form.Encode())
	if saved := time.Now(); saved.Before(end) {
		if at, ok, err := db.RunJobScheduledAt(ctx, runID); err != nil || !ok || !at.Equal(end) {
			t.Fatalf("the shortened window's run is scheduled at %v (%v %v), want its new end %v", at, ok, err, end)
		}
	} else {
		// A starved machine saved the change after the new end: the run is
		// due at once, and still starts once, after it.
		t.Logf("the shortened window ended %v before the change was saved", saved.Sub(end).Round(time.Millisecond))
	}

	waitForRunEnd(t, db, runID)
	checkRunSucceededOnce(t, db, runID)
	checkOneActivation(t, db, runID)
	if run, _ = db.RunByID(ctx, runID); run.StartedAt == nil || run.StartedAt.Before(end) {
		t.Fatalf("the run started at %v, before the window's end %v", run.StartedAt, end)
	}
	t.Logf("the run started %v after the shortened window's end", run.StartedAt.Sub(end).Round(time.Millisecond))
}

// TestAStudioKilledWhileAnApprovalIsWrittenLosesAndDuplicatesNothing: a
// protected production needs 2 approvals, without self-approval. Bob's
// approval is recorded; Carol's, the one that meets the rule, is caught
// inside its transaction (after its row is written, while it reads the
// freeze windows a change holds) and its Studio is killed with SIGKILL.
// Nothing of it stays: the run still waits with one approval and no job.
// Carol approves again on the other replica: the run starts once; Bob's
// second approval is refused as given already.
func TestAStudioKilledWhileAnApprovalIsWrittenLosesAndDuplicatesNothing(t *testing.T) {
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
	token := func(subject string) string {
		u, err := db.UpsertSignIn(ctx, "https://idp.example", subject, subject+"@example.test", subject, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.AddMember(ctx, store.Actor{}, env, u.Email, store.RoleDeployer); err != nil {
			t.Fatal(err)
		}
		_, tok, err := db.CreateToken(ctx, store.Actor{User: u}, store.NewToken{Name: subject, Scope: []store.TokenGrant{{EnvironmentID: env.ID, Role: store.RoleDeployer}}, Days: 1})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	alice, bob, carol := token("alice"), token("bob"), token("carol")
	if err := db.PutProtectionRule(ctx, store.Actor{}, env, store.ProtectionRule{Approvals: 2, ApproverRole: store.RoleDeployer,
		Expires: store.DefaultApprovalExpiry, Bypass: store.BypassNobody}, store.Starter{}); err != nil {
		t.Fatal(err)
	}
	a, b := startStudio(t, dbURL, key, "--local-step-delay", "100ms"), startStudio(t, dbURL, key, "--local-step-delay", "100ms")
	if r := studioCLI(t, alice, "deploy", "--url", a.addr, "--project", "killed", "--env", "production"); r.code != 0 {
		t.Fatalf("deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var runID int64
	if err := db.Pool.QueryRow(ctx, `SELECT id FROM runs`).Scan(&runID); err != nil {
		t.Fatal(err)
	}
	approve := func(s *studioProcess, tok string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/v1/projects/killed/environments/production/runs/%d/approve", s.addr, runID), strings.NewReader(`{"comment": "ok"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body), nil
	}
	if code, body, err := approve(a, bob); err != nil || code != http.StatusOK {
		t.Fatalf("bob's approval: %d %v\n%s", code, err, body)
	}

	// A change of the freeze windows in flight holds the environment's row:
	// Carol's approval, which meets the rule, waits for it inside its
	// transaction, its approval row already written.
	hold, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(context.Background())
	if _, err := hold.Exec(ctx, `SELECT 1 FROM environments WHERE id = $1 FOR NO KEY UPDATE`, env.ID); err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		_, _, err := approve(a, carol)
		sent <- err
	}()
	waitFor(t, func() bool {
		var waiting bool
		db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%environments%FOR SHARE%')`).Scan(&waiting)
		return waiting
	})
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait()
	if err := <-sent; err == nil {
		t.Fatal("carol's approval was answered by a killed Studio")
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The killed process's transaction ends without a commit.
	waitFor(t, func() bool {
		var n int
		db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND (state LIKE 'idle in transaction%' OR wait_event_type = 'Lock')`).Scan(&n)
		return n == 0
	})
	aps, err := db.Approvals(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	run, _ := db.RunByID(ctx, runID)
	if len(aps) != 1 || aps[0].Name != "bob" || run.Status != store.RunWaiting || run.JobID != nil {
		t.Fatalf("after the kill: approvals %+v, run %s job %v; want bob's only, waiting, no job", aps, run.Status, run.JobID)
	}

	// Bob cannot approve twice; Carol approves again on the other replica.
	if code, body, err := approve(b, bob); err != nil || code != http.StatusConflict || !strings.Contains(body, "You approved run") {
		t.Fatalf("bob's second approval: %d %v\n%s", code, err, body)
	}
	if code, body, err := approve(b, carol); err != nil || code != http.StatusOK {
		t.Fatalf("carol's approval on the other replica: %d %v\n%s", code, err, body)
	}
	startStudio(t, dbURL, key, "--local-step-delay", "100ms")
	waitForRunEnd(t, db, runID)
	checkApprovedRunSucceededOnce(t, db, runID)
	checkOneActivation(t, db, runID)
	if aps, _ = db.Approvals(ctx, runID); len(aps) != 2 {
		t.Fatalf("%d approvals, want bob's and carol's", len(aps))
	}
	var granted int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE action = 'approval.granted' AND target = $1`, fmt.Sprintf("run %d", runID)).Scan(&granted); err != nil || granted != 2 {
		t.Fatalf("%d approval.granted audit records (%v), want 2", granted, err)
	}
}
