package runs_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// people signs in three people and makes them deployers of f.env.
func (f *fixture) people(names ...string) []*store.User {
	f.t.Helper()
	var out []*store.User
	for _, n := range names {
		u, err := f.db.SignInOIDC(f.ctx, store.OIDCSignIn{Issuer: "https://idp.test", Subject: n, Email: n + "@example.com", Name: n, EmailVerified: true})
		if err != nil {
			f.t.Fatal(err)
		}
		if _, err := f.db.AddMember(f.ctx, store.Actor{}, f.env, u.Email, store.RoleDeployer); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

func (f *fixture) protect(rule store.ProtectionRule) {
	f.t.Helper()
	if rule.Expires == 0 {
		rule.Expires = store.DefaultApprovalExpiry
	}
	if rule.Bypass == "" {
		rule.Bypass = store.BypassNobody
	}
	if err := f.db.PutProtectionRule(f.ctx, store.Actor{}, f.env, rule, store.Starter{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) deployAs(u *store.User) *store.Run {
	f.t.Helper()
	run, err := f.svc.StartDeploy(f.ctx, store.Actor{User: u}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		f.t.Fatalf("start deploy: %v", err)
	}
	return run
}

func TestProtectedDeployWaitsForTwoApprovalsAndConcurrentApproversCountOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	p := f.people("alice", "bob", "carol")
	alice, bob, carol := p[0], p[1], p[2]
	f.protect(store.ProtectionRule{Approvals: 2, ApproverRole: store.RoleDeployer})

	run := f.deployAs(alice)
	if run.Status != store.RunWaiting || run.JobID != nil || run.PlanDigest == "" {
		t.Fatalf("run %s job %v digest %q, want waiting with no job", run.Status, run.JobID, run.PlanDigest)
	}
	cp, d := runs.ApprovalOf(f.checkpoints(run.ID))
	if cp == nil || cp.Position != 1 || cp.Status != store.CheckpointWaiting || d.Digest != run.PlanDigest || d.Plan.Revision != 1 {
		t.Fatalf("approval checkpoint %+v %+v", cp, d)
	}
	// Nothing reached the platform: no other checkpoint started.
	for _, c := range f.checkpoints(run.ID)[1:] {
		if c.Status != store.CheckpointPending {
			t.Fatalf("%s is %s before approval", c.Name, c.Status)
		}
	}

	if _, err := f.svc.Approve(f.ctx, store.Actor{User: alice}, f.env, run.ID, run.PlanDigest, ""); apperr.CodeOf(err) != apperr.Forbidden {
		t.Fatalf("self-approval: %v, want refused", err)
	}
	if _, err := f.svc.Approve(f.ctx, store.Actor{User: bob}, f.env, run.ID, "an-older-plan", ""); apperr.CodeOf(err) != apperr.Conflict {
		t.Fatalf("approval of another digest: %v, want a conflict", err)
	}

	// Bob and Carol click at once: both count, exactly one starts it.
	var wg sync.WaitGroup
	outs := make([]*store.ApprovalOutcome, 2)
	errs := make([]error, 2)
	for i, u := range []*store.User{bob, carol} {
		wg.Go(func() {
			outs[i], errs[i] = f.svc.Approve(f.ctx, store.Actor{User: u}, f.env, run.ID, run.PlanDigest, "looks right")
		})
	}
	wg.Wait()
	started := 0
	for i := range outs {
		if errs[i] != nil {
			t.Fatalf("approval %d: %v", i, errs[i])
		}
		if outs[i].Started {
			started++
		}
	}
	if started != 1 {
		t.Fatalf("%d approvals started the run, want exactly 1 (%+v %+v)", started, outs[0], outs[1])
	}
	aps, err := f.db.Approvals(f.ctx, run.ID)
	if err != nil || len(aps) != 2 {
		t.Fatalf("approvals %v %v, want 2", aps, err)
	}
	if _, err := f.svc.Approve(f.ctx, store.Actor{User: bob}, f.env, run.ID, run.PlanDigest, ""); apperr.CodeOf(err) != apperr.Conflict {
		t.Fatalf("second approval by one person: %v, want a conflict", err)
	}

	if res := f.execute(run.ID); !res.Finished {
		t.Fatalf("the run waits until %v", res.WaitUntil)
	}
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("run %s (%s), want succeeded", got.Status, got.Reason)
	}
	if cp, _ := runs.ApprovalOf(f.checkpoints(run.ID)); cp.Status != store.CheckpointSucceeded {
		t.Fatalf("approval checkpoint %s", cp.Status)
	}
}

func TestAValueChangedAfterApprovalVoidsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, map[string]string{"API_KEY": "first-secret-never-shown"})
	p := f.people("alice", "bob", "carol")
	alice, bob, carol := p[0], p[1], p[2]
	f.protect(store.ProtectionRule{Approvals: 1, ApproverRole: store.RoleDeployer})
	run := f.deployAs(alice)
	out, err := f.svc.Approve(f.ctx, store.Actor{User: bob}, f.env, run.ID, run.PlanDigest, "")
	if err != nil || !out.Started {
		t.Fatalf("approve: %+v %v", out, err)
	}
	f.setValue("API_KEY", "second-secret-never-shown")
	f.execute(run.ID)
	got := f.run(run.ID)
	if got.Status != store.RunWaiting || got.JobID != nil || got.PlanDigest == run.PlanDigest {
		t.Fatalf("run %s job %v digest %s, want waiting again for a new digest", got.Status, got.JobID, got.PlanDigest)
	}
	if aps, _ := f.db.Approvals(f.ctx, run.ID); len(aps) != 0 {
		t.Fatalf("approvals %+v, want void", aps)
	}
	cp, d := runs.ApprovalOf(f.checkpoints(run.ID))
	if cp.Status != store.CheckpointWaiting || strings.Join(d.Changed, "; ") != "value API_KEY changed: version 1 → 2" {
		t.Fatalf("approval checkpoint %s, changed %q", cp.Status, d.Changed)
	}
	for _, c := range f.checkpoints(run.ID)[1:] {
		if c.Status != store.CheckpointPending {
			t.Fatalf("%s is %s after the approvals were void", c.Name, c.Status)
		}
	}
	if _, err := f.svc.Approve(f.ctx, store.Actor{User: carol}, f.env, run.ID, got.PlanDigest, ""); err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("run %s (%s), want succeeded", got.Status, got.Reason)
	}
}

