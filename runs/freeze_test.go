package runs_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

func (f *fixture) freeze(ins ...runs.FreezeInput) {
	f.t.Helper()
	ws, err := runs.CheckFreezeWindows(ins)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.db.PutFreezeWindows(f.ctx, store.Actor{}, f.env, ws); err != nil {
		f.t.Fatal(err)
	}
}

// A deploy started in a freeze window waits, its job scheduled at the
// window's end in its creation transaction; the replica that scheduled it
// is killed, and of two replicas left exactly one starts it, once, after
// the end.
//
// Nothing here depends on how fast the machine is: the first replica
// decides on a clock pinned inside the window, and no replica may take a
// run's job (River's default queue is paused) until the first is gone and
// the two others run.
func TestADeployInAFreezeWindowWaitsAndStartsOnceAtItsEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	p := f.people("alice")
	end := time.Now().Add(6 * time.Second).Truncate(time.Second)
	f.freeze(runs.FreezeInput{From: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), To: end.UTC().Format(time.RFC3339), Action: "wait"})
	// Every River client starts with the queue paused (River keeps the
	// row it finds: ON CONFLICT only touches updated_at).
	if _, err := f.db.Pool.Exec(f.ctx, `INSERT INTO river_queue (name, created_at, metadata, paused_at, updated_at)
		VALUES ('default', now(), '{}', now(), now())`); err != nil {
		t.Fatal(err)
	}

	first := runs.NewService(f.db, f.vault, f.local, func() time.Time { return end.Add(-time.Minute) }, nil)
	first.Runner.Now = time.Now
	startRiver(t, first)
	run, err := first.StartDeploy(f.ctx, store.Actor{User: p[0]}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := f.run(run.ID)
	if got.Status != store.RunWaiting || got.JobID == nil || !strings.HasPrefix(got.Reason, "Frozen until ") {
		t.Fatalf("run %s job %v reason %q, want waiting, frozen, with a job", got.Status, got.JobID, got.Reason)
	}
	if at, ok, err := f.db.RunJobScheduledAt(f.ctx, run.ID); err != nil || !ok || !at.Equal(end) {
		t.Fatalf("job scheduled at %v (%v %v), want the window's end %v", at, ok, err, end)
	}
	if err := first.StopAndCancelRiver(f.ctx); err != nil {
		t.Fatal(err)
	}
	// The premise: the replica that scheduled the run is gone before
	// anything took its job.
	var attempts int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT attempt FROM river_job WHERE id = $1`, *got.JobID).Scan(&attempts); err != nil || attempts != 0 {
		t.Fatalf("the run's job was attempted %d times (%v) before the replica that scheduled it was killed, want never", attempts, err)
	}
	if got := f.run(run.ID); got.Status != store.RunWaiting || got.StartedAt != nil {
		t.Fatalf("run %s started %v once its replica was killed, want still waiting", got.Status, got.StartedAt)
	}
	var replicas []*runs.Service
	for range 2 {
		svc := runs.NewService(f.db, f.vault, f.local, time.Now, nil)
		startRiver(t, svc)
		replicas = append(replicas, svc)
	}
	if err := replicas[0].ResumeRunJobs(f.ctx); err != nil {
		t.Fatal(err)
	}
	if resumed := time.Now(); resumed.Before(end) {
		t.Logf("the replicas may take jobs %v before the window's end", end.Sub(resumed).Round(time.Millisecond))
	} else {
		t.Logf("the replicas may take jobs only %v after the window's end (a slow machine): the start after the end is not in question this time", resumed.Sub(end).Round(time.Millisecond))
	}
	waitFinished(t, f.db, []int64{run.ID})
	got = f.run(run.ID)
	if got.Status != store.RunSucceeded || got.StartedAt == nil || got.StartedAt.Before(end) {
		t.Fatalf("run %s (%s) started %v, want succeeded after %v", got.Status, got.Reason, got.StartedAt, end)
	}
	var activations int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM run_checkpoints WHERE run_id = $1 AND kind = 'activate' AND status = 'succeeded'`, run.ID).Scan(&activations); err != nil || activations != 1 {
		t.Fatalf("activations %d %v, want 1", activations, err)
	}
}

