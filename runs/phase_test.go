package runs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
)

// twoApps is the wiki with a worker beside it: a second application with
// its own release command and rollout, and no route.
var twoApps = strings.Replace(wiki("10m"), "databases:\n", `  worker:
    build:
      context: .
    environment:
      DATABASE_URL: "{{databases.data.url}}"
    deployment:
      releaseCommand:
        command: ["/app/worker", "seed"]
        timeout: 5m
databases:
`, 1)

// meeting is a platform whose release commands and rollouts each wait
// until every application's has started: steps that run one after
// another never all start, and say so instead of deploying.
type meeting struct {
	*local.Platform
	apps int

	mu      sync.Mutex
	started map[string][]string // kind → applications under way
	all     map[string]chan struct{}
}

func (m *meeting) meet(ctx context.Context, kind, app string) error {
	m.mu.Lock()
	if m.started == nil {
		m.started, m.all = map[string][]string{}, map[string]chan struct{}{}
	}
	if m.all[kind] == nil {
		m.all[kind] = make(chan struct{})
	}
	m.started[kind] = append(m.started[kind], app)
	all := m.all[kind]
	if len(m.started[kind]) == m.apps {
		close(all)
	}
	m.mu.Unlock()
	select {
	case <-all:
		return nil
	case <-time.After(time.Minute):
		m.mu.Lock()
		defer m.mu.Unlock()
		return fmt.Errorf("only %s started while %s's %s ran", strings.Join(m.started[kind], ", "), app, kind)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *meeting) Release(ctx context.Context, env platform.Env, app string, a *compiler.Application, cmd *compiler.ReleaseCommand, key platform.ReleaseKey, out platform.Output) error {
	if err := m.meet(ctx, "release command", app); err != nil {
		return err
	}
	return m.Platform.Release(ctx, env, app, a, cmd, key, out)
}

func (m *meeting) Rollout(ctx context.Context, env platform.Env, app string, a *compiler.Application, out platform.Output) error {
	if err := m.meet(ctx, "rollout", app); err != nil {
		return err
	}
	return m.Platform.Rollout(ctx, env, app, a, out)
}

func TestTheApplicationsReleaseCommandsAndRolloutsRunAtTheSameTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, twoApps, wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.svc = runs.NewService(f.db, f.vault, &meeting{Platform: f.local, apps: 2}, f.clock.Now, nil)
	run := f.deploy(runs.DeployRequest{})
	if res := f.execute(run.ID); !res.Finished {
		t.Fatalf("the run waits until %v", res.WaitUntil)
	}
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("run %s: %s", got.Status, got.Reason)
	}
	// Each step's log is its own: the worker's lines are not in the web's.
	lines, err := f.db.RunLog(f.ctx, run.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range f.checkpoints(run.ID) {
		if cp.Kind != runs.KindRelease && cp.Kind != runs.KindRollout {
			continue
		}
		app := runs.DecodeCheckpointDetail(cp.Detail).Application
		n := 0
		for _, l := range lines {
			if l.Position != cp.Position {
				continue
			}
			n++
			other := map[string]string{"web": "worker", "worker": "web"}[app]
			if strings.Contains(l.Text, " "+other+" ") || strings.Contains(l.Text, "/app/"+other) {
				t.Errorf("%s's log holds a line of %s: %q", cp.Name, other, l.Text)
			}
		}
		if n == 0 {
			t.Errorf("%s has no log line", cp.Name)
		}
	}
}

func TestOneFailedReleaseCommandLetsTheOtherFinishAndFailsTheRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, twoApps, wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) {
		fs.Release = map[string]string{"worker": "exit status 2: seed file missing"}
	})
	f.svc = runs.NewService(f.db, f.vault, &meeting{Platform: f.local, apps: 2}, f.clock.Now, nil)
	run := f.deploy(runs.DeployRequest{})
	f.execute(run.ID)
	got := f.run(run.ID)
	if got.Status != store.RunFailed || !strings.Contains(got.Reason, "The release command of worker failed: exit status 2: seed file missing") {
		t.Fatalf("run %s %q", got.Status, got.Reason)
	}
	for _, cp := range f.checkpoints(run.ID) {
		app := runs.DecodeCheckpointDetail(cp.Detail).Application
		var want string
		switch {
		case cp.Kind == runs.KindRelease && app == "web":
			want = store.CheckpointSucceeded // it ran together and is never stopped halfway
		case cp.Kind == runs.KindRelease:
			want = store.CheckpointFailed
		case cp.Kind == runs.KindIssueTLS, cp.Kind == runs.KindRollout, cp.Kind == runs.KindActivate:
			want = store.CheckpointNotRun
		default:
			continue
		}
		if cp.Status != want {
			t.Errorf("%s is %s, want %s", cp.Name, cp.Status, want)
		}
	}
	if det := runs.DecodeRunDetail(got.Detail); det.StoppedName != "Release command worker" {
		t.Fatalf("the run says it stopped at %q, want the failed release command", det.StoppedName)
	}
	if f.reloadEnv().ActiveRevisionID != nil {
		t.Fatal("a failed release command activated the revision")
	}
}

