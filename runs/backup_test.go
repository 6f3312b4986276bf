package runs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/local"
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
	t.Parallel()
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
	t.Parallel()
	f := newFixture(t, backupManifest, nil)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o600)
	for _, c := range []struct{ target, want string }{
		{"s3://bucket/backups", "Write the endpoint"},
		{"gs://bucket/backups", "cannot write to gs:// URLs"},
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
	// The check leaves only the marker naming this installation.
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != local.TargetMarker {
		t.Fatalf("the target holds %v after it was set, want only %s", entries, local.TargetMarker)
	}
	marker, _ := os.ReadFile(filepath.Join(dir, local.TargetMarker))
	var inst string
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT value FROM installation_settings WHERE key = 'installation_id'`).Scan(&inst); err != nil || !strings.Contains(string(marker), "installation "+inst+"\n") {
		t.Fatalf("marker %q does not name installation %q (%v)", marker, inst, err)
	}
	// Set again: the marker is this installation's, so it is kept.
	if err := f.svc.SetBackupTarget(f.ctx, store.Actor{}, dir); err != nil {
		t.Fatalf("setting the same target again: %v", err)
	}
	// Refused: a link, a directory no one may write to (refused even as
	// root, which the kernel would let write), and another installation's
	// target. The stored target stays the same.
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(real, link)
	readOnly := t.TempDir()
	os.Chmod(readOnly, 0o555)
	t.Cleanup(func() { os.Chmod(readOnly, 0o755) })
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, local.TargetMarker), []byte("installation studio-someone-else\n"), 0o640)
	for _, c := range []struct{ target, want string }{
		{link, "symbolic link (to " + real + ")"},
		{readOnly, "cannot write to this directory: it is read-only"},
		{foreign, "holds the backups of another Skali installation (its .skali-backup-target file names installation studio-someone-else)"},
	} {
		err := f.svc.SetBackupTarget(f.ctx, store.Actor{}, c.target)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("target %q: %v, want %q", c.target, err, c.want)
		}
	}
	if entries, _ := os.ReadDir(real); len(entries) != 0 {
		t.Errorf("a refused link's directory was written to: %v", entries)
	}
	if got, _ := f.db.BackupTarget(f.ctx); got != dir {
		t.Fatalf("target %q after refusals, want %q", got, dir)
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	f, _ := newBackupFixture(t)
	f.setSchedule("*/5 * * * *", "1d")
	f.clock.Set(start.Add(5*time.Minute + time.Second))
	f.fire()
	f.clock.Set(start.Add(10*time.Minute + time.Second))
	f.fire() // the first snapshot was never executed: it still runs
	rows := f.backupRows()
	if len(rows) != 2 || rows[0].RunID == nil || rows[1].RunID != nil ||
		rows[1].Skipped != fmt.Sprintf("the previous snapshot (backup run %d) was still running", *rows[0].RunID) {
		t.Fatalf("overlap: %+v; want the fire skipped, naming the running snapshot", rows)
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
	t.Parallel()
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
		f.faults.Set(func(fl *local.Faults) {
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
	// Files: the manual snapshot and each kept good scheduled one (21..25);
	// a failed snapshot leaves no partial directory, though the database
	// was written before the bucket failed.
	entries, _ := os.ReadDir(filepath.Join(target, "vault", "production"))
	if len(entries) != 5+1 {
		t.Fatalf("%d snapshot directories, want %d", len(entries), 5+1)
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("left in the environment's directory: %s", e.Name())
		}
	}
	if _, err := f.db.BackupByRun(f.ctx, manual.ID); err != nil {
		t.Fatalf("the manual snapshot expired: %v", err)
	}
}

func TestBackupFiresExactlyOnceAcrossTwoProcesses(t *testing.T) {
	t.Parallel()
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

// corrupt changes a file's bytes and keeps its size, so only its checksum
// can tell; it returns the SHA-256 of what it wrote.
func corrupt(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// holdingBackup is the fixture's local platform with one backup step held:
// the snapshotAt-th snapshot (from 1), or the stop of the environment
// (stop), waits once it has started until release.
type holdingBackup struct {
	platform.Platform
	t          *testing.T
	f          *fixture
	snapshotAt int32
	stop       bool
	snapshots  atomic.Int32
	started    chan struct{}
	proceed    chan struct{}
	startOnce  sync.Once
	releaseOne sync.Once
}

// holdBackup wraps f's local platform; the held step goes on at the end
// of the test if the test has not let it go on before.
func holdBackup(t *testing.T, f *fixture) *holdingBackup {
	h := &holdingBackup{Platform: f.local, t: t, f: f, started: make(chan struct{}), proceed: make(chan struct{})}
	t.Cleanup(h.release)
	return h
}

func (h *holdingBackup) Unwrap() platform.Platform { return h.Platform }

func (h *holdingBackup) hold(ctx context.Context) error {
	h.startOnce.Do(func() { close(h.started) })
	select {
	case <-h.proceed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release lets the held step go on.
func (h *holdingBackup) release() { h.releaseOne.Do(func() { close(h.proceed) }) }

func (h *holdingBackup) Snapshot(ctx context.Context, env platform.Env, svc platform.SnapshotService, loc platform.SnapshotLocation) (platform.SnapshotFile, error) {
	if h.snapshots.Add(1) == h.snapshotAt {
		if err := h.hold(ctx); err != nil {
			return platform.SnapshotFile{}, err
		}
	}
	return h.f.local.Snapshot(ctx, env, svc, loc)
}

func (h *holdingBackup) StopEnvironment(ctx context.Context, env platform.Env) error {
	if h.stop {
		if err := h.hold(ctx); err != nil {
			return err
		}
	}
	return h.f.local.StopEnvironment(ctx, env)
}

func (h *holdingBackup) StartEnvironment(ctx context.Context, env platform.Env) error {
	return h.f.local.StartEnvironment(ctx, env)
}

func (h *holdingBackup) Restore(ctx context.Context, env platform.Env, svc platform.SnapshotService, loc platform.SnapshotLocation, file platform.SnapshotFile) error {
	return h.f.local.Restore(ctx, env, svc, loc, file)
}

// execute executes the run once on this platform, in the background.
func (h *holdingBackup) execute(runID int64) <-chan error {
	svc := runs.NewService(h.f.db, h.f.vault, h, h.f.clock.Now, nil)
	done := make(chan error, 1)
	go func() { _, err := svc.Runner.Execute(h.f.ctx, runID); done <- err }()
	return done
}

// waitHeld waits, up to a minute, until the held step has started.
func (h *holdingBackup) waitHeld(runID int64, done <-chan error) {
	h.t.Helper()
	select {
	case <-h.started:
	case err := <-done:
		got := h.f.run(runID)
		h.t.Fatalf("run %d ended (%v) before its held step: %s (%s)", runID, err, got.Status, got.Reason)
	case <-time.After(time.Minute):
		h.t.Fatalf("the held step of run %d did not start within a minute; its checkpoints: %s", runID, checkpointStates(h.f.checkpoints(runID)))
	}
}

// waitDone waits, up to a minute, until the execution has ended.
func (h *holdingBackup) waitDone(runID int64, done <-chan error) {
	h.t.Helper()
	select {
	case err := <-done:
		if err != nil {
			h.t.Fatalf("execute run %d: %v", runID, err)
		}
	case <-time.After(time.Minute):
		h.t.Fatalf("run %d did not end within a minute of its held step going on; its checkpoints: %s", runID, checkpointStates(h.f.checkpoints(runID)))
	}
}

// checkpointStates says where each checkpoint stands.
func checkpointStates(cps []store.Checkpoint) string {
	var out []string
	for _, cp := range cps {
		out = append(out, cp.Name+": "+cp.Status)
	}
	return strings.Join(out, ", ")
}

// restoreRuns counts the environment's restore runs.
func (f *fixture) restoreRuns() int {
	f.t.Helper()
	var n int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM runs WHERE environment_id = $1 AND kind = 'restore'`, f.env.ID).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// TestRestoreVerifiesBeforeItStops: every file's presence, size and
