package runs_test

import (
	"os"
	"path/filepath"
	"strings"
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
	f, _ := newBackupFixture(t)
	_, err := f.svc.StartDrill(f.ctx, store.Actor{}, f.reloadEnv())
	if err == nil || !strings.Contains(err.Error(), "no completed snapshot yet") {
		t.Fatalf("err %v, want a refusal for want of a snapshot", err)
	}
}