// A window that refuses: the deploy is refused with the sentence, no run
// is created; a deployer cannot override; an installation admin can, with
// a typed reason, audited.
func TestARefusingFreezeWindowAndTheAdminOverride(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	p := f.people("alice")
	now := f.svc.Now()
	f.freeze(runs.FreezeInput{From: now.Add(-time.Hour).UTC().Format(time.RFC3339), To: now.Add(2 * time.Hour).UTC().Format(time.RFC3339), Action: "refuse"})

	_, err := f.svc.StartDeploy(f.ctx, store.Actor{User: p[0]}, f.reloadEnv(), runs.DeployRequest{})
	var ref *runs.DeployRefusal
	if !errors.As(err, &ref) || !strings.HasPrefix(ref.Message, f.env.Name+" is frozen until ") || !strings.Contains(ref.Message, "UTC") {
		t.Fatalf("deploy in a refusing window: %v, want refused with the sentence", err)
	}
	var n int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM runs WHERE environment_id = $1`, f.env.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d runs (%v), want none", n, err)
	}
	if _, err := f.svc.StartDeploy(f.ctx, store.Actor{User: p[0]}, f.reloadEnv(), runs.DeployRequest{FreezeOverride: "hotfix"}); !errors.As(err, &ref) || ref.Field != "freeze_override" {
		t.Fatalf("a deployer's override: %v, want refused", err)
	}
	root, err := f.db.SignInOIDC(f.ctx, store.OIDCSignIn{Issuer: "https://idp.test", Subject: "root", Email: "root@example.com", Name: "Root", EmailVerified: true, IsAdmin: true})
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.svc.StartDeploy(f.ctx, store.Actor{User: root}, f.reloadEnv(), runs.DeployRequest{FreezeOverride: "security fix CVE-1"})
	if err != nil {
		t.Fatalf("admin override: %v", err)
	}
	if run.Status == store.RunWaiting {
		t.Fatalf("an overridden deploy waits: %s", run.Reason)
	}
	var reason string
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT detail->>'freeze_override' FROM audit_events WHERE action = 'deploy.started' AND target = $1`,
		fmt.Sprintf("run %d", run.ID)).Scan(&reason); err != nil || reason != "security fix CVE-1" {
		t.Fatalf("audited override %q %v", reason, err)
	}
}

// On a protected environment a delaying window applies when the approvals
// are met: the approval that meets the rule schedules the job at the
// window's end.
func TestApprovalsMetInAFreezeWindowStartTheRunAtItsEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	p := f.people("alice", "bob")
	f.protect(store.ProtectionRule{Approvals: 1, ApproverRole: store.RoleDeployer})
	end := time.Now().Add(time.Hour).Truncate(time.Minute)
	f.freeze(runs.FreezeInput{From: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), To: end.UTC().Format(time.RFC3339)})
	svc := runs.NewService(f.db, f.vault, f.local, time.Now, nil)
	startRiver(t, svc)
	run, err := svc.StartDeploy(f.ctx, store.Actor{User: p[0]}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil || run.Status != store.RunWaiting || run.PlanDigest == "" {
		t.Fatalf("deploy: %v %+v, want waiting for approval", err, run)
	}
	out, err := svc.Approve(f.ctx, store.Actor{User: p[1]}, f.env, run.ID, run.PlanDigest, "")
	if err != nil || !out.Started || !out.StartsAt.Equal(end) {
		t.Fatalf("approval: %v %+v, want started at the window's end %v", err, out, end)
	}
	if at, ok, err := f.db.RunJobScheduledAt(f.ctx, run.ID); err != nil || !ok || !at.Equal(end) {
		t.Fatalf("job at %v (%v %v), want %v", at, ok, err, end)
	}
	if got := f.run(run.ID); got.Status != store.RunWaiting || got.Reason != "Frozen until "+runs.FreezeClock(end, time.Now()) {
		t.Fatalf("the approved run is %s with the reason %q, want waiting, frozen until the end", got.Status, got.Reason)
	}
}