// SHA-256 are checked while the environment still runs; a bad snapshot is
// refused with the reason and nothing stops.
func TestRestoreVerifiesBeforeItStops(t *testing.T) {
	t.Parallel()
	f, target := newBackupFixture(t)
	file := func(b *store.Backup, name string) string {
		return filepath.Join(target, "vault", "production", b.Name, name)
	}
	startRestore := func(b *store.Backup) (*store.Run, error) {
		return f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, "production")
	}

	// Same size, other bytes: only reading the whole file tells. The run
	// fails at its first checkpoint; the environment was never stopped.
	bad := snapshot(t, f)
	sum := corrupt(t, file(bad, "database-main.snapshot"))
	if _, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), bad.ID, "nope"); err == nil {
		t.Fatal("restore without the typed name")
	}
	run, err := startRestore(bad)
	if err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	got := f.run(run.ID)
	if got.Status != store.RunFailed || !strings.Contains(got.Reason, "database-main.snapshot does not match its recorded checksum") || !strings.Contains(got.Reason, "Nothing was stopped") {
		t.Fatalf("restore of a corrupted file: %s (%s)", got.Status, got.Reason)
	}
	if strings.Contains(got.Reason, sum[:8]) {
		t.Fatalf("the reason shows the checksum of the file found: %s", got.Reason)
	}
	for _, cp := range f.checkpoints(run.ID) {
		want := store.CheckpointNotRun
		if cp.Kind == runs.KindVerify {
			want = store.CheckpointFailed
		}
		if cp.Status != want {
			t.Errorf("checkpoint %s is %s, want %s", cp.Name, cp.Status, want)
		}
	}
	if env := f.reloadEnv(); env.State != store.EnvironmentActive {
		t.Fatalf("state %q after a refused restore, want it active", env.State)
	}

	// A missing or truncated file is refused at once: no run, nothing stops.
	before := f.restoreRuns()
	missing := snapshot(t, f)
	os.Remove(file(missing, "bucket-files.snapshot"))
	if _, err := startRestore(missing); err == nil || !strings.Contains(err.Error(), "Its file bucket-files.snapshot is missing. Nothing was stopped.") {
		t.Fatalf("restore of a missing file: %v", err)
	}
	truncated := snapshot(t, f)
	os.Truncate(file(truncated, "volume-api-state.snapshot"), 10)
	if _, err := startRestore(truncated); err == nil || !strings.Contains(err.Error(), "is not the size recorded") {
		t.Fatalf("restore of a truncated file: %v", err)
	}
	if n := f.restoreRuns(); n != before {
		t.Fatalf("%d restore runs after the refusals, want %d", n, before)
	}

	// A file that changes after it was verified (while the environment
	// stops) fails its restore: the environment stays down and deploys
	// are refused until a restore completes or the data is accepted.
	late := snapshot(t, f)
	run, err = startRestore(late)
	if err != nil {
		t.Fatal(err)
	}
	// The stop is held while the file changes: verified, not yet restored.
	stop := holdBackup(t, f)
	stop.stop = true
	done := stop.execute(run.ID)
	stop.waitHeld(run.ID, done)
	if cp, _ := f.checkpoint(run.ID, runs.KindVerify); cp.Status != store.CheckpointSucceeded {
		t.Fatalf("the environment stops with its verification %s, want succeeded", cp.Status)
	}
	if cp, _ := f.checkpoint(run.ID, runs.KindStop); cp.Status != store.CheckpointRunning {
		t.Fatalf("the stop checkpoint is %s while the stop is held, want running", cp.Status)
	}
	corrupt(t, file(late, "database-main.snapshot"))
	stop.release()
	stop.waitDone(run.ID, done)
	if got := f.run(run.ID); got.Status != store.RunFailed || !strings.Contains(got.Reason, "Restoring database main failed: database-main.snapshot does not match its recorded checksum") {
		t.Fatalf("restore of a file changed after verification: %s (%s)", got.Status, got.Reason)
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
	// A good restore succeeds and leaves it active.
	ok := snapshot(t, f)
	run, err = startRestore(ok)
	if err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("good restore: %s (%s)", got.Status, got.Reason)
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
	t.Parallel()
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
	if apperr.CodeOf(err) != apperr.Conflict || !strings.Contains(err.Error(), fmt.Sprintf("Restore run #%d", restore.Number)) {
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
	if _, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, "production"); apperr.CodeOf(err) != apperr.Conflict || !strings.Contains(err.Error(), fmt.Sprintf("Deploy run #%d", dep.Number)) {
		t.Fatalf("restore while deploy run %d waits: %v; want it refused, naming the deploy", dep.ID, err)
	}
}