func TestRejectEndsTheRunAndRemovingARoleVoidsApprovals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	p := f.people("alice", "bob", "carol")
	alice, bob, carol := p[0], p[1], p[2]
	f.protect(store.ProtectionRule{Approvals: 2, ApproverRole: store.RoleDeployer})
	run := f.deployAs(alice)
	if _, err := f.svc.Approve(f.ctx, store.Actor{User: bob}, f.env, run.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.RemoveMember(f.ctx, store.Actor{}, f.env, bob.ID); err != nil {
		t.Fatal(err)
	}
	if aps, _ := f.db.Approvals(f.ctx, run.ID); len(aps) != 0 {
		t.Fatalf("approvals %+v after bob's role went, want none", aps)
	}
	if err := f.svc.Reject(f.ctx, store.Actor{User: carol}, f.env, run.ID, "not during the sale"); err != nil {
		t.Fatal(err)
	}
	got := f.run(run.ID)
	if got.Status != store.RunRejected || got.Reason != "Rejected by carol: not during the sale" || got.FinishedAt == nil {
		t.Fatalf("run %s %q", got.Status, got.Reason)
	}
	for _, c := range f.checkpoints(run.ID) {
		if c.Status != store.CheckpointNotRun {
			t.Fatalf("%s is %s, want not-run", c.Name, c.Status)
		}
	}
	// A rule asking for more approvers than there are is refused.
	err := f.db.PutProtectionRule(f.ctx, store.Actor{}, f.env, store.ProtectionRule{Approvals: 3, ApproverRole: store.RoleDeployer,
		Expires: store.DefaultApprovalExpiry, Bypass: store.BypassNobody}, store.Starter{})
	if err == nil || err.Error() != "This rule asks for 3 approvals, but production has only 2 members who may approve." {
		t.Fatalf("rule of 3: %v", err)
	}
	// Unprotected again: a deploy starts as before.
	if err := f.db.DeleteProtectionRule(f.ctx, store.Actor{}, f.env, store.Starter{}); err != nil {
		t.Fatal(err)
	}
	next := f.deployAs(alice)
	if next.Status != store.RunPending || next.PlanDigest != "" {
		t.Fatalf("unprotected deploy %s %q", next.Status, next.PlanDigest)
	}
}

