package runs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// windows checks in as the protection page and the API do.
func windows(t *testing.T, in ...runs.FreezeInput) []store.FreezeWindow {
	t.Helper()
	ws, err := runs.CheckFreezeWindows(in)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// A deploy waits for a freeze window's end. The admin extends the window:
// the run now waits for the new end (its job moved, its reason and a run
// event say so, the audit record names it), and Check now does not start
// it. The admin lifts the freeze: the run starts at once, and runs once.
func TestChangingAFreezeWindowMovesTheRunsThatWaitForIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	p := f.people("alice")
	svc := runs.NewService(f.db, f.vault, f.local, time.Now, nil)
	startRiver(t, svc)
	from := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	end := time.Now().Add(time.Hour).Truncate(time.Minute)
	if err := svc.PutFreezeWindows(f.ctx, store.Actor{User: p[0]}, f.env, windows(t, runs.FreezeInput{From: from, To: end.UTC().Format(time.RFC3339), Action: "wait"})); err != nil {
		t.Fatal(err)
	}
	run, err := svc.StartDeploy(f.ctx, store.Actor{User: p[0]}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if at, ok, err := f.db.RunJobScheduledAt(f.ctx, run.ID); err != nil || !ok || !at.Equal(end) {
		t.Fatalf("job at %v (%v %v), want the window's end %v", at, ok, err, end)
	}

	// Extended by two hours.
	later := end.Add(2 * time.Hour)
	if err := svc.PutFreezeWindows(f.ctx, store.Actor{User: p[0]}, f.env, windows(t, runs.FreezeInput{From: from, To: later.UTC().Format(time.RFC3339), Action: "wait"})); err != nil {
		t.Fatal(err)
	}
	if at, ok, err := f.db.RunJobScheduledAt(f.ctx, run.ID); err != nil || !ok || !at.Equal(later) {
		t.Fatalf("after the window was extended the job is at %v (%v %v), want its new end %v", at, ok, err, later)
	}
	// The job it had is cancelled: one job is left to start it.
	var cancelled, live int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FILTER (WHERE state = 'cancelled'), count(*) FILTER (WHERE state <> 'cancelled')
		FROM river_job WHERE kind = 'studio_run' AND (args->>'run_id')::bigint = $1`, run.ID).Scan(&cancelled, &live); err != nil || cancelled != 1 || live != 1 {
		t.Fatalf("the run's jobs: %d cancelled, %d not (%v); want the first cancelled and one left", cancelled, live, err)
	}
	// Check now wakes the deploys that wait for a domain, not one that
	// waits for a freeze's end.
	if _, err := svc.CheckNow(f.ctx, store.Actor{User: p[0]}, f.reloadEnv(), ""); err != nil {
		t.Fatal(err)
	}
	var state string
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT j.state FROM runs r JOIN river_job j ON j.id = r.job_id WHERE r.id = $1`, run.ID).Scan(&state); err != nil || state != "scheduled" {
		t.Fatalf("after Check now the frozen run's job is %q (%v), want still scheduled at the window's end", state, err)
	}
	if at, ok, err := f.db.RunJobScheduledAt(f.ctx, run.ID); err != nil || !ok || !at.Equal(later) {
		t.Fatalf("after Check now the frozen run's job is at %v (%v %v), want %v", at, ok, err, later)
	}
	want := "Frozen until " + runs.FreezeClock(later, time.Now())
	if got := f.run(run.ID); got.Status != store.RunWaiting || got.Reason != want {
		t.Fatalf("after the window was extended the run is %s, %q; want waiting, %q", got.Status, got.Reason, want)
	}
	var events int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM run_events WHERE run_id = $1 AND payload->'run'->>'reason' = $2`, run.ID, want).Scan(&events); err != nil || events != 1 {
		t.Fatalf("%d run events say %q (%v), want 1 (a watching page learns it live)", events, want, err)
	}
	var moved string
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT detail->>'moved_runs' FROM audit_events WHERE action = 'freeze.changed' ORDER BY id DESC LIMIT 1`).Scan(&moved); err != nil ||
		!strings.Contains(moved, later.UTC().Format(time.RFC3339)) {
		t.Fatalf("the freeze change's audit record names the moved runs as %q (%v), want the run and its new start", moved, err)
	}

	// Lifted.
	lifted := time.Now()
	if err := svc.PutFreezeWindows(f.ctx, store.Actor{User: p[0]}, f.env, nil); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, f.db, []int64{run.ID})
	got := f.run(run.ID)
	if got.Status != store.RunSucceeded || got.StartedAt == nil || got.StartedAt.Before(lifted) {
		t.Fatalf("after the freeze was lifted the run is %s (%s), started %v; want succeeded, started after %v", got.Status, got.Reason, got.StartedAt, lifted)
	}
	var activations int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM run_checkpoints WHERE run_id = $1 AND kind = 'activate' AND status = 'succeeded'`, run.ID).Scan(&activations); err != nil || activations != 1 {
		t.Fatalf("activations %d %v, want 1", activations, err)
	}
}

// A protected run approved in a freeze window, its rule asking for an hour
// after approval: lifting the freeze moves it to the approval plus that
// hour, not sooner; a window shortened to end before that hour does the
// same, and a window added over that start holds it to the window's end;
// a run that waits for its approval has no job and is not touched.
func TestLiftingAFreezeKeepsTheRulesWaitAfterApproval(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	p := f.people("alice", "bob")
	f.protect(store.ProtectionRule{Approvals: 1, ApproverRole: store.RoleDeployer, Wait: time.Hour})
	svc := runs.NewService(f.db, f.vault, f.local, time.Now, nil)
	startRiver(t, svc)
	from := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	end := time.Now().Add(3 * time.Hour).Truncate(time.Minute)
	if err := svc.PutFreezeWindows(f.ctx, store.Actor{User: p[0]}, f.env, windows(t, runs.FreezeInput{From: from, To: end.UTC().Format(time.RFC3339), Action: "wait"})); err != nil {
		t.Fatal(err)
	}
	run, err := svc.StartDeploy(f.ctx, store.Actor{User: p[0]}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Changing the windows while it waits for its approval: no job, no
	// reason to move.
	if err := svc.PutFreezeWindows(f.ctx, store.Actor{User: p[0]}, f.env, windows(t, runs.FreezeInput{From: from, To: end.UTC().Format(time.RFC3339), Action: "wait"})); err != nil {
		t.Fatal(err)
	}
	if got := f.run(run.ID); got.JobID != nil || got.Status != store.RunWaiting {
		t.Fatalf("a run waiting for its approval is %s with a job %v after a freeze change", got.Status, got.JobID)
	}
	out, err := svc.Approve(f.ctx, store.Actor{User: p[1]}, f.env, run.ID, run.PlanDigest, "")
	if err != nil || !out.Started || !out.StartsAt.Equal(end) {
		t.Fatalf("approval: %v %+v, want started at the window's end %v", err, out, end)
	}
	var approvedAt time.Time
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT created_at FROM run_approvals WHERE run_id = $1`, run.ID).Scan(&approvedAt); err != nil {
		t.Fatal(err)
	}
	floor := approvedAt.Add(time.Hour)

	for _, change := range []struct {
		name    string
		windows []store.FreezeWindow
	}{
		{"shortened to end in ten minutes", windows(t, runs.FreezeInput{From: from, To: time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339), Action: "wait"})},
		{"lifted", nil},
	} {
		if err := svc.PutFreezeWindows(f.ctx, store.Actor{User: p[0]}, f.env, change.windows); err != nil {
			t.Fatal(err)
		}
		at, ok, err := f.db.RunJobScheduledAt(f.ctx, run.ID)
		if err != nil || !ok || at.Sub(floor).Abs() > time.Second {
			t.Fatalf("freeze %s: the job is at %v (%v %v), want the approval plus the rule's hour, %v", change.name, at, ok, err, floor)
		}
		if got := f.run(run.ID); got.Status != store.RunWaiting || !strings.HasPrefix(got.Reason, "Approved: starts at ") {
			t.Fatalf("freeze %s: the run is %s, %q; want waiting for the rule's wait", change.name, got.Status, got.Reason)
		}
	}
	// A window added over that start holds it until the window's end.
	end = floor.Add(2 * time.Hour).Truncate(time.Minute)
	if err := svc.PutFreezeWindows(f.ctx, store.Actor{User: p[0]}, f.env, windows(t, runs.FreezeInput{From: from, To: end.UTC().Format(time.RFC3339), Action: "wait"})); err != nil {
		t.Fatal(err)
	}
	if at, ok, err := f.db.RunJobScheduledAt(f.ctx, run.ID); err != nil || !ok || !at.Equal(end) {
		t.Fatalf("a window added over the run's start: the job is at %v (%v %v), want the window's end %v", at, ok, err, end)
	}
	if got := f.run(run.ID); got.Reason != "Frozen until "+runs.FreezeClock(end, time.Now()) {
		t.Fatalf("a window added over the run's start: its reason is %q", got.Reason)
	}
}