// TestBackupFiresAreClaimedAsTheMinuteStarts: cron fires fall on whole
// minutes, so the claim runs a second after each minute starts, whenever
// the process started: a fire is never claimed a minute late.
func TestBackupFiresAreClaimedAsTheMinuteStarts(t *testing.T) {
	t.Parallel()
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

// missing returns the reason f's backups page shows snapshot b as missing
// for, or "".
func (f *fixture) missing(b *store.Backup) string {
	f.t.Helper()
	list, err := f.db.Backups(f.ctx, f.env.ID, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	m, err := f.svc.MissingSnapshots(f.ctx, f.reloadEnv(), list)
	if err != nil {
		f.t.Fatal(err)
	}
	return m[b.ID]
}

// fireOnce moves the clock to the next hourly fire and executes the
// snapshot it takes; it returns that snapshot's run.
func (f *fixture) fireOnce(hour int) *store.Run {
	f.t.Helper()
	f.clock.Set(start.Add(time.Duration(hour)*time.Hour + time.Second))
	f.fire()
	f.executeUnfinished()
	rows := f.backupRows()
	last := rows[len(rows)-1]
	if last.RunID == nil {
		f.t.Fatalf("the fire of hour %d took no snapshot: %s", hour, last.Skipped)
	}
	return f.run(*last.RunID)
}

// TestBackupTargetDeletedIsNeverRecreated: a deleted or unmounted target
// fails every snapshot with the reason and is never created again; the
// alarm stays on; the snapshots lost with it are missing and refused for
// restore, and come back when the disk does.
func TestBackupTargetDeletedIsNeverRecreated(t *testing.T) {
	t.Parallel()
	f, target := newBackupFixture(t)
	f.setSchedule("0 * * * *", "30d")
	if run := f.fireOnce(1); run.Status != store.RunSucceeded {
		t.Fatalf("first fire: %s (%s)", run.Status, run.Reason)
	}
	kept := f.backupRows()[0]
	if f.missing(&kept) != "" {
		t.Fatalf("a good snapshot is missing: %s", f.missing(&kept))
	}

	// The target is deleted (here: moved away, so it can come back).
	away := target + ".away"
	if err := os.Rename(target, away); err != nil {
		t.Fatal(err)
	}
	run := f.fireOnce(2)
	if run.Status != store.RunFailed || !strings.Contains(run.Reason, "the backup target "+target+" does not exist") {
		t.Fatalf("snapshot into a deleted target: %s (%s)", run.Status, run.Reason)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("the deleted target was created again: %v", err)
	}
	a, err := f.db.BackupAlarmOf(f.ctx, f.env.ID)
	if err != nil || a == nil || !strings.Contains(a.Reason, "failed") || !strings.Contains(a.Reason, "does not exist") {
		t.Fatalf("alarm after a snapshot into a deleted target: %+v %v", a, err)
	}
	if why := f.missing(&kept); !strings.Contains(why, "does not exist") {
		t.Fatalf("the snapshot lost with the target is not missing: %q", why)
	}
	if _, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv()); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("manual snapshot into a deleted target: %v", err)
	}
	before := f.restoreRuns()
	if _, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), kept.ID, "production"); err == nil || !strings.Contains(err.Error(), "cannot be restored") {
		t.Fatalf("restore of a snapshot lost with its target: %v", err)
	}
	if f.restoreRuns() != before || f.reloadEnv().State != store.EnvironmentActive {
		t.Fatal("a restore of a lost snapshot started or stopped the environment")
	}

	// The disk is not mounted: an empty directory in its place. Nothing is
	// written into it; the alarm stays.
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	run = f.fireOnce(3)
	if run.Status != store.RunFailed || !strings.Contains(run.Reason, "has no .skali-backup-target file: its disk may not be mounted") {
		t.Fatalf("snapshot into an unmounted target: %s (%s)", run.Status, run.Reason)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Fatalf("written into the mount point of an unmounted target: %v", entries)
	}
	if a, _ := f.db.BackupAlarmOf(f.ctx, f.env.ID); a == nil || !strings.Contains(a.Reason, "may not be mounted") {
		t.Fatalf("alarm after a snapshot into an unmounted target: %+v", a)
	}
	if why := f.missing(&kept); !strings.Contains(why, "may not be mounted") {
		t.Fatalf("missing reason with the disk unmounted: %q", why)
	}
	// Mounted again: the snapshot is back, a new one succeeds, the alarm ends.
	os.Remove(target)
	if err := os.Rename(away, target); err != nil {
		t.Fatal(err)
	}
	if why := f.missing(&kept); why != "" {
		t.Fatalf("missing after the disk came back: %q", why)
	}
	if run := f.fireOnce(4); run.Status != store.RunSucceeded {
		t.Fatalf("snapshot after the disk came back: %s (%s)", run.Status, run.Reason)
	}
	if a, _ := f.db.BackupAlarmOf(f.ctx, f.env.ID); a != nil {
		t.Fatalf("alarm after a good snapshot: %+v", a)
	}
	// Nothing repeated: one snapshot per fire, two failed without a trace.
	entries, _ := os.ReadDir(filepath.Join(target, "vault", "production"))
	if rows := f.backupRows(); len(rows) != 4 || len(entries) != 2 {
		t.Fatalf("%d backups and %d snapshot directories, want 4 and 2", len(rows), len(entries))
	}
}

