package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// deadOwner names an executor that claimed a run and then died: it never
// renews its lease again.
const deadOwner = "gone-host:4242:deadbeef"

// leaveRunning makes the run look like a process that died in the middle
// of checkpoint position: every checkpoint before it succeeded, it is
// running, and the dead executor's lease expires at once.
func (f *fixture) leaveRunning(runID int64, position int) {
	f.t.Helper()
	if ok, _, err := f.db.ClaimRunLease(f.ctx, runID, deadOwner, time.Millisecond); err != nil || !ok {
		f.t.Fatalf("claim: %v %v", ok, err)
	}
	apply := func(c store.RunChange) {
		c.RunID, c.Lease = runID, deadOwner
		if ok, err := f.db.ApplyRunChange(f.ctx, c); err != nil || !ok {
			f.t.Fatalf("apply %+v: %v %v", c, ok, err)
		}
	}
	apply(store.RunChange{Status: store.RunRunning})
	for p := 1; p <= position; p++ {
		apply(store.RunChange{Checkpoint: &store.CheckpointChange{Position: p, Status: store.CheckpointRunning}})
		if p < position {
			apply(store.RunChange{Checkpoint: &store.CheckpointChange{Position: p, Status: store.CheckpointSucceeded}})
		}
	}
	time.Sleep(5 * time.Millisecond) // the lease expires
}

