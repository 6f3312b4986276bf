package runs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// A rule that asks for fewer approvals starts the waiting runs that have
// enough already, in the rule change's transaction (their River job
// inserted there); a run with too few keeps waiting, until the rule is
// removed.
func TestLoweringRequiredApprovalsStartsRunsThatHaveEnough(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	p := f.people("alice", "bob", "carol")
	alice, bob := p[0], p[1]
	rule := store.ProtectionRule{Approvals: 2, ApproverRole: store.RoleDeployer, Expires: store.DefaultApprovalExpiry, Bypass: store.BypassNobody}
	f.protect(rule)
	svc := runs.NewService(f.db, f.vault, f.local, time.Now, nil)
	startRiver(t, svc)

	approved, err := svc.StartDeploy(f.ctx, store.Actor{User: alice}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := svc.Approve(f.ctx, store.Actor{User: bob}, f.env, approved.ID, approved.PlanDigest, ""); err != nil || out.Started || out.Count != 1 {
		t.Fatalf("first approval: %v %+v, want 1 of 2, waiting", err, out)
	}
	if got := f.run(approved.ID); got.JobID != nil {
		t.Fatal("a run with 1 of 2 approvals has a job")
	}

	rule.Approvals = 1
	if err := svc.PutProtection(f.ctx, store.Actor{User: alice}, f.env, rule); err != nil {
		t.Fatal(err)
	}
	if got := f.run(approved.ID); got.JobID == nil {
		t.Fatal("the rule now asks for 1 approval, and the run that has 1 has no job")
	}
	waitFinished(t, f.db, []int64{approved.ID})
	if got := f.run(approved.ID); got.Status != store.RunSucceeded {
		t.Fatalf("run %s (%s), want succeeded", got.Status, got.Reason)
	}
	var n int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM run_checkpoints WHERE run_id = $1 AND kind = 'activate' AND status = 'succeeded'`, approved.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("activations %d %v, want 1", n, err)
	}
	var byRule bool
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT (detail->>'by_rule_change')::boolean FROM audit_events WHERE action = 'approval.granted' AND target = $1 AND detail ? 'by_rule_change'`,
		fmt.Sprintf("run %d", approved.ID)).Scan(&byRule); err != nil || !byRule {
		t.Fatalf("no audit record says the rule change started the run (%v)", err)
	}

	// A run with no approval keeps waiting when the rule changes again.
	waiting, err := svc.StartDeploy(f.ctx, store.Actor{User: alice}, f.reloadEnv(), runs.DeployRequest{Redeploy: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.PutProtection(f.ctx, store.Actor{User: alice}, f.env, rule); err != nil {
		t.Fatal(err)
	}
	if got := f.run(waiting.ID); got.Status != store.RunWaiting || got.JobID != nil {
		t.Fatalf("a run with no approval: %s, job %v, want waiting with no job", got.Status, got.JobID)
	}
	// Removing the protection starts it: nothing waits for approval any more.
	if err := svc.DeleteProtection(f.ctx, store.Actor{User: alice}, f.env); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, f.db, []int64{waiting.ID})
	if got := f.run(waiting.ID); got.Status != store.RunSucceeded {
		t.Fatalf("after the protection was removed the waiting run is %s (%s), want succeeded", got.Status, got.Reason)
	}
}

// The approval that meets the rule reads the freeze windows in its own
// transaction: a change of the windows in flight makes it wait, and the
// run is scheduled by the windows that change committed. The windows are
// also those open when the rule's wait ends, not only now.
func TestTheApprovalThatMeetsTheRuleReadsTheWindowsInItsTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	p := f.people("alice", "bob")
	f.protect(store.ProtectionRule{Approvals: 1, ApproverRole: store.RoleDeployer, Wait: time.Hour})
	svc := runs.NewService(f.db, f.vault, f.local, time.Now, nil)
	startRiver(t, svc)
	run, err := svc.StartDeploy(f.ctx, store.Actor{User: p[0]}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}

	// A change of the windows, in flight: it holds the environment's row
	// as PutFreezeWindows does, and writes a window that opens in 30 min
	// (before the rule's hour of wait ends) and closes in 3 h.
	tx, err := f.db.Pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(f.ctx, `SELECT 1 FROM environments WHERE id = $1 FOR NO KEY UPDATE`, f.env.ID); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(3 * time.Hour).Truncate(time.Minute)
	if _, err := tx.Exec(f.ctx, `INSERT INTO freeze_windows (environment_id, position, starts_at, ends_at) VALUES ($1, 1, $2, $3)`,
		f.env.ID, time.Now().Add(30*time.Minute), end); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out *store.ApprovalOutcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := svc.Approve(f.ctx, store.Actor{User: p[1]}, f.env, run.ID, run.PlanDigest, "")
		done <- result{out, err}
	}()
	// The approval waits for the change (its lock on the environment), in
	// this test's database: other tests' approvals run beside it.
	waitUntil(t, func() bool {
		var waiting bool
		f.db.Pool.QueryRow(f.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%environments%FOR SHARE%')`).Scan(&waiting)
		return waiting
	})
	select {
	case r := <-done:
		t.Fatalf("the approval did not wait for the change of the windows: %+v %v", r.out, r.err)
	default:
	}
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !r.out.Started || !r.out.StartsAt.Equal(end) {
		t.Fatalf("approval: %v %+v, want started at the new window's end %v", r.err, r.out, end)
	}
	if at, ok, err := f.db.RunJobScheduledAt(f.ctx, run.ID); err != nil || !ok || !at.Equal(end) {
		t.Fatalf("job at %v (%v %v), want %v", at, ok, err, end)
	}
	if got := f.run(run.ID); !strings.HasPrefix(got.Reason, "Frozen until ") {
		t.Fatalf("the approved run's reason %q does not say it waits for the window", got.Reason)
	}
}

// The approval that meets a rule with a wait says when the run starts.
func TestAnApprovedRunSaysWhenTheRulesWaitEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	p := f.people("alice", "bob")
	f.protect(store.ProtectionRule{Approvals: 1, ApproverRole: store.RoleDeployer, Wait: 2 * time.Hour})
	svc := runs.NewService(f.db, f.vault, f.local, time.Now, nil)
	startRiver(t, svc)
	run, err := svc.StartDeploy(f.ctx, store.Actor{User: p[0]}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := svc.Approve(f.ctx, store.Actor{User: p[1]}, f.env, run.ID, run.PlanDigest, "")
	if err != nil || !out.Started {
		t.Fatalf("approve: %v %+v", err, out)
	}
	want := "Approved: starts at " + out.StartsAt.UTC().Format("Mon 15:04 UTC") + ", after the rule's wait"
	if got := f.run(run.ID); got.Status != store.RunWaiting || got.Reason != want {
		t.Fatalf("run %s, reason %q, want waiting with %q", got.Status, got.Reason, want)
	}
}

// waitUntil polls cond until it holds, giving up after a minute.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("gave up waiting")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