// TestBackupTargetNotWritable: a target no one may write to (chmod a-w;
// the tests run as root, which the kernel lets write anyway, so the
// Studio's own check is what refuses it) or replaced by a file fails the
// snapshot with the reason, and keeps what it holds.
func TestBackupTargetNotWritable(t *testing.T) {
	t.Parallel()
	f, target := newBackupFixture(t)
	kept := snapshot(t, f)
	f.setSchedule("0 * * * *", "30d")

	os.Chmod(target, 0o555)
	t.Cleanup(func() { os.Chmod(target, 0o755) })
	if _, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv()); err == nil || !strings.Contains(err.Error(), "cannot be written: it is read-only") {
		t.Fatalf("manual snapshot into a read-only target: %v", err)
	}
	run := f.fireOnce(1)
	if run.Status != store.RunFailed || !strings.Contains(run.Reason, "cannot be written: it is read-only") {
		t.Fatalf("scheduled snapshot into a read-only target: %s (%s)", run.Status, run.Reason)
	}
	if a, _ := f.db.BackupAlarmOf(f.ctx, f.env.ID); a == nil || !strings.Contains(a.Reason, "read-only") ||
		!strings.HasPrefix(a.Reason, "The last scheduled fire (") || !strings.Contains(a.Reason, "failed: ") || a.RunID == nil || *a.RunID != run.ID {
		t.Fatalf("alarm: %+v, want the fire's reason and run %d", a, run.ID)
	}
	// What it holds can still be restored.
	if why := f.missing(kept); why != "" {
		t.Fatalf("a snapshot on a read-only target is missing: %s", why)
	}
	restore, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), kept.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	f.execute(restore.ID)
	if got := f.run(restore.ID); got.Status != store.RunSucceeded {
		t.Fatalf("restore from a read-only target: %s (%s)", got.Status, got.Reason)
	}
	if entries, _ := os.ReadDir(filepath.Join(target, "vault", "production")); len(entries) != 1 {
		t.Fatalf("%d snapshot directories, want the one taken before", len(entries))
	}

	// Replaced by a file.
	os.Chmod(target, 0o755)
	os.RemoveAll(target)
	os.WriteFile(target, []byte("not a directory"), 0o644)
	if run := f.fireOnce(2); run.Status != store.RunFailed || !strings.Contains(run.Reason, "is no longer a directory") {
		t.Fatalf("snapshot into a target replaced by a file: %s (%s)", run.Status, run.Reason)
	}
	if why := f.missing(kept); !strings.Contains(why, "no longer a directory") {
		t.Fatalf("missing: %q", why)
	}
}