// TestApprovalWebhooksAreSignedAndInOrder: through River, a protected
// deploy announces approval.requested, approval.granted, then runs
// (deploy.started, deploy.succeeded); a second one is rejected. Every
// delivery is signed and recorded in the order it happened.
func TestApprovalWebhooksAreSignedAndInOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	p := f.people("alice", "bob")
	alice, bob := p[0], p[1]
	f.protect(store.ProtectionRule{Approvals: 1, ApproverRole: store.RoleDeployer})
	rc := newReceiver(t, func(int) int { return http.StatusOK })
	ep, secret := f.addEndpoint(rc.srv.URL, store.WebhookFormatStandard, store.WebhookApprovalRequested, store.WebhookApprovalGranted,
		store.WebhookApprovalRejected, store.WebhookDeployStarted, store.WebhookDeploySucceeded)
	rc.secret = secret
	startWebhookRiver(t, f.svc, runs.WebhookOptions{PublicURL: "https://studio.example.test/", Backoff: tinyBackoff, Timeout: 5 * time.Second,
		AllowNetworks: testReceivers})

	run := f.deployAs(alice)
	if _, err := f.svc.Approve(f.ctx, store.Actor{User: bob}, f.env, run.ID, run.PlanDigest, ""); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, f.db, []int64{run.ID})
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("approved run %s (%s)", got.Status, got.Reason)
	}
	second, err := f.svc.StartDeploy(f.ctx, store.Actor{User: alice}, f.reloadEnv(), runs.DeployRequest{Redeploy: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Reject(f.ctx, store.Actor{User: bob}, f.env, second.ID, "not now"); err != nil {
		t.Fatal(err)
	}
	ds := waitDeliveries(t, f.db, ep.ID, 6)
	slices.SortFunc(ds, func(a, b store.WebhookDelivery) int { return int(a.ID - b.ID) })
	var events []string
	for _, d := range ds {
		events = append(events, d.Event)
		if d.Status != store.WebhookSucceeded {
			t.Errorf("delivery %s: %s", d.Event, d.Status)
		}
	}
	want := "approval.requested approval.granted deploy.started deploy.succeeded approval.requested approval.rejected"
	if strings.Join(events, " ") != want {
		t.Fatalf("events %v, want %s", events, want)
	}
	if _, _, bad := rc.snapshot(); bad != 0 {
		t.Fatalf("%d deliveries had a bad signature", bad)
	}
}

func TestBypassExpiryCancelAndTwoWaitingDeploysStayApart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	p := f.people("alice", "bob")
	alice, bob := p[0], p[1]
	root, err := f.db.SignInOIDC(f.ctx, store.OIDCSignIn{Issuer: "https://idp.test", Subject: "root", Email: "root@example.com", Name: "Root", EmailVerified: true, IsAdmin: true})
	if err != nil {
		t.Fatal(err)
	}
	f.protect(store.ProtectionRule{Approvals: 1, ApproverRole: store.RoleDeployer, Bypass: store.BypassAdmins})
	staging, err := f.db.CreateEnvironment(f.ctx, store.Actor{}, f.project.ID, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.AddMember(f.ctx, store.Actor{}, staging, bob.Email, store.RoleDeployer); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.AddMember(f.ctx, store.Actor{}, staging, alice.Email, store.RoleDeployer); err != nil {
		t.Fatal(err)
	}
	if err := f.db.PutProtectionRule(f.ctx, store.Actor{}, staging, store.ProtectionRule{Approvals: 1, ApproverRole: store.RoleDeployer,
		Expires: store.DefaultApprovalExpiry, Bypass: store.BypassNobody}, store.Starter{}); err != nil {
		t.Fatal(err)
	}

	// Two deploys wait at once; approving one does not start the other.
	prod := f.deployAs(alice)
	stage, err := f.svc.StartDeploy(f.ctx, store.Actor{User: alice}, staging, runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := f.svc.Approve(f.ctx, store.Actor{User: bob}, staging, stage.ID, stage.PlanDigest, ""); err != nil || !out.Started {
		t.Fatalf("approve staging: %+v %v", out, err)
	}
	if aps, _ := f.db.Approvals(f.ctx, prod.ID); len(aps) != 0 {
		t.Fatalf("production's run has approvals %+v", aps)
	}
	if _, err := f.svc.Approve(f.ctx, store.Actor{User: bob}, f.env, stage.ID, stage.PlanDigest, ""); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("staging's run approved through production: %v", err)
	}

	// A bypass needs an installation admin and a typed reason.
	if _, err := f.svc.Bypass(f.ctx, store.Actor{User: bob}, f.env, prod.ID, "hotfix"); apperr.CodeOf(err) != apperr.Forbidden {
		t.Fatalf("bypass by a deployer: %v", err)
	}
	if _, err := f.svc.Bypass(f.ctx, store.Actor{User: root}, f.env, prod.ID, ""); apperr.CodeOf(err) != apperr.Invalid {
		t.Fatalf("bypass without a reason: %v", err)
	}
	if out, err := f.svc.Bypass(f.ctx, store.Actor{User: root}, f.env, prod.ID, "the checkout is down"); err != nil || !out.Started {
		t.Fatalf("bypass: %+v %v", out, err)
	}
	f.execute(prod.ID)
	if got := f.run(prod.ID); got.Status != store.RunSucceeded {
		t.Fatalf("bypassed run %s (%s)", got.Status, got.Reason)
	}
	var n int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM audit_events WHERE action = 'approval.bypassed' AND detail->>'reason' = 'the checkout is down' AND detail->>'digest' = $1`, prod.PlanDigest).Scan(&n); err != nil || n != 1 {
		t.Fatalf("bypass audit records %d %v, want 1 with the digest and reason", n, err)
	}

	// A request that expires ends cancelled; a waiting run cancels at once.
	next, err := f.svc.StartDeploy(f.ctx, store.Actor{User: alice}, f.reloadEnv(), runs.DeployRequest{Redeploy: true})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.db.ExpireApproval(f.ctx, next.ID); err != nil || !ok {
		t.Fatalf("expire: %v %v", ok, err)
	}
	if got := f.run(next.ID); got.Status != store.RunCancelled || !strings.Contains(got.Reason, "expired") {
		t.Fatalf("expired run %s %q", got.Status, got.Reason)
	}
	last, err := f.svc.StartDeploy(f.ctx, store.Actor{User: alice}, f.reloadEnv(), runs.DeployRequest{Redeploy: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Cancel(f.ctx, store.Actor{User: alice}, f.reloadEnv(), last.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.run(last.ID); got.Status != store.RunCancelled {
		t.Fatalf("cancelled waiting run %s", got.Status)
	}
}

// TestAWaitingRunOutlivesItsProcess: the Studio that created a waiting
// run stops; another process's approval starts it, once, through River.
func TestAWaitingRunOutlivesItsProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	f.db.Now = time.Now
	p := f.people("alice", "bob")
	f.protect(store.ProtectionRule{Approvals: 1, ApproverRole: store.RoleDeployer})
	first := runs.NewService(f.db, f.vault, f.local, time.Now, nil)
	startRiver(t, first)
	run, err := first.StartDeploy(f.ctx, store.Actor{User: p[0]}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Killed: its jobs are cancelled mid-flight, nothing is kept in memory.
	if err := first.StopAndCancelRiver(f.ctx); err != nil {
		t.Fatal(err)
	}
	second := runs.NewService(f.db, f.vault, f.local, time.Now, nil)
	startRiver(t, second)
	if got := f.run(run.ID); got.Status != store.RunWaiting || got.JobID != nil {
		t.Fatalf("after the restart the run is %s with job %v, want waiting without one", got.Status, got.JobID)
	}
	if _, err := second.Approve(f.ctx, store.Actor{User: p[1]}, f.env, run.ID, run.PlanDigest, ""); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, f.db, []int64{run.ID})
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("run %s (%s)", got.Status, got.Reason)
	}
	var activations int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM run_checkpoints WHERE run_id = $1 AND kind = 'activate' AND status = 'succeeded'`, run.ID).Scan(&activations); err != nil || activations != 1 {
		t.Fatalf("activations %d %v, want 1", activations, err)
	}
}