func TestCancelSettlesEveryReleaseCommandAGoneExecutorLeftRunning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, twoApps, wikiValues)
	run := f.deploy(runs.DeployRequest{})
	var releases []store.Checkpoint
	for _, cp := range f.checkpoints(run.ID) {
		if cp.Kind == runs.KindRelease {
			releases = append(releases, cp)
		}
	}
	if len(releases) != 2 {
		t.Fatalf("%d release checkpoints", len(releases))
	}
	// The gone executor started both; the platform saw the web's finish
	// and the worker's start.
	f.leaveRunning(run.ID, releases[0].Position)
	if ok, err := f.db.ApplyRunChange(f.ctx, store.RunChange{RunID: run.ID, Lease: deadOwner,
		Checkpoint: &store.CheckpointChange{Position: releases[1].Position, Status: store.CheckpointRunning}}); err != nil || !ok {
		t.Fatalf("apply: %v %v", ok, err)
	}
	for i, cp := range releases {
		if err := f.db.StartLocalRelease(f.ctx, run.ID, cp.Position); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := f.db.FinishLocalRelease(f.ctx, run.ID, cp.Position, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := f.svc.TakeOverLostRuns(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Cancel(f.ctx, store.Actor{}, f.reloadEnv(), run.ID); err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	if got := f.run(run.ID); got.Status != store.RunCancelled {
		t.Fatalf("run %s (%s), want cancelled", got.Status, got.Reason)
	}
	for _, cp := range f.checkpoints(run.ID) {
		if cp.Status == store.CheckpointRunning || cp.Status == store.CheckpointPending {
			t.Errorf("%s is still %s after the run ended", cp.Name, cp.Status)
		}
		switch cp.Position {
		case releases[0].Position:
			if cp.Status != store.CheckpointSucceeded {
				t.Errorf("%s is %s; the platform saw it finish", cp.Name, cp.Status)
			}
		case releases[1].Position:
			if cp.Status != store.CheckpointSkipped || !strings.Contains(cp.Warning, "did not finish") {
				t.Errorf("%s is %s %q; the platform cannot tell how it ended", cp.Name, cp.Status, cp.Warning)
			}
		}
	}
}

// threeApps is twoApps with a second worker.
var threeApps = strings.Replace(twoApps, "databases:\n", `  mailer:
    build:
      context: .
    environment:
      DATABASE_URL: "{{databases.data.url}}"
    deployment:
      releaseCommand:
        command: ["/app/mailer", "seed"]
        timeout: 5m
databases:
`, 1)

func (f *fixture) releases(runID int64) []store.Checkpoint {
	f.t.Helper()
	var out []store.Checkpoint
	for _, cp := range f.checkpoints(runID) {
		if cp.Kind == runs.KindRelease {
			out = append(out, cp)
		}
	}
	return out
}

// goneApply writes a change of the run as the executor that died.
func (f *fixture) goneApply(runID int64, c store.CheckpointChange) {
	f.t.Helper()
	if ok, err := f.db.ApplyRunChange(f.ctx, store.RunChange{RunID: runID, Lease: deadOwner, Checkpoint: &c}); err != nil || !ok {
		f.t.Fatalf("apply %+v: %v %v", c, ok, err)
	}
}

func TestAReleaseCommandThatFailedBeforeACrashFailsTheResumedRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, twoApps, wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	count := &countingRelease{Platform: f.local}
	f.svc = runs.NewService(f.db, f.vault, count, f.clock.Now, nil)
	run := f.deploy(runs.DeployRequest{})
	rel := f.releases(run.ID) // web, worker
	// The dead process recorded the worker's command failed while the
	// web's (never started on the platform) was under way.
	f.leaveRunning(run.ID, rel[0].Position)
	const reason = "The release command of worker failed: exit status 2: seed file missing"
	f.goneApply(run.ID, store.CheckpointChange{Position: rel[1].Position, Status: store.CheckpointRunning})
	f.goneApply(run.ID, store.CheckpointChange{Position: rel[1].Position, Status: store.CheckpointFailed,
		Detail: runs.CheckpointDetail{Application: "worker", Error: reason}})
	if _, err := f.svc.TakeOverLostRuns(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	got := f.run(run.ID)
	if got.Status != store.RunFailed || got.Reason != reason {
		t.Fatalf("run %s %q, want failed with the worker's reason", got.Status, got.Reason)
	}
	if n := count.n.Load(); n != 0 {
		t.Fatalf("%d release commands ran after the worker's had failed", n)
	}
	for _, cp := range f.checkpoints(run.ID) {
		switch {
		case cp.Position == rel[0].Position:
			if cp.Status != store.CheckpointSkipped || !strings.Contains(cp.Warning, "Release command worker failed") {
				t.Errorf("%s: %s %q", cp.Name, cp.Status, cp.Warning)
			}
		case cp.Kind == runs.KindIssueTLS, cp.Kind == runs.KindRollout, cp.Kind == runs.KindActivate:
			if cp.Status != store.CheckpointNotRun {
				t.Errorf("%s is %s after a release command failed, want not-run", cp.Name, cp.Status)
			}
		}
	}
	if f.reloadEnv().ActiveRevisionID != nil {
		t.Fatal("the revision went live although a release command failed")
	}
}

func TestAResumedPhaseRunsOnlyItsStepsThatDidNotEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, threeApps, wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	count := &countingRelease{Platform: f.local}
	f.svc = runs.NewService(f.db, f.vault, count, f.clock.Now, nil)
	run := f.deploy(runs.DeployRequest{})
	rel := f.releases(run.ID) // mailer, web, worker
	if len(rel) != 3 {
		t.Fatalf("%d release checkpoints", len(rel))
	}
	// The middle command ended before the process died; the first had
	// not started on the platform, the last was still pending.
	f.leaveRunning(run.ID, rel[0].Position)
	f.goneApply(run.ID, store.CheckpointChange{Position: rel[1].Position, Status: store.CheckpointRunning})
	if err := f.db.StartLocalRelease(f.ctx, run.ID, rel[1].Position); err != nil {
		t.Fatal(err)
	}
	if err := f.db.FinishLocalRelease(f.ctx, run.ID, rel[1].Position, ""); err != nil {
		t.Fatal(err)
	}
	f.goneApply(run.ID, store.CheckpointChange{Position: rel[1].Position, Status: store.CheckpointSucceeded})
	if _, err := f.svc.TakeOverLostRuns(f.ctx); err != nil {
		t.Fatal(err)
	}
	if res := f.execute(run.ID); !res.Finished {
		t.Fatalf("the run waits until %v", res.WaitUntil)
	}
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("run %s %q", got.Status, got.Reason)
	}
	if n := count.n.Load(); n != 2 {
		t.Fatalf("%d release commands ran, want the 2 that had not ended", n)
	}
}