// TestBackupLinksAreNotFollowed: a target replaced by a symbolic link, or
// links planted inside it, never lead a snapshot, a removal or a restore
// outside the snapshot's own directory.
func TestBackupLinksAreNotFollowed(t *testing.T) {
	t.Parallel()
	f, target := newBackupFixture(t)
	envDir := filepath.Join(target, "vault", "production")
	first := snapshot(t, f)

	// The target replaced by a link to its own contents.
	moved := target + ".moved"
	os.Rename(target, moved)
	os.Symlink(moved, target)
	if _, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv()); err == nil || !strings.Contains(err.Error(), "replaced by a symbolic link") {
		t.Fatalf("snapshot into a target replaced by a link: %v", err)
	}
	if why := f.missing(first); !strings.Contains(why, "replaced by a symbolic link") {
		t.Fatalf("missing: %q", why)
	}
	if entries, _ := os.ReadDir(filepath.Join(moved, "vault", "production")); len(entries) != 1 {
		t.Fatalf("written through the link: %v", entries)
	}
	os.Remove(target)
	os.Rename(moved, target)

	// The environment's directory replaced by a link to a directory
	// outside the target that holds a file by the snapshot's name: the
	// removal deletes nothing there, and no snapshot is written there.
	outside := t.TempDir()
	victim := filepath.Join(outside, first.Name, "database-main.snapshot")
	os.MkdirAll(filepath.Dir(victim), 0o755)
	os.WriteFile(victim, []byte("precious"), 0o600)
	os.Rename(envDir, envDir+".real")
	os.Symlink(outside, envDir)
	if err := f.svc.RemoveBackup(f.ctx, store.Actor{}, f.env, first.ID, first.Name); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("removal through a link: %v", err)
	}
	if b, err := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("the removal deleted a file outside the target: %q %v", b, err)
	}
	if _, err := f.db.BackupByID(f.ctx, f.env.ID, first.ID); err != nil {
		t.Fatalf("a refused removal took the snapshot off the list: %v", err)
	}
	run, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	if got := f.run(run.ID); got.Status != store.RunFailed || !strings.Contains(got.Reason, "vault/production is a symbolic link") {
		t.Fatalf("snapshot through a link: %s (%s)", got.Status, got.Reason)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Fatalf("a snapshot was written outside the target: %v", entries)
	}
	os.Remove(envDir)
	os.Rename(envDir+".real", envDir)

	// A snapshot file replaced by a link to an identical copy outside:
	// refused as a link, not read through it.
	second := snapshot(t, f)
	file := filepath.Join(envDir, second.Name, "database-main.snapshot")
	copyOf := filepath.Join(outside, "copy")
	b, _ := os.ReadFile(file)
	os.WriteFile(copyOf, b, 0o600)
	os.Remove(file)
	os.Symlink(copyOf, file)
	if _, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), second.ID, "production"); err == nil || !strings.Contains(err.Error(), "database-main.snapshot cannot be read: it is a symbolic link") {
		t.Fatalf("restore of a linked file: %v", err)
	}

	// A snapshot's directory replaced by a link to a copy outside: the
	// removal deletes the link, not the copy.
	third := snapshot(t, f)
	thirdDir := filepath.Join(envDir, third.Name)
	copyDir := filepath.Join(outside, "third")
	os.Rename(thirdDir, copyDir)
	os.Symlink(copyDir, thirdDir)
	if err := f.svc.RemoveBackup(f.ctx, store.Actor{}, f.env, third.ID, third.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(thirdDir); !os.IsNotExist(err) {
		t.Fatalf("the link is still there: %v", err)
	}
	if entries, _ := os.ReadDir(copyDir); len(entries) != 3 {
		t.Fatalf("the removal followed the link: %d files left of 3", len(entries))
	}
}

