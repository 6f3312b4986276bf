package runs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

const backupManifest = `name: vault
applications:
  api:
    image: ghcr.io/acme/api:1
    volumes:
      state:
        mountPath: /var/lib/api
        size: 1GB
databases:
  main:
    engine: postgres
    version: 17
buckets:
  files:
    quotas:
      storage: 1GB
`

func TestBackupCronEvaluation(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		expr, after string
		want        []string
	}{
		{"0 3 * * *", "2026-03-02T03:00:00Z", []string{"2026-03-03T03:00:00Z", "2026-03-04T03:00:00Z"}},
		// Day 31 skips the months without one.
		{"0 0 31 * *", "2026-01-31T00:00:00Z", []string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z"}},
		// The last of February and the first of March across a leap year.
		{"30 23 28-29 2 *", "2027-02-28T23:30:00Z", []string{"2028-02-28T23:30:00Z", "2028-02-29T23:30:00Z", "2029-02-28T23:30:00Z"}},
		{"0 0 29 2 *", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		// Month end to the next month, and the year end.
		{"15 0 1 * *", "2026-12-31T23:59:00Z", []string{"2027-01-01T00:15:00Z", "2027-02-01T00:15:00Z"}},
		// Evaluated in UTC whatever the location of the time given.
		{"0 3 * * 1-5", "2026-03-06T03:00:00Z", []string{"2026-03-09T03:00:00Z", "2026-03-10T03:00:00Z"}},
	} {
		t.Run(c.expr+" after "+c.after, func(t *testing.T) {
			cs, err := runs.ParseCron(c.expr)
			if err != nil {
				t.Fatal(err)
			}
			got := cs.NextN(at(c.after).In(time.FixedZone("UTC+5", 5*3600)), len(c.want))
			var gs []string
			for _, g := range got {
				gs = append(gs, g.UTC().Format(time.RFC3339))
			}
			if strings.Join(gs, " ") != strings.Join(c.want, " ") {
				t.Fatalf("got %v, want %v", gs, c.want)
			}
		})
	}
	if cs, _ := runs.ParseCron("0 3 * * 1-5"); cs.Interval(at("2026-03-02T00:00:00Z")) != 72*time.Hour {
		t.Errorf("weekday interval = %v, want the weekend's 72h", cs.Interval(at("2026-03-02T00:00:00Z")))
	}
	for _, bad := range []string{"61 * * * *", "0 3 * * * *", "0 3 * *", "@daily", "CRON_TZ=Europe/Paris 0 3 * * *", "", "0 24 * * *", "x * * * *"} {
		if _, err := runs.ParseCron(bad); err == nil {
			t.Errorf("ParseCron(%q) accepted", bad)
		}
	}
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{{"7d", 7 * 24 * time.Hour, true}, {"2w", 14 * 24 * time.Hour, true}, {"36h", 36 * time.Hour, true},
		{"7", 0, false}, {"0s", 0, false}, {"", 0, false}, {"1y", 0, false}, {"-1d", 0, false}} {
		got, err := runs.ParseRetention(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseRetention(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// newBackupFixture is a deployed environment with a database, a bucket and
// a volume, and a backup target in a temporary directory.
func newBackupFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture(t, backupManifest, nil)
	run := f.deploy(runs.DeployRequest{})
	if res := f.execute(run.ID); !res.Finished || f.run(run.ID).Status != store.RunSucceeded {
		t.Fatalf("deploy: %+v %s", res, f.run(run.ID).Reason)
	}
	target := t.TempDir()
	if err := f.svc.SetBackupTarget(f.ctx, store.Actor{}, target); err != nil {
		t.Fatal(err)
	}
	f.reloadEnv()
	return f, target
}

func (f *fixture) setSchedule(cron, keep string) {
	f.t.Helper()
	if err := f.svc.SetBackupSchedule(f.ctx, store.Actor{}, f.reloadEnv(), cron, keep); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) fire() {
	f.t.Helper()
	if err := f.svc.FireDueBackups(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

// backups lists every backup row, deleted or not, oldest first.
func (f *fixture) backupRows() []store.Backup {
	f.t.Helper()
	all, err := f.db.Backups(f.ctx, f.env.ID, 100000)
	if err != nil {
		f.t.Fatal(err)
	}
	slices.Reverse(all)
	return all
}

// executeUnfinished executes every unfinished run to its end.
func (f *fixture) executeUnfinished() {
	f.t.Helper()
	ids, err := f.db.UnfinishedRuns(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, id := range ids {
		f.execute(id)
	}
}

func TestBackupTargetChecked(t *testing.T) {
	f := newFixture(t, backupManifest, nil)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o600)
	for _, c := range []struct{ target, want string }{
		{"s3://bucket/backups", "cannot write to s3:// URLs"},
		{"relative/dir", "absolute directory path"},
		{filepath.Join(t.TempDir(), "missing"), "does not exist"},
		{file, "not a directory"},
	} {
		err := f.svc.SetBackupTarget(f.ctx, store.Actor{}, c.target)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("target %q: %v, want %q", c.target, err, c.want)
		}
	}
	if got, _ := f.db.BackupTarget(f.ctx); got != "" {
		t.Fatalf("a refused target was stored: %q", got)
	}
	// Without a target, schedules and manual backups are refused.
	if err := f.svc.SetBackupSchedule(f.ctx, store.Actor{}, f.env, "0 3 * * *", "7d"); err == nil || !strings.Contains(err.Error(), "installation admin") {
		t.Fatalf("schedule without a target: %v", err)
	}
	dir := t.TempDir()
	if err := f.svc.SetBackupTarget(f.ctx, store.Actor{}, dir); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the check left %d files behind", len(entries))
	}
	// A schedule before the first deploy is fine; a manual backup is not.
	f.setSchedule("0 * * * *", "1d")
	if _, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv()); err == nil || !strings.Contains(err.Error(), "never been deployed") {
		t.Fatalf("manual backup before a deploy: %v", err)
	}
	f.clock.Set(start.Add(2*time.Hour + time.Second))
	f.fire()
	rows := f.backupRows()
	if len(rows) != 2 || rows[1].Skipped != "nothing deployed yet" || rows[1].RunID != nil {
		t.Fatalf("fires before the first deploy: %+v", rows)
	}
}

func TestBackupNothingToSnapshotRefused(t *testing.T) {
	f := newFixture(t, plainManifest, nil)
	if err := f.svc.SetBackupTarget(f.ctx, store.Actor{}, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.SetBackupSchedule(f.ctx, store.Actor{}, f.env, "0 3 * * *", "7d"); err == nil || !strings.Contains(err.Error(), "nothing to snapshot") {
		t.Fatalf("schedule: %v", err)
	}
	if _, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.env); err == nil || !strings.Contains(err.Error(), "nothing to snapshot") {
		t.Fatalf("manual: %v", err)
	}
}

func TestBackupSnapshotWritesOneFilePerService(t *testing.T) {
	f, target := newBackupFixture(t)
	run, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.env); err == nil {
		t.Fatal("a second manual backup started while the first runs")
	}
	f.execute(run.ID)
	if got := f.run(run.ID); got.Status != store.RunSucceeded || got.Kind != "backup" {
		t.Fatalf("run %s %s (%s)", got.Kind, got.Status, got.Reason)
	}
	b, err := f.db.BackupByRun(f.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(target, "vault", "production", b.Name)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var total int64
	for _, e := range entries {
		names = append(names, e.Name())
		st, _ := e.Info()
		total += st.Size()
	}
	want := "bucket-files.snapshot database-main.snapshot volume-api-state.snapshot"
	if strings.Join(names, " ") != want {
		t.Fatalf("files %v, want %s", names, want)
	}
	if b.Size != total || b.Origin != "manual" || b.ExpiresAt() != nil {
		t.Fatalf("backup size %d (files %d), origin %s, expires %v", b.Size, total, b.Origin, b.ExpiresAt())
	}
	for _, cp := range f.checkpoints(run.ID) {
		d := runs.DecodeCheckpointDetail(cp.Detail)
		if d.Snapshot == nil || len(d.Snapshot.SHA256) != 64 || d.Snapshot.Size == 0 {
			t.Fatalf("checkpoint %s records %+v", cp.Name, d.Snapshot)
		}
	}
	if err := f.svc.RemoveBackup(f.ctx, store.Actor{}, f.env, b.ID, "wrong"); err == nil {
		t.Fatal("removed without the typed name")
	}
	if err := f.svc.RemoveBackup(f.ctx, store.Actor{}, f.env, b.ID, b.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the snapshot's files are still there: %v", err)
	}
}

func TestBackupCatchUpAfterDowntimeAndClockSteppingBack(t *testing.T) {
	f, _ := newBackupFixture(t)
	f.setSchedule("0 * * * *", "30d") // start is 13:00
	f.clock.Set(start.Add(time.Hour + 30*time.Second))
	f.fire()
	f.executeUnfinished()
	if rows := f.backupRows(); len(rows) != 1 || rows[0].RunID == nil {
		t.Fatalf("first fire: %+v", rows)
	}
	// A day without any Studio running: one catch-up, 23 skipped.
	f.clock.Set(start.Add(25*time.Hour + 10*time.Second))
	f.fire()
	f.fire()
	f.executeUnfinished()
	rows := f.backupRows()
	var snaps, skipped int
	for _, b := range rows {
		if b.RunID != nil {
			snaps++
		} else if strings.HasPrefix(b.Skipped, "missed") {
			skipped++
		}
	}
	if snaps != 2 || skipped != 23 || len(rows) != 25 {
		t.Fatalf("after a day down: %d snapshots, %d skipped, %d rows; want 2, 23, 25", snaps, skipped, len(rows))
	}
	if last := rows[len(rows)-1]; last.RunID == nil || !last.ScheduledAt.Equal(start.Add(25*time.Hour)) {
		t.Fatalf("the catch-up is not the newest fire: %+v", last)
	}
	// The wall clock steps back an hour and forward again: nothing twice.
	f.clock.Set(start.Add(24*time.Hour + 10*time.Second))
	f.fire()
	f.clock.Set(start.Add(25*time.Hour + 20*time.Second))
	f.fire()
	if n := len(f.backupRows()); n != 25 {
		t.Fatalf("after the clock stepped back: %d rows, want 25", n)
	}
}

func TestBackupOverlappingFireIsSkipped(t *testing.T) {
	f, _ := newBackupFixture(t)
	f.setSchedule("*/5 * * * *", "1d")
	f.clock.Set(start.Add(5*time.Minute + time.Second))
	f.fire()
	f.clock.Set(start.Add(10*time.Minute + time.Second))
	f.fire() // the first snapshot was never executed: it still runs
	rows := f.backupRows()
	if len(rows) != 2 || rows[0].RunID == nil || rows[1].RunID != nil || !strings.Contains(rows[1].Skipped, "still running") {
		t.Fatalf("overlap: %+v", rows)
	}
	if a, err := f.db.BackupAlarmOf(f.ctx, f.env.ID); err != nil || a == nil || !strings.Contains(a.Reason, "skipped") {
		t.Fatalf("alarm after a skipped fire: %+v %v", a, err)
	}
	f.executeUnfinished()
	f.clock.Set(start.Add(15*time.Minute + time.Second))
	f.fire()
	if rows := f.backupRows(); len(rows) != 3 || rows[2].RunID == nil {
		t.Fatalf("after the snapshot finished: %+v", rows)
	}
	f.executeUnfinished()
	if a, err := f.db.BackupAlarmOf(f.ctx, f.env.ID); err != nil || a != nil {
		t.Fatalf("alarm after a good fire: %+v %v", a, err)
	}
	// Nothing succeeds for more than twice the interval (5m): the alarm.
	f.clock.Set(start.Add(26 * time.Minute))
	if a, _ := f.db.BackupAlarmOf(f.ctx, f.env.ID); a == nil || !strings.Contains(a.Reason, "10 minutes") {
		t.Fatalf("alarm after 11 minutes without a snapshot: %+v", a)
	}
	if all, _ := f.db.BackupAlarms(f.ctx); len(all) != 1 || all[0].Environment != "production" {
		t.Fatalf("BackupAlarms = %+v", all)
	}
}

func TestBackupRetentionKeepsNewestGood(t *testing.T) {
	f, target := newBackupFixture(t)
	f.setSchedule("0 * * * *", "5h")
	// A manual snapshot never expires.
	manual, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.env)
	if err != nil {
		t.Fatal(err)
	}
	f.execute(manual.ID)
	failing := map[int]bool{8: true, 9: true, 10: true, 17: true, 26: true, 27: true, 28: true, 29: true, 30: true}
	for i := 1; i <= 30; i++ {
		f.faults.Set(func(fl *runs.Faults) {
			fl.Snapshot = nil
			if failing[i] {
				// A partial snapshot: the database is written, the bucket fails.
				fl.Snapshot = map[string]string{"bucket files": "disk quota exceeded"}
			}
		})
		f.clock.Set(start.Add(time.Duration(i)*time.Hour + time.Second))
		f.fire()
		f.executeUnfinished()
	}
	// The last successful fire was 25 (at 25:00:01): its retention deleted
	// everything older than 5h (20 and before, failed or not) and kept
	// 21..25; the failed 26..30 ran no retention.
	var kept []int
	for _, b := range f.backupRows() {
		if b.Origin == "scheduled" {
			kept = append(kept, int(b.ScheduledAt.Sub(start)/time.Hour))
		}
	}
	want := []int{21, 22, 23, 24, 25, 26, 27, 28, 29, 30}
	if !slices.Equal(kept, want) {
		t.Fatalf("scheduled snapshots kept at hours %v, want %v", kept, want)
	}
	// Long after, with every later snapshot failed, the newest good one
	// (25) is never expired; the failed ones are.
	expired, err := f.db.ExpiredBackups(f.ctx, f.env.ID, start.Add(1000*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var hours []int
	for _, b := range expired {
		hours = append(hours, int(b.ScheduledAt.Sub(start)/time.Hour))
	}
	if slices.Contains(hours, 25) || len(hours) != 9 {
		t.Fatalf("expired long after: %v; want all but 25", hours)
	}
	// Files: the manual snapshot and each kept scheduled one (failed ones
	// keep what they wrote).
	entries, _ := os.ReadDir(filepath.Join(target, "vault", "production"))
	if len(entries) != len(want)+1 {
		t.Fatalf("%d snapshot directories, want %d", len(entries), len(want)+1)
	}
	if _, err := f.db.BackupByRun(f.ctx, manual.ID); err != nil {
		t.Fatalf("the manual snapshot expired: %v", err)
	}
}

func TestBackupFiresExactlyOnceAcrossTwoProcesses(t *testing.T) {
	f, _ := newBackupFixture(t)
	f.setSchedule("* * * * *", "30d")
	other := runs.NewService(f.db, f.vault, f.local, f.clock.Now, nil)
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
	const fires = 100
	for i := 1; i <= fires; i++ {
		at := start.Add(time.Duration(i) * time.Minute)
		f.clock.Set(at.Add(time.Second))
		// Both processes' periodic jobs race, and so do direct calls.
		var wg sync.WaitGroup
		for _, svc := range []*runs.Service{f.svc, other, f.svc, other} {
			wg.Go(func() {
				if err := svc.FireDueBackups(f.ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		var rid *int64
		for range 500 {
			err := f.db.Pool.QueryRow(f.ctx, `SELECT b.run_id FROM backups b JOIN runs r ON r.id = b.run_id
				WHERE b.environment_id = $1 AND b.scheduled_at = $2 AND r.finished_at IS NOT NULL`, f.env.ID, at).Scan(&rid)
			if err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if rid == nil {
			t.Fatalf("fire %d: no finished snapshot", i)
		}
	}
	var snaps, distinct, runsN int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*), count(DISTINCT scheduled_at), (SELECT count(*) FROM runs WHERE kind = 'backup')
		FROM backups WHERE run_id IS NOT NULL`).Scan(&snaps, &distinct, &runsN); err != nil {
		t.Fatal(err)
	}
	if snaps != fires || distinct != fires || runsN != fires {
		t.Fatalf("%d snapshots (%d distinct fire times), %d backup runs; want %d each", snaps, distinct, runsN, fires)
	}
}

// snapshot takes a snapshot of f's environment by hand and returns it,
// completed.
func snapshot(t *testing.T, f *fixture) *store.Backup {
	t.Helper()
	run, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	b, err := f.db.BackupByRun(f.ctx, run.ID)
	if err != nil || !b.Succeeded() {
		t.Fatalf("snapshot: %v %+v", err, b)
	}
	return b
}

func TestRestoreWithCorruptedFileBlocksDeploysUntilAccept(t *testing.T) {
	f, target := newBackupFixture(t)
	snap := func() *store.Backup { return snapshot(t, f) }
	restore := func(b *store.Backup) *store.Run {
		if _, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, "nope"); err == nil {
			t.Fatal("restore without the typed name")
		}
		run, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, "production")
		if err != nil {
			t.Fatal(err)
		}
		f.execute(run.ID)
		return f.run(run.ID)
	}
	bad := snap()
	os.WriteFile(filepath.Join(target, "vault", "production", bad.Name, "database-main.snapshot"), []byte("corrupted"), 0o600)
	if run := restore(bad); run.Status != store.RunFailed || !strings.Contains(run.Reason, "corrupted") {
		t.Fatalf("restore of a corrupted file: %s (%s)", run.Status, run.Reason)
	}
	if env := f.reloadEnv(); env.State != store.EnvironmentRestoreFailed {
		t.Fatalf("state %q, want %q", env.State, store.EnvironmentRestoreFailed)
	}
	if _, err := f.svc.StartDeploy(f.ctx, store.Actor{}, f.env, runs.DeployRequest{Redeploy: true}); err == nil || !strings.Contains(err.Error(), "restore failed") {
		t.Fatalf("deploy while down: %v", err)
	}
	if _, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.env); err == nil {
		t.Fatal("manual backup while down")
	}
	// A missing file fails the same way.
	good := bad
	os.Remove(filepath.Join(target, "vault", "production", bad.Name, "database-main.snapshot"))
	if run := restore(good); run.Status != store.RunFailed || !strings.Contains(run.Reason, "missing") {
		t.Fatalf("restore of a missing file: %s (%s)", run.Status, run.Reason)
	}
	// Accepting the data as it is allows deploys again.
	if err := f.svc.AcceptData(f.ctx, store.Actor{}, f.reloadEnv(), "x"); err == nil {
		t.Fatal("accepted without the typed name")
	}
	if err := f.svc.AcceptData(f.ctx, store.Actor{}, f.reloadEnv(), "production"); err != nil {
		t.Fatal(err)
	}
	if env := f.reloadEnv(); env.State != store.EnvironmentActive {
		t.Fatalf("state after accept %q", env.State)
	}
	// A good restore leaves it active too, after a failed one.
	fresh := snap()
	os.Truncate(filepath.Join(target, "vault", "production", fresh.Name, "bucket-files.snapshot"), 10)
	restore(fresh)
	if env := f.reloadEnv(); env.State != store.EnvironmentRestoreFailed {
		t.Fatalf("state %q after a truncated file", env.State)
	}
	// A good restore after a failed one makes it active again, with no accept.
	if err := f.svc.AcceptData(f.ctx, store.Actor{}, f.reloadEnv(), "production"); err != nil {
		t.Fatal(err)
	}
	ok := snap()
	os.Truncate(filepath.Join(target, "vault", "production", fresh.Name, "volume-api-state.snapshot"), 10)
	restore(fresh)
	if env := f.reloadEnv(); env.State != store.EnvironmentRestoreFailed {
		t.Fatalf("state %q after a second failed restore", env.State)
	}
	if run := restore(ok); run.Status != store.RunSucceeded {
		t.Fatalf("good restore: %s (%s)", run.Status, run.Reason)
	}
	if env := f.reloadEnv(); env.State != store.EnvironmentActive {
		t.Fatalf("state after a good restore %q", env.State)
	}
	f.deploy(runs.DeployRequest{Redeploy: true})
}

// TestDeployRefusedWhileARestoreWaits: a restore stops the environment only
// once its job runs; until then the environment still reads active. A
// deploy asked for meanwhile must not start beside the restore, and a
// restore asked for while a deploy waits must not either.
func TestDeployRefusedWhileARestoreWaits(t *testing.T) {
	f, _ := newBackupFixture(t)
	b := snapshot(t, f)
	restore, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	if env := f.reloadEnv(); env.State != store.EnvironmentActive {
		t.Fatalf("state %q before the restore's job ran, want it still active (the case under test)", env.State)
	}
	_, err = f.svc.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), runs.DeployRequest{Redeploy: true})
	if apperr.CodeOf(err) != apperr.Conflict || !strings.Contains(err.Error(), fmt.Sprintf("Restore run %d", restore.ID)) {
		t.Fatalf("deploy while restore run %d waits: %v; want it refused, naming the restore", restore.ID, err)
	}
	var deploys int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM runs WHERE environment_id = $1 AND kind = 'deploy' AND finished_at IS NULL`, f.env.ID).Scan(&deploys); err != nil || deploys != 0 {
		t.Fatalf("%d unfinished deploys after the refusal (%v), want none", deploys, err)
	}
	f.execute(restore.ID)
	if r := f.run(restore.ID); r.Status != store.RunSucceeded {
		t.Fatalf("restore: %s (%s)", r.Status, r.Reason)
	}
	// Once it has finished, deploys start again; and a restore waits for
	// a deploy that is under way.
	dep, err := f.svc.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), runs.DeployRequest{Redeploy: true})
	if err != nil {
		t.Fatalf("deploy after the restore: %v", err)
	}
	if _, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, "production"); apperr.CodeOf(err) != apperr.Conflict || !strings.Contains(err.Error(), fmt.Sprintf("Deploy run %d", dep.ID)) {
		t.Fatalf("restore while deploy run %d waits: %v; want it refused, naming the deploy", dep.ID, err)
	}
}

// TestBackupFiresAreClaimedAsTheMinuteStarts: cron fires fall on whole
// minutes, so the claim runs a second after each minute starts, whenever
// the process started: a fire is never claimed a minute late.
func TestBackupFiresAreClaimedAsTheMinuteStarts(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse("15:04:05.000", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct{ now, want string }{
		{"05:49:00.000", "05:49:01.000"},
		{"05:49:00.500", "05:49:01.000"},
		{"05:49:01.000", "05:50:01.000"},
		{"05:49:47.300", "05:50:01.000"},
		{"23:59:59.999", "00:00:01.000"},
	} {
		if got := runs.BackupClaimAfter(at(c.now)); !got.Equal(at(c.want)) && !got.Equal(at(c.want).Add(24*time.Hour)) {
			t.Errorf("claim after %s = %s, want %s", c.now, got.Format("15:04:05.000"), c.want)
		}
	}
}