func TestCancelSettlesACertificateStepAGoneExecutorLeftRunning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	run := f.deploy(runs.DeployRequest{})
	tls, _ := f.checkpoint(run.ID, runs.KindIssueTLS)
	f.leaveRunning(run.ID, tls.Position)
	if _, err := f.svc.TakeOverLostRuns(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Cancel(f.ctx, store.Actor{}, f.reloadEnv(), run.ID); err != nil {
		t.Fatal(err)
	}
	got := f.run(run.ID)
	if got.Status != store.RunCancelled || !strings.Contains(got.Reason, "it did not finish") {
		t.Fatalf("run %s %q", got.Status, got.Reason)
	}
	for _, cp := range f.checkpoints(run.ID) {
		if cp.Position == tls.Position && (cp.Status != store.CheckpointSkipped || !strings.Contains(cp.Warning, "did not finish")) {
			t.Errorf("%s: %s %q", cp.Name, cp.Status, cp.Warning)
		}
		if cp.Status == store.CheckpointRunning || cp.Status == store.CheckpointPending {
			t.Errorf("%s is still %s after the run ended", cp.Name, cp.Status)
		}
	}
}

func TestAReleaseCommandTheCrashLeftFailedKeepsItsSiblingsFromStarting(t *testing.T) {
	t.Parallel()
	f := newFixture(t, twoApps, wikiValues)
	count := &countingRelease{Platform: f.local}
	f.svc = runs.NewService(f.db, f.vault, count, f.clock.Now, nil)
	run := f.deploy(runs.DeployRequest{})
	rel := f.releases(run.ID) // web, worker
	// The web's command failed on the platform just before the process
	// died, unrecorded; the worker's had not started.
	f.leaveRunning(run.ID, rel[0].Position)
	if err := f.db.StartLocalRelease(f.ctx, run.ID, rel[0].Position); err != nil {
		t.Fatal(err)
	}
	if err := f.db.FinishLocalRelease(f.ctx, run.ID, rel[0].Position, "relation users already exists"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.TakeOverLostRuns(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	got := f.run(run.ID)
	if got.Status != store.RunFailed || !strings.Contains(got.Reason, "relation users already exists") {
		t.Fatalf("run %s %q", got.Status, got.Reason)
	}
	if n := count.n.Load(); n != 0 {
		t.Fatalf("%d release commands started after one had failed", n)
	}
	for _, cp := range f.checkpoints(run.ID) {
		if cp.Position == rel[1].Position && cp.Status != store.CheckpointNotRun {
			t.Errorf("%s is %s, want not run", cp.Name, cp.Status)
		}
	}
}