// TestRestoreOfAFIFOIsRefusedPromptly: a FIFO in a snapshot's place is not
// a file to read; the restore is refused at once, before anything stops,
// whether it is there when the restore is asked for or appears later.
func TestRestoreOfAFIFOIsRefusedPromptly(t *testing.T) {
	// Serial: it asserts the refusal takes under 5 s of real time.
	f, target := newBackupFixture(t)
	b := snapshot(t, f)
	file := filepath.Join(target, "vault", "production", b.Name, "database-main.snapshot")
	fifo := func() {
		os.Remove(file)
		if err := syscall.Mkfifo(file, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	good, _ := os.ReadFile(file)
	fifo()
	began := time.Now()
	if _, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, "production"); err == nil || !strings.Contains(err.Error(), "database-main.snapshot cannot be read: it is not a regular file") {
		t.Fatalf("restore of a FIFO: %v", err)
	}
	if why := f.missing(b); !strings.Contains(why, "not a regular file") {
		t.Fatalf("missing: %q", why)
	}

	// Asked for while the file was good, a FIFO by the time it runs.
	os.Remove(file)
	os.WriteFile(file, good, 0o600)
	run, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	fifo()
	done := make(chan error, 1)
	go func() { _, err := f.svc.Runner.Execute(f.ctx, run.ID); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the restore of a FIFO did not end within 10 s")
	}
	if time.Since(began) > 5*time.Second {
		t.Errorf("refusing the FIFO took %s", time.Since(began))
	}
	got := f.run(run.ID)
	if got.Status != store.RunFailed || !strings.Contains(got.Reason, "not a regular file") || !strings.Contains(got.Reason, "Nothing was stopped") {
		t.Fatalf("restore of a FIFO: %s (%s)", got.Status, got.Reason)
	}
	if cp, _ := f.checkpoint(run.ID, runs.KindStop); cp.Status != store.CheckpointNotRun {
		t.Fatalf("the stop checkpoint is %s", cp.Status)
	}
	if env := f.reloadEnv(); env.State != store.EnvironmentActive {
		t.Fatalf("state %q, want active", env.State)
	}
}

// TestRestoreCancelledWhileItReads: Cancel stops a restore in the middle
// of reading a large file, not after it; cancelled before the stop, the
// environment keeps running.
func TestRestoreCancelledWhileItReads(t *testing.T) {
	t.Parallel()
	f, target := newBackupFixture(t)
	b := snapshot(t, f)
	// A 64 GB sparse file, recorded as the snapshot's: reading it through
	// takes far longer than the test waits.
	const size = 64 << 30
	file := filepath.Join(target, "vault", "production", b.Name, "database-main.snapshot")
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Pool.Exec(f.ctx, `UPDATE run_checkpoints SET detail = jsonb_set(detail, '{snapshot,size}', to_jsonb($2::bigint))
		WHERE run_id = $1 AND detail->'snapshot'->>'file' = 'database-main.snapshot'`, *b.RunID, int64(size)); err != nil {
		t.Fatal(err)
	}
	run, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := f.svc.Runner.Execute(f.ctx, run.ID); done <- err }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if cp, _ := f.checkpoint(run.ID, runs.KindVerify); cp.Status == store.CheckpointRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the verification never started")
		}
	}
	time.Sleep(300 * time.Millisecond)
	asked := time.Now()
	if _, err := f.svc.Cancel(f.ctx, store.Actor{}, f.reloadEnv(), run.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled restore still reads after 10 s")
	}
	t.Logf("the restore ended %s after it was cancelled", time.Since(asked).Round(time.Millisecond))
	got := f.run(run.ID)
	if got.Status != store.RunCancelled {
		t.Fatalf("restore: %s (%s), want cancelled", got.Status, got.Reason)
	}
	if cp, _ := f.checkpoint(run.ID, runs.KindVerify); cp.Status != store.CheckpointSkipped || !strings.Contains(cp.Warning, "nothing was stopped") {
		t.Fatalf("verify checkpoint %s (%s)", cp.Status, cp.Warning)
	}
	if env := f.reloadEnv(); env.State != store.EnvironmentActive {
		t.Fatalf("state %q after a restore cancelled before the stop", env.State)
	}
}