// executorLostEvents counts the run's events that say its executor is lost
// (true) and back (false).
func executorLostEvents(t *testing.T, evs []store.RunEvent) (lost, back int) {
	t.Helper()
	for _, e := range evs {
		var p struct {
			Run struct {
				ExecutorLost *bool `json:"executorLost"`
			} `json:"run"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		switch {
		case p.Run.ExecutorLost == nil:
		case *p.Run.ExecutorLost:
			lost++
		default:
			back++
		}
	}
	return lost, back
}

func TestARunWhoseExecutorIsGoneIsMarkedLostThenResumedWithoutRepeatingASteps(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	run := f.deploy(runs.DeployRequest{})
	f.leaveRunning(run.ID, 3) // provisioning the bucket

	ids, err := f.svc.TakeOverLostRuns(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != run.ID {
		t.Fatalf("took over %v, want run %d", ids, run.ID)
	}
	if got := f.run(run.ID); !got.ExecutorLost() || got.Status != store.RunRunning {
		t.Fatalf("after the lease expired: status %s, executor lost %v", got.Status, got.ExecutorLost())
	}
	if again, _ := f.svc.TakeOverLostRuns(f.ctx); len(again) != 0 {
		t.Fatalf("a lost run was taken over twice: %v", again)
	}
	// The dead executor comes back to life (a long pause): nothing it
	// writes is applied any more once another execution holds the run.
	if res := f.execute(run.ID); !res.Finished {
		t.Fatalf("the resumed run waits until %v", res.WaitUntil)
	}
	if ok, err := f.db.ApplyRunChange(f.ctx, store.RunChange{RunID: run.ID, Lease: deadOwner,
		Checkpoint: &store.CheckpointChange{Position: 4, Status: store.CheckpointFailed}}); err != nil || ok {
		t.Fatalf("the old executor's change was applied: %v %v", ok, err)
	}

	got := f.run(run.ID)
	if got.Status != store.RunSucceeded || got.ExecutorLost() {
		t.Fatalf("resumed run: %s (%s), executor lost %v", got.Status, got.Reason, got.ExecutorLost())
	}
	evs := f.events(run.ID)
	per := map[int]int{}
	for _, e := range evs {
		if e.Checkpoint != nil {
			per[*e.Checkpoint]++
		}
	}
	for _, cp := range f.checkpoints(run.ID) {
		if cp.Status != store.CheckpointSucceeded {
			t.Errorf("%s is %s", cp.Name, cp.Status)
		}
		// running, then succeeded: a finished step is not done again, and
		// the one in flight is not started twice.
		if per[cp.Position] != 2 {
			t.Errorf("%s has %d events, want 2", cp.Name, per[cp.Position])
		}
	}
	if lost, back := executorLostEvents(t, evs); lost != 1 || back != 1 {
		t.Fatalf("executor lost events: %d lost, %d back; want 1 and 1", lost, back)
	}
}

// leaseReading is a run's lease as the database has it, read at clock
// (the database's).
type leaseReading struct {
	owner          string
	expires, clock time.Time
}

func (r leaseReading) String() string {
	return fmt.Sprintf("%s until %s (read at %s)", r.owner, r.expires.Format("15:04:05.000"), r.clock.Format("15:04:05.000"))
}

// A release command that runs longer than the lease: its execution renews
// the lease, so the run is not taken over, and a second execution of it
// does not run it again.
func TestALiveExecutionIsNotTakenOverNorRunTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	hold := &holdingRelease{Platform: f.local, started: make(chan struct{}), proceed: make(chan struct{})}
	count := &countingRelease{Platform: hold}
	svc := runs.NewService(f.db, f.vault, count, f.clock.Now, nil)
	// Renewed every 2.5 s, each renewal bounded by 2.5 s: the lease is
	// lost only when no renewal gets through for 10 s.
	const lease = 10 * time.Second
	svc.Runner.Lease = lease
	run, err := svc.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := svc.Runner.Execute(context.Background(), run.ID)
		done <- err
	}()
	t.Cleanup(hold.goOn) // let the execution end with the test
	hold.awaitStart(f, run.ID, done)

	// The lease, as the database has it, is renewed while the command
	// runs: it outlives the term it had when the command started, and is
	// fresh (at least half a lease left) when the takeover looks.
	read := func() leaseReading {
		t.Helper()
		var r leaseReading
		var owner *string
		var expires *time.Time
		if err := f.db.Pool.QueryRow(f.ctx, `SELECT lease_owner, lease_expires_at, clock_timestamp() FROM runs WHERE id = $1`, run.ID).Scan(&owner, &expires, &r.clock); err != nil {
			t.Fatal(err)
		}
		if owner == nil || expires == nil {
			t.Fatalf("run %d has no lease while its release command runs", run.ID)
		}
		r.owner, r.expires = *owner, *expires
		return r
	}
	first := read()
	seen := []leaseReading{first}
	renewals := 0
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		r := read()
		if r.owner != first.owner || !r.expires.After(r.clock) {
			t.Fatalf("the lease of a live execution was lost: now %v; seen since the command started: %v", r, seen)
		}
		if last := seen[len(seen)-1]; r.expires.After(last.expires) {
			renewals++
			seen = append(seen, r)
		}
		if renewals >= 2 && r.clock.After(first.expires) && r.expires.Sub(r.clock) > lease/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease was not renewed past its term within 2 minutes: %d renewals, seen %v, last %v", renewals, seen, r)
		}
	}
	t.Logf("the lease was renewed %d times; its term when the command started ended %v before the takeover looked",
		renewals, seen[len(seen)-1].clock.Sub(first.expires).Round(time.Millisecond))
	if ids, err := svc.TakeOverLostRuns(f.ctx); err != nil || len(ids) != 0 {
		t.Fatalf("a live execution was taken over: %v %v", ids, err)
	}
	if got := f.run(run.ID); got.ExecutorLost() {
		t.Fatal("a live execution is shown as executor lost")
	}
	type outcome struct {
		res runs.Result
		err error
	}
	second := make(chan outcome, 1)
	go func() {
		res, err := svc.Runner.Execute(f.ctx, run.ID)
		second <- outcome{res, err}
	}()
	select {
	case o := <-second:
		if o.err != nil || o.res.Finished || o.res.WaitUntil.IsZero() {
			t.Fatalf("a second execution of a live run: %+v %v", o.res, o.err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("a second execution of a live run did not return within a minute: the release command started %d times", count.n.Load())
	}
	hold.goOn()
	awaitEnd(f, run.ID, done)
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("run %s (%s)", got.Status, got.Reason)
	}
	if n := count.n.Load(); n != 1 {
		t.Fatalf("the release command ran %d times, want once", n)
	}
	if lost, back := executorLostEvents(t, f.events(run.ID)); lost != 0 || back != 0 {
		t.Fatalf("executor lost events: %d lost, %d back; want none", lost, back)
	}
}

func TestCancelEndsARunWhoseExecutorIsGoneAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	run := f.deploy(runs.DeployRequest{})
	f.leaveRunning(run.ID, 4) // building web
	if _, err := f.svc.TakeOverLostRuns(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Cancel(f.ctx, store.Actor{}, f.reloadEnv(), run.ID); err != nil {
		t.Fatal(err)
	}
	got := f.run(run.ID)
	if got.Status != store.RunCancelled || got.ExecutorLost() {
		t.Fatalf("run %s (%s), executor lost %v; want cancelled at once", got.Status, got.Reason, got.ExecutorLost())
	}
	if !strings.Contains(got.Reason, "Build web") {
		t.Fatalf("reason %q does not say where it stopped", got.Reason)
	}
	for _, cp := range f.checkpoints(run.ID) {
		switch {
		case cp.Position < 4 && cp.Status != store.CheckpointSucceeded,
			cp.Position == 4 && (cp.Status != store.CheckpointSkipped || !strings.Contains(cp.Warning, "did not finish")),
			cp.Position > 4 && cp.Status != store.CheckpointNotRun:
			t.Errorf("%s: %s %q", cp.Name, cp.Status, cp.Warning)
		}
	}
	// The environment takes a new deploy: the cancelled run no longer
	// holds it.
	if _, err := f.svc.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), runs.DeployRequest{}); err != nil {
		t.Fatalf("a deploy after the cancel: %v", err)
	}
}

func TestCancelEndsAQueuedRunAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	run := f.deploy(runs.DeployRequest{})
	if _, err := f.svc.Cancel(f.ctx, store.Actor{}, f.reloadEnv(), run.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.run(run.ID); got.Status != store.RunCancelled || got.Reason != "Cancelled before Check values." {
		t.Fatalf("run %s (%q)", got.Status, got.Reason)
	}
}

// countingRelease counts the release commands the platform runs.
type countingRelease struct {
	platform.Platform
	n atomic.Int32
}

func (c *countingRelease) Release(ctx context.Context, env platform.Env, app string, a *compiler.Application, cmd *compiler.ReleaseCommand, key platform.ReleaseKey, out platform.Output) error {
	c.n.Add(1)
	return c.Platform.Release(ctx, env, app, a, cmd, key, out)
}

func TestAReleaseCommandFoundRunningIsAskedOfThePlatformFirst(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// outcome is what the platform recorded before the process died:
		// "" nothing, "started", "succeeded" or a failure.
		outcome    string
		wantStatus string
		wantRuns   int32
	}{
		{"never started: run now", "", store.RunSucceeded, 1},
		{"finished: recorded as finished", "succeeded", store.RunSucceeded, 0},
		{"failed: recorded as failed", "relation users already exists", store.RunFailed, 0},
		{"started, end unknown: not run again", "started", store.RunFailed, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case has a fixture of its own
			f := newFixture(t, wiki("10m"), wikiValues)
			f.resolver.Set("wiki.test", here)
			f.resolver.Set("www.wiki.test", here)
			count := &countingRelease{Platform: f.local}
			f.svc = runs.NewService(f.db, f.vault, count, f.clock.Now, nil)
			run := f.deploy(runs.DeployRequest{})
			release, _ := f.checkpoint(run.ID, runs.KindRelease)
			f.leaveRunning(run.ID, release.Position)
			if c.outcome != "" {
				if err := f.db.StartLocalRelease(f.ctx, run.ID, release.Position); err != nil {
					t.Fatal(err)
				}
			}
			if c.outcome != "" && c.outcome != "started" {
				msg := c.outcome
				if msg == "succeeded" {
					msg = ""
				}
				if err := f.db.FinishLocalRelease(f.ctx, run.ID, release.Position, msg); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := f.svc.TakeOverLostRuns(f.ctx); err != nil {
				t.Fatal(err)
			}
			f.execute(run.ID)
			got := f.run(run.ID)
			if got.Status != c.wantStatus {
				t.Fatalf("run %s (%s), want %s", got.Status, got.Reason, c.wantStatus)
			}
			if n := count.n.Load(); n != c.wantRuns {
				t.Fatalf("the release command ran %d times, want %d", n, c.wantRuns)
			}
			if c.outcome == "started" && !strings.Contains(got.Reason, "cannot tell whether it finished") {
				t.Fatalf("reason %q", got.Reason)
			}
			if c.wantStatus == store.RunFailed && c.outcome != "started" && !strings.Contains(got.Reason, c.outcome) {
				t.Fatalf("reason %q does not carry the command's failure", got.Reason)
			}
		})
	}
}

func TestAScheduledFireWaitsForASnapshotWhoseExecutorIsLost(t *testing.T) {
	t.Parallel()
	f, _ := newBackupFixture(t)
	f.setSchedule("* * * * *", "1d")
	f.clock.Set(start.Add(time.Minute + time.Second))
	f.fire()
	rows := f.backupRows()
	if len(rows) != 1 || rows[0].RunID == nil {
		t.Fatalf("first fire: %+v", rows)
	}
	snapshot := *rows[0].RunID
	f.leaveRunning(snapshot, 1) // the process died while it snapshotted
	if _, err := f.svc.TakeOverLostRuns(f.ctx); err != nil {
		t.Fatal(err)
	}
	// Fires fall while no live process has resumed the snapshot yet: they
	// wait, instead of being skipped one after another.
	for m := 2; m <= 4; m++ {
		f.clock.Set(start.Add(time.Duration(m)*time.Minute + time.Second))
		f.fire()
	}
	if rows := f.backupRows(); len(rows) != 1 {
		t.Fatalf("fires while the snapshot's executor was lost: %+v", rows)
	}
	f.execute(snapshot) // taken over: it finishes
	if got := f.run(snapshot); got.Status != store.RunSucceeded {
		t.Fatalf("resumed snapshot: %s %s", got.Status, got.Reason)
	}
	f.clock.Set(start.Add(5*time.Minute + time.Second))
	f.fire()
	rows = f.backupRows()
	var taken, skipped int
	for _, b := range rows[1:] {
		if b.RunID != nil {
			taken++
		} else {
			skipped++
		}
	}
	// One catch-up snapshot (at 13:05); the three waiting fires are
	// recorded as skipped.
	if taken != 1 || skipped != 3 || rows[len(rows)-1].RunID == nil {
		t.Fatalf("after the snapshot finished: %d taken, %d skipped: %+v", taken, skipped, rows)
	}
	// Each waiting fire names the snapshot that held it.
	for _, b := range rows[1:4] {
		if want := fmt.Sprintf("the previous snapshot (backup run %d) was still running", snapshot); b.Skipped != want {
			t.Fatalf("waiting fire of %s: %q, want %q", b.ScheduledAt.Format("15:04"), b.Skipped, want)
		}
	}
}

func (c *countingRelease) Unwrap() platform.Platform { return c.Platform }
