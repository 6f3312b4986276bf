package runs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// newDrillFixture is a deployed environment with one good snapshot and a
// scratch directory of its own for drills.
func newDrillFixture(t *testing.T) (*fixture, string, *store.Backup, string) {
	t.Helper()
	f, target := newBackupFixture(t)
	scratch := t.TempDir()
	f.svc.Runner.ScratchDir = scratch
	return f, target, snapshot(t, f), scratch
}

// drillPlaces lists what is left in the drills' scratch directory.
func drillPlaces(t *testing.T, scratch string) []string {
	t.Helper()
	ents, err := os.ReadDir(scratch)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// envPicture is what a drill must never change of the environment.
func envPicture(f *fixture) string {
	f.t.Helper()
	var s string
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT e.state || ' rev ' || COALESCE(e.active_revision_id::text, '-') || ' runs ' ||
		(SELECT count(*) FROM runs r WHERE r.environment_id = e.id AND r.kind <> 'drill')
		FROM environments e WHERE e.id = $1`, f.env.ID).Scan(&s); err != nil {
		f.t.Fatal(err)
	}
	return s
}

// TestDrillRestoresIntoScratchAndChecksEveryObject: a drill restores
// every file of the newest snapshot into its own scratch place, counts
// what it checked, removes the place, and leaves the environment as it was.
func TestDrillRestoresIntoScratchAndChecksEveryObject(t *testing.T) {
	t.Parallel()
	f, _, b, scratch := newDrillFixture(t)
	before := envPicture(f)
	run, err := f.svc.StartDrill(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	if run.Kind != store.RunDrill {
		t.Fatalf("kind %q", run.Kind)
	}
	f.execute(run.ID)
	got := f.run(run.ID)
	if got.Status != store.RunSucceeded {
		t.Fatalf("drill %s: %s", got.Status, got.Reason)
	}
	sum := runs.SummarizeDrill(f.checkpoints(run.ID))
	// The manifest declares a database, a bucket and a volume.
	if sum.Objects != 3 || sum.Bytes != b.Size || sum.Counted {
		t.Fatalf("drill checked %+v, want 3 objects of %d bytes (snapshot %s), no tables on the local platform", sum, b.Size, b.Name)
	}
	if left := drillPlaces(t, scratch); len(left) != 0 {
		t.Fatalf("the scratch place is left: %v", left)
	}
	if after := envPicture(f); after != before {
		t.Fatalf("the environment changed: %s, was %s", after, before)
	}
}

// TestDrillOfACorruptedSnapshotFailsNamingTheObject: an object changed on
// the target after the snapshot fails the drill with its name; the
// environment is untouched, the scratch place removed, and the webhook
// event sent once.
func TestDrillOfACorruptedSnapshotFailsNamingTheObject(t *testing.T) {
	t.Parallel()
	f, target, b, scratch := newDrillFixture(t)
	ep, _ := f.addEndpoint("https://hooks.example.test/studio", store.WebhookFormatStandard, store.WebhookBackupDrillFailed)
	corrupt(t, filepath.Join(target, "vault", "production", b.Name, "bucket-files.snapshot"))
	before := envPicture(f)
	run, err := f.svc.StartDrill(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	f.execute(run.ID) // a second execution of a finished drill changes nothing
	got := f.run(run.ID)
	if got.Status != store.RunFailed || !strings.Contains(got.Reason, "bucket-files.snapshot does not match its recorded checksum") ||
		!strings.Contains(got.Reason, "production was not touched") {
		t.Fatalf("drill %s: %q, want failed naming bucket-files.snapshot", got.Status, got.Reason)
	}
	if left := drillPlaces(t, scratch); len(left) != 0 {
		t.Fatalf("the scratch place is left: %v", left)
	}
	if after := envPicture(f); after != before {
		t.Fatalf("the environment changed: %s, was %s", after, before)
	}
	ds, err := f.db.WebhookDeliveries(f.ctx, []int64{ep.ID}, 10)
	if err != nil || len(ds) != 1 || ds[0].Event != store.WebhookBackupDrillFailed || ds[0].Data.Run == nil || ds[0].Data.Run.Kind != "drill" {
		t.Fatalf("deliveries %+v (%v), want one %s", ds, err, store.WebhookBackupDrillFailed)
	}
}

// TestDrillCancelledWhileItRestoresRemovesItsScratchPlace.
func TestDrillCancelledWhileItRestoresRemovesItsScratchPlace(t *testing.T) {
	t.Parallel()
	f, _, _, scratch := newDrillFixture(t)
	// Each step of the local platform now takes a minute, far longer
	// than the test waits: only the cancel ends the restore.
	f.local.StepDelay = time.Minute
	run, err := f.svc.StartDrill(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := f.svc.Runner.Execute(f.ctx, run.ID); done <- err }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if cp, _ := f.checkpoint(run.ID, runs.KindDrillRestore); cp.Status == store.CheckpointRunning && len(drillPlaces(t, scratch)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the drill never started restoring; scratch %v", drillPlaces(t, scratch))
		}
	}
	if _, err := f.svc.Cancel(f.ctx, store.Actor{}, f.reloadEnv(), run.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled drill still restores after 20 s")
	}
	if got := f.run(run.ID); got.Status != store.RunCancelled {
		t.Fatalf("drill %s (%s), want cancelled", got.Status, got.Reason)
	}
	if left := drillPlaces(t, scratch); len(left) != 0 {
		t.Fatalf("the scratch place is left: %v", left)
	}
	if env := f.reloadEnv(); env.State != store.EnvironmentActive {
		t.Fatalf("state %q after a cancelled drill", env.State)
	}
}

// TestDrillWithoutSnapshotIsRefused.
func TestDrillWithoutSnapshotIsRefused(t *testing.T) {
	t.Parallel()
	f, _ := newBackupFixture(t)
	_, err := f.svc.StartDrill(f.ctx, store.Actor{}, f.reloadEnv())
	if err == nil || !strings.Contains(err.Error(), "no completed snapshot yet") {
		t.Fatalf("err %v, want a refusal for want of a snapshot", err)
	}
}

// TestDrillScheduleDefaultsWeeklyAndFiresOnceAcrossTwoProcesses: the
// first good snapshot gives the environment a weekly drill schedule; a
// schedule set by its admins fires each minute exactly once, whichever of
// two Studio processes (both running River) claims it.
func TestDrillScheduleDefaultsWeeklyAndFiresOnceAcrossTwoProcesses(t *testing.T) {
	t.Parallel()
	f, _, _, scratch := newDrillFixture(t)
	sc, err := f.db.DrillScheduleOf(f.ctx, f.env.ID)
	if err != nil || sc == nil || sc.Cron != store.DefaultDrillCron {
		t.Fatalf("drill schedule after the first snapshot %+v (%v), want %q", sc, err, store.DefaultDrillCron)
	}
	if err := f.svc.SetDrillSchedule(f.ctx, store.Actor{}, f.reloadEnv(), "61 * * * *"); err == nil {
		t.Fatal("a bad cron line was accepted")
	}
	if sc, _ := f.db.DrillScheduleOf(f.ctx, f.env.ID); sc.Cron != store.DefaultDrillCron {
		t.Fatalf("a refused cron changed the schedule to %q", sc.Cron)
	}
	if err := f.svc.SetDrillSchedule(f.ctx, store.Actor{}, f.reloadEnv(), "* * * * *"); err != nil {
		t.Fatal(err)
	}
	other := runs.NewService(f.db, f.vault, f.local, f.clock.Now, nil)
	other.Runner.ScratchDir = scratch
	for _, svc := range []*runs.Service{f.svc, other} {
		if err := svc.StartRiver(context.Background(), runs.RiverOptions{PollInterval: 20 * time.Millisecond, ReconcileInterval: -1, BackupInterval: 50 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			svc.StopRiver(ctx)
		})
	}
	drills := func() (all, finished int) {
		if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*), count(finished_at) FROM runs WHERE environment_id = $1 AND kind = 'drill'`,
			f.env.ID).Scan(&all, &finished); err != nil {
			t.Fatal(err)
		}
		return
	}
	const fires = 10
	for i := 1; i <= fires; i++ {
		f.clock.Set(start.Add(time.Duration(i)*time.Minute + time.Second))
		var wg sync.WaitGroup
		for _, svc := range []*runs.Service{f.svc, other, f.svc, other} {
			wg.Go(func() {
				if err := svc.FireDueDrills(f.ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if all, done := drills(); all == i && done == i {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("fire %d: %d drills, %d finished; want %d finished", i, all, done, i)
			}
		}
	}
	var good int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM runs WHERE environment_id = $1 AND kind = 'drill' AND status = 'succeeded'`, f.env.ID).Scan(&good); err != nil {
		t.Fatal(err)
	}
	if all, _ := drills(); all != fires || good != fires {
		t.Fatalf("%d drills, %d succeeded; want %d each", all, good, fires)
	}
}

// TestDrillAlarms: a failed drill raises the environment's drill alarm, a
// good one clears it, and none succeeding within twice the interval
// raises it again.
func TestDrillAlarms(t *testing.T) {
	t.Parallel()
	f, target, b, _ := newDrillFixture(t)
	alarm := func() string {
		t.Helper()
		as, err := f.db.DrillAlarms(f.ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) == 0 {
			return ""
		}
		return as[0].Reason
	}
	if a := alarm(); a != "" {
		t.Fatalf("alarm %q before any drill was due", a)
	}
	file := filepath.Join(target, "vault", "production", b.Name, "volume-api-state.snapshot")
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	corrupt(t, file)
	run, err := f.svc.StartDrill(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	if a := alarm(); !strings.Contains(a, "The last restore drill failed") || !strings.Contains(a, "volume-api-state.snapshot") {
		t.Fatalf("alarm %q after a failed drill, want it naming the object", a)
	}
	if err := os.WriteFile(file, good, 0o600); err != nil {
		t.Fatal(err)
	}
	run, err = f.svc.StartDrill(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	if a := alarm(); a != "" {
		t.Fatalf("alarm %q after a good drill", a)
	}
	f.clock.Set(f.clock.Now().Add(15 * 24 * time.Hour))
	if a := alarm(); !strings.Contains(a, "No restore drill has succeeded in the last 14 days") {
		t.Fatalf("alarm %q 15 days after the last good drill of a weekly schedule", a)
	}
}