// TestBackupFailedSnapshotLeavesNoDirectory: a snapshot that fails after
// writing some of its files, or is cancelled, leaves nothing behind.
func TestBackupFailedSnapshotLeavesNoDirectory(t *testing.T) {
	t.Parallel()
	f, target := newBackupFixture(t)
	f.faults.Set(func(fl *local.Faults) { fl.Snapshot = map[string]string{"volume api/state": "disk quota exceeded"} })
	run, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	if got := f.run(run.ID); got.Status != store.RunFailed || !strings.Contains(got.Reason, "disk quota exceeded") {
		t.Fatalf("snapshot: %s (%s)", got.Status, got.Reason)
	}
	if entries, _ := os.ReadDir(filepath.Join(target, "vault", "production")); len(entries) != 0 {
		t.Fatalf("a failed snapshot left %v", entries)
	}
	f.faults.Set(func(fl *local.Faults) { fl.Snapshot = nil })

	// Cancelled between two services: what the first wrote goes too. The
	// second service's snapshot is held until the cancel is recorded.
	run, err = f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	second := holdBackup(t, f)
	second.snapshotAt = 2
	done := second.execute(run.ID)
	second.waitHeld(run.ID, done)
	if cps := f.checkpoints(run.ID); cps[0].Status != store.CheckpointSucceeded || cps[1].Status != store.CheckpointRunning {
		t.Fatalf("while the second snapshot is held: %s is %s, %s is %s; want succeeded, running", cps[0].Name, cps[0].Status, cps[1].Name, cps[1].Status)
	}
	if entries, _ := os.ReadDir(filepath.Join(target, "vault", "production")); len(entries) == 0 {
		t.Fatal("the first snapshot wrote nothing before the cancel (the case under test)")
	}
	if _, err := f.svc.Cancel(f.ctx, store.Actor{}, f.reloadEnv(), run.ID); err != nil {
		t.Fatal(err)
	}
	second.release()
	second.waitDone(run.ID, done)
	if got := f.run(run.ID); got.Status != store.RunCancelled {
		t.Fatalf("snapshot: %s (%s), want cancelled", got.Status, got.Reason)
	}
	if entries, _ := os.ReadDir(filepath.Join(target, "vault", "production")); len(entries) != 0 {
		t.Fatalf("a cancelled snapshot left %v", entries)
	}
}

// syncBuffer is a log destination the runner may write to from any goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// goodSnapshots counts the environment's listed snapshots that completed.
func (f *fixture) goodSnapshots() int {
	f.t.Helper()
	var n int
	for _, b := range f.backupRows() {
		if b.Succeeded() {
			n++
		}
	}
	return n
}

// TestBackupTargetFullBetweenTwoFiles: the disk fills after the first
// file of a snapshot. The run fails with the disk's own words, the first
// file's folder is removed (the disk still lets files go), nothing is
// left over and nothing is listed as a good snapshot.
func TestBackupTargetFullBetweenTwoFiles(t *testing.T) {
	t.Parallel()
	f, target := newBackupFixture(t)
	logs := &syncBuffer{}
	f.svc.Runner.Logger = slog.New(slog.NewTextHandler(logs, nil))
	f.faults.Set(func(fl *local.Faults) { fl.Target = &local.TargetFault{AfterFiles: 1} })
	run, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	got := f.run(run.ID)
	if got.Status != store.RunFailed || !strings.Contains(got.Reason, "no space left on device") || strings.Contains(got.Reason, "left over") {
		t.Fatalf("snapshot onto a disk that fills: %s (%s)", got.Status, got.Reason)
	}
	if cps := f.checkpoints(run.ID); cps[0].Status != store.CheckpointSucceeded || cps[1].Status != store.CheckpointFailed {
		t.Fatalf("checkpoints %s, %s; want the first file written and the second failed", cps[0].Status, cps[1].Status)
	}
	if entries, err := os.ReadDir(filepath.Join(target, "vault", "production")); err != nil || len(entries) != 0 {
		t.Fatalf("the failed snapshot left %v (%v)", entries, err)
	}
	b, err := f.db.BackupByRun(f.ctx, run.ID)
	if err != nil || b.Leftover != "" || b.Succeeded() || f.goodSnapshots() != 0 {
		t.Fatalf("backup %+v (%v), %d good snapshots; want it failed, nothing left over", b, err, f.goodSnapshots())
	}
	if strings.Contains(logs.String(), "left over") {
		t.Fatalf("a removed snapshot was logged as left over:\n%s", logs)
	}
}

// TestBackupTargetReadOnlyBetweenTwoFiles: the disk turns read-only after
// the first file of a snapshot, so the folder cannot be removed either.
// The run fails and says where the folder is left; the log says it with
// the path; the snapshot carries it as left over and is not a good one.
// Once the disk is writable again, the next snapshot's end removes it.
func TestBackupTargetReadOnlyBetweenTwoFiles(t *testing.T) {
	t.Parallel()
	f, target := newBackupFixture(t)
	logs := &syncBuffer{}
	f.svc.Runner.Logger = slog.New(slog.NewTextHandler(logs, nil))
	kept := snapshot(t, f)
	f.faults.Set(func(fl *local.Faults) { fl.Target = &local.TargetFault{AfterFiles: 1, ReadOnly: true} })
	run, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	b, err := f.db.BackupByRun(f.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(target, "vault", "production", b.Name)
	got := f.run(run.ID)
	if got.Status != store.RunFailed || !strings.Contains(got.Reason, "read-only file system") ||
		!strings.Contains(got.Reason, "left over at "+dir+": it could not be removed (read-only file system)") {
		t.Fatalf("snapshot onto a disk that turns read-only: %s (%s)", got.Status, got.Reason)
	}
	// The first file's folder is really there, and is what is named.
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 || entries[0].Name() != "database-main.snapshot" {
		t.Fatalf("the folder left over holds %v (%v); want the first file", entries, err)
	}
	if b.Leftover != dir || b.Succeeded() {
		t.Fatalf("backup leftover %q, status %s; want %q, failed", b.Leftover, b.RunStatus, dir)
	}
	if n := f.goodSnapshots(); n != 1 {
		t.Fatalf("%d good snapshots, want only the one taken before", n)
	}
	if why := f.missing(kept); why != "" {
		t.Fatalf("the good snapshot reads missing: %s", why)
	}
	if l := logs.String(); strings.Count(l, "left over") != 1 || !strings.Contains(l, "path="+dir) || !strings.Contains(l, "read-only file system") {
		t.Fatalf("the leftover is not logged once with its path:\n%s", l)
	}

	// The disk is writable again: the next snapshot succeeds and, at its
	// end, the folder left over goes and the snapshot no longer says so.
	f.faults.Set(func(fl *local.Faults) { fl.Target = nil })
	next := snapshot(t, f)
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("the folder left over is still there: %v", err)
	}
	if b, err := f.db.BackupByRun(f.ctx, run.ID); err != nil || b.Leftover != "" {
		t.Fatalf("after the next snapshot: %+v %v; want nothing left over", b, err)
	}
	entries, _ := os.ReadDir(filepath.Join(target, "vault", "production"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{kept.Name, next.Name}; !slices.Equal(names, want) && !slices.Equal(names, []string{next.Name, kept.Name}) {
		t.Fatalf("snapshot folders %v, want %v", names, want)
	}
}

// TestBackupFiresHeldByARunningSnapshotNameIt: fires that fall due
// together while a snapshot still runs (the scheduler looked late) are
// each skipped naming that snapshot's run, not as missed while no Studio
// ran; fires after it ended, with no Studio looking, are the missed ones.
func TestBackupFiresHeldByARunningSnapshotNameIt(t *testing.T) {
	t.Parallel()
	f, _ := newBackupFixture(t)
	f.setSchedule("*/5 * * * *", "1d")
	f.clock.Set(start.Add(5*time.Minute + time.Second))
	f.fire()
	first := f.backupRows()[0]
	if first.RunID == nil {
		t.Fatalf("first fire: %+v", first)
	}
	// 13:10 and 13:15 come due at once while the first snapshot runs.
	f.clock.Set(start.Add(15*time.Minute + time.Second))
	f.fire()
	want := fmt.Sprintf("the previous snapshot (backup run %d) was still running", *first.RunID)
	rows := f.backupRows()
	if len(rows) != 3 || rows[1].Skipped != want || rows[2].Skipped != want {
		t.Fatalf("fires held by the running snapshot: %+v; want both skipped as %q", rows, want)
	}
	if a, _ := f.db.BackupAlarmOf(f.ctx, f.env.ID); a == nil || !strings.Contains(a.Reason, want) {
		t.Fatalf("alarm %+v, want it to name the running snapshot", a)
	}
	f.executeUnfinished() // it ends at 13:15:01
	f.clock.Set(start.Add(30*time.Minute + time.Second))
	f.fire()
	rows = f.backupRows()
	if len(rows) != 6 || rows[5].RunID == nil {
		t.Fatalf("after the snapshot ended: %+v", rows)
	}
	for _, b := range rows[3:5] {
		if b.Skipped != "missed: no Studio was running at this time (one catch-up snapshot was taken instead)" {
			t.Fatalf("fire of %s after the snapshot ended: %q; want it missed", b.ScheduledAt.Format("15:04"), b.Skipped)
		}
	}

	// A restore that runs holds the next fire, and is named as one.
	f.executeUnfinished()
	restore, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), rows[5].ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Set(start.Add(35*time.Minute + time.Second))
	f.fire()
	rows = f.backupRows()
	if last := rows[len(rows)-1]; last.Skipped != fmt.Sprintf("a restore (restore run %d) was still running", restore.ID) {
		t.Fatalf("fire during restore run %d: %q", restore.ID, last.Skipped)
	}
}
