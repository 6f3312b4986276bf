package runs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/runs/platform/s3target/s3test"
	"github.com/skali-dev/studio/store"
)

// s3Form is the target form of srv's bucket under prefix studio.
func s3Form(srv *s3test.Server, bucket string) runs.BackupTargetForm {
	return runs.BackupTargetForm{Target: "s3://" + bucket + "/studio", Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
		AccessKey: srv.Access, SecretKey: srv.Secret}
}

// newS3BackupFixture deploys backupManifest and saves an S3 target on a
// real S3 server; snapshot files are 6 MiB, written in 5 MiB parts.
func newS3BackupFixture(t *testing.T) (*fixture, *s3test.Server) {
	t.Helper()
	srv := s3test.Start(t, "backups")
	f := newFixture(t, backupManifest, nil)
	run := f.deploy(runs.DeployRequest{})
	if res := f.execute(run.ID); !res.Finished || f.run(run.ID).Status != store.RunSucceeded {
		t.Fatalf("deploy: %+v %s", res, f.run(run.ID).Reason)
	}
	f.local.SnapshotSize = 6 << 20
	f.svc.Runner.S3PartSize = 5 << 20
	if err := f.svc.SaveBackupTarget(f.ctx, store.Actor{}, s3Form(srv, "backups")); err != nil {
		t.Fatal(err)
	}
	f.reloadEnv()
	return f, srv
}

// Saving an S3 target checks it for real: each wrong setting is refused
// with its sentence on its field, and the target saved before stays.
func TestBackupS3TargetSaveRefusals(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t, "backups")
	f := newFixture(t, backupManifest, nil)
	dir := t.TempDir()
	if err := f.svc.SetBackupTarget(f.ctx, store.Actor{}, dir); err != nil {
		t.Fatal(err)
	}
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + closed.Addr().String()
	closed.Close()
	for _, c := range []struct {
		name       string
		edit       func(*runs.BackupTargetForm)
		field, say string
	}{
		{"wrong secret key", func(f *runs.BackupTargetForm) { f.SecretKey = "wrong" + srv.Secret }, "secret_key", "the secret key is wrong"},
		{"missing bucket", func(f *runs.BackupTargetForm) { f.Target = "s3://nothing-here/studio" }, "target", "The bucket nothing-here does not exist"},
		{"unreachable endpoint", func(f *runs.BackupTargetForm) { f.Endpoint = dead }, "endpoint", "cannot be reached"},
		{"no endpoint", func(f *runs.BackupTargetForm) { f.Endpoint = "" }, "endpoint", "Write the endpoint"},
		{"no secret key", func(f *runs.BackupTargetForm) { f.SecretKey = "" }, "secret_key", "Write the secret key"},
		{"credentials in the URL", func(f *runs.BackupTargetForm) { f.Target = "s3://AK:SK@backups/studio" }, "target", "without credentials"},
	} {
		form := s3Form(srv, "backups")
		c.edit(&form)
		err := f.svc.SaveBackupTarget(f.ctx, store.Actor{}, form)
		var br *runs.BackupRefusal
		if !errors.As(err, &br) || br.Field != c.field || !strings.Contains(br.Message, c.say) {
			t.Errorf("%s: %v (field %v), want %q on %s", c.name, err, br, c.say, c.field)
			continue
		}
		if strings.Contains(br.Message, srv.Secret) {
			t.Errorf("%s: the refusal repeats the secret key", c.name)
		}
		if got, _ := f.db.BackupTarget(f.ctx); got != dir {
			t.Fatalf("%s: the target is %q after a refused save, want %q", c.name, got, dir)
		}
	}
	if objs := srv.Objects(t, "backups", ""); len(objs) != 0 {
		t.Fatalf("refused saves wrote %v", objs)
	}
	// Another installation's prefix is refused; this one's is accepted
	// again, and its keys are kept when the form leaves them empty.
	if err := srv.Client(t, "backups").Put(f.ctx, "theirs/.skali-backup-target", []byte("installation studio-someone-else\n")); err != nil {
		t.Fatal(err)
	}
	form := s3Form(srv, "backups")
	form.Target = "s3://backups/theirs"
	if err := f.svc.SaveBackupTarget(f.ctx, store.Actor{}, form); err == nil || !strings.Contains(err.Error(), "another Skali installation") {
		t.Fatalf("another installation's prefix: %v", err)
	}
	if err := f.svc.SaveBackupTarget(f.ctx, store.Actor{}, s3Form(srv, "backups")); err != nil {
		t.Fatal(err)
	}
	again := s3Form(srv, "backups")
	again.AccessKey, again.SecretKey = "", ""
	if err := f.svc.SaveBackupTarget(f.ctx, store.Actor{}, again); err != nil {
		t.Fatalf("saved again with the stored keys: %v", err)
	}
	if got, _ := f.db.BackupTarget(f.ctx); got != "s3://backups/studio" {
		t.Fatalf("target %q", got)
	}
	if problem, err := f.svc.TargetProblem(f.ctx); err != nil || problem != "" {
		t.Fatalf("target problem %q %v", problem, err)
	}
	objs := srv.Objects(t, "backups", "")
	if len(objs) != 2 || objs["studio/.skali-backup-target"] == 0 {
		t.Fatalf("objects: %v, want the two markers only", objs)
	}
	// The audit record names the target, never a key.
	var details string
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT string_agg(coalesce(target, '') || ' ' || coalesce(detail::text, ''), ' ') FROM audit_events`).Scan(&details); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(details, "s3://backups/studio") || strings.Contains(details, srv.Secret) || strings.Contains(details, srv.Access) {
		t.Fatalf("audit records: %s", details)
	}
}

// objectsOf returns the objects of snapshot b in the bucket, by file.
func objectsOf(t *testing.T, srv *s3test.Server, b *store.Backup) map[string]int64 {
	out := map[string]int64{}
	prefix := "studio/vault/production/" + b.Name + "/"
	for k, n := range srv.Objects(t, "backups", prefix) {
		out[strings.TrimPrefix(k, prefix)] = n
	}
	return out
}

// A snapshot streams each service to the bucket (multipart), the objects
// have the sizes and SHA-256 recorded; a restore verifies and replays
// them; an object changed in the bucket fails the restore before the stop.
func TestBackupS3SnapshotAndRestore(t *testing.T) {
	t.Parallel()
	f, srv := newS3BackupFixture(t)
	run, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.env)
	if err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("backup %s (%s)", got.Status, got.Reason)
	}
	b, err := f.db.BackupByRun(f.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	objs := objectsOf(t, srv, b)
	c := srv.Client(t, "backups")
	var recorded int
	for _, cp := range f.checkpoints(run.ID) {
		d := runs.DecodeCheckpointDetail(cp.Detail)
		if d.Snapshot == nil {
			continue
		}
		recorded++
		if objs[d.Snapshot.File] != d.Snapshot.Size || d.Snapshot.Size < 6<<20 {
			t.Fatalf("%s: recorded %d bytes, the bucket has %d", d.Snapshot.File, d.Snapshot.Size, objs[d.Snapshot.File])
		}
		rc, _, err := c.Get(f.ctx, "studio/vault/production/"+b.Name+"/"+d.Snapshot.File)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		io.Copy(h, rc)
		rc.Close()
		if hex.EncodeToString(h.Sum(nil)) != d.Snapshot.SHA256 {
			t.Fatalf("%s: the object's SHA-256 is not the one recorded", d.Snapshot.File)
		}
	}
	if recorded != 3 || len(objs) != 3 {
		t.Fatalf("recorded %d files, the bucket holds %v", recorded, objs)
	}
	if ups, _ := c.ListMultipart(f.ctx, "studio/"); len(ups) != 0 {
		t.Fatalf("uploads left: %v", ups)
	}
	if missing, err := f.svc.MissingSnapshots(f.ctx, f.reloadEnv(), []store.Backup{*b}); err != nil || len(missing) != 0 {
		t.Fatalf("missing %v %v", missing, err)
	}

	restore, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	f.execute(restore.ID)
	if got := f.run(restore.ID); got.Status != store.RunSucceeded {
		t.Fatalf("restore %s (%s)", got.Status, got.Reason)
	}

	// The same size, other bytes: only reading it shows.
	key := "studio/vault/production/" + b.Name + "/database-main.snapshot"
	if err := c.Put(f.ctx, key, make([]byte, objs["database-main.snapshot"])); err != nil {
		t.Fatal(err)
	}
	restore, err = f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	f.execute(restore.ID)
	got := f.run(restore.ID)
	if got.Status != store.RunFailed || !strings.Contains(got.Reason, "database-main.snapshot does not match its recorded checksum") {
		t.Fatalf("restore of a changed object: %s (%s)", got.Status, got.Reason)
	}
	if env := f.reloadEnv(); env.State != store.EnvironmentActive {
		t.Fatalf("state %q: the environment was stopped", env.State)
	}
	// A deleted object reads as missing, without reading anything.
	if err := c.Delete(f.ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, "production"); err == nil || !strings.Contains(err.Error(), "database-main.snapshot is missing") {
		t.Fatalf("restore of a deleted object: %v", err)
	}
	// Removing the snapshot deletes its objects, nothing else.
	if err := f.svc.RemoveBackup(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, b.Name); err != nil {
		t.Fatal(err)
	}
	if left := srv.Objects(t, "backups", ""); len(left) != 1 || left["studio/.skali-backup-target"] == 0 {
		t.Fatalf("after removing the snapshot: %v", left)
	}
}

// A snapshot cancelled while it uploads leaves no snapshot: no object
// under its folder and no incomplete multipart upload.
func TestBackupS3CancelledMidUpload(t *testing.T) {
	t.Parallel()
	// Beside other tests the S3 server is slow to store a part: until the
	// writer waited for the part in flight to be answered (not only for its
	// request to be cancelled), a part whose body had been sent was stored
	// after the abort and listed the upload again (1 run in 3).
	f, srv := newS3BackupFixture(t)
	f.local.SnapshotSize = 4 << 30 // far longer to write than the test waits
	run, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.env)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := f.svc.Runner.Execute(f.ctx, run.ID); done <- err }()
	c := srv.Client(t, "backups")
	var seen string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ups, err := c.ListMultipart(f.ctx, "studio/")
		if err == nil && len(ups) > 0 {
			seen = ups[0].Key
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no multipart upload began within 30 s (%v %v)", ups, err)
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
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled snapshot still uploads after 30 s")
	}
	got := f.run(run.ID)
	if got.Status != store.RunCancelled {
		t.Fatalf("backup %s (%s), want cancelled", got.Status, got.Reason)
	}
	if ups, err := c.ListMultipart(f.ctx, "studio/"); err != nil || len(ups) != 0 {
		t.Fatalf("incomplete uploads after the cancel (one was %s): %v %v", seen, ups, err)
	}
	if objs := srv.Objects(t, "backups", "studio/vault/"); len(objs) != 0 {
		t.Fatalf("objects left by the cancelled snapshot: %v", objs)
	}
	b, err := f.db.BackupByRun(f.ctx, run.ID)
	if err == nil && b.Succeeded() {
		t.Fatal("the cancelled snapshot is listed as complete")
	}
}

// Retention deletes in the bucket exactly the snapshots it deletes in a
// directory target, fire for fire.
func TestBackupS3RetentionMatchesTheDirectoryTarget(t *testing.T) {
	t.Parallel()
	fires := func(f *fixture) {
		f.local.SnapshotSize = 1024
		f.setSchedule("0 * * * *", "3h")
		for i := 1; i <= 8; i++ {
			f.faults.Set(func(fl *local.Faults) {
				fl.Snapshot = nil
				if i == 5 {
					fl.Snapshot = map[string]string{"bucket files": "disk quota exceeded"}
				}
			})
			f.clock.Set(start.Add(time.Duration(i)*time.Hour + time.Second))
			f.fire()
			f.executeUnfinished()
		}
	}
	dirF, dir := newBackupFixture(t)
	fires(dirF)
	var onDisk []string
	entries, _ := os.ReadDir(filepath.Join(dir, "vault", "production"))
	for _, e := range entries {
		onDisk = append(onDisk, e.Name())
	}

	s3F, srv := newS3BackupFixture(t)
	fires(s3F)
	set := map[string]bool{}
	for k := range srv.Objects(t, "backups", "studio/vault/production/") {
		set[path.Base(path.Dir(k))] = true
	}
	var inBucket []string
	for k := range set {
		inBucket = append(inBucket, k)
	}
	slices.Sort(inBucket)
	if len(onDisk) < 3 || !slices.Equal(onDisk, inBucket) {
		t.Fatalf("snapshots kept in the bucket %v, in the directory %v", inBucket, onDisk)
	}
	var kept []string
	for _, b := range s3F.backupRows() {
		if b.Name != "" && b.Succeeded() {
			kept = append(kept, b.Name)
		}
	}
	slices.Sort(kept)
	if !slices.Equal(kept, inBucket) {
		t.Fatalf("snapshots listed %v, in the bucket %v", kept, inBucket)
	}
	if ups, _ := srv.Client(t, "backups").ListMultipart(context.Background(), "studio/"); len(ups) != 0 {
		t.Fatalf("uploads left: %v", ups)
	}
}

// The target's keys are sealed with the value keyring: never stored in
// plain, sealed again by a key rotation, after which the new key alone
// opens them and the target still takes snapshots.
func TestBackupS3KeysRotateResealsCredentials(t *testing.T) {
	t.Parallel()
	f, srv := newS3BackupFixture(t)
	sealedWith := func() string {
		var v string
		if err := f.db.Pool.QueryRow(f.ctx, `SELECT value FROM installation_settings WHERE key = 'sealed:backup-target-credentials'`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		var all string
		if err := f.db.Pool.QueryRow(f.ctx, `SELECT string_agg(key || '=' || value, ' ') FROM installation_settings`).Scan(&all); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(all, srv.Secret) || strings.Contains(all, srv.Access) {
			t.Fatal("a key of the target is stored in plain")
		}
		return strings.SplitN(v, ":", 2)[0]
	}
	oldID := sealedWith()
	newKey := store.GenerateKey()
	rotator, err := store.OpenKeyring(f.ctx, f.db, store.KeyringOptions{SecretKey: newKey + "," + f.secretKey})
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.NewVault(f.db, rotator).RotateKey(f.ctx, store.Actor{RequestID: "test"}, rotator.IDs()[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if newID := sealedWith(); newID != rotator.IDs()[0] || newID == oldID || len(res.Retired) != 1 || res.Retired[0] != oldID {
		t.Fatalf("after the rotation the keys are sealed with %s (was %s), rotation %+v", newID, oldID, res)
	}
	newOnly, err := store.OpenKeyring(f.ctx, f.db, store.KeyringOptions{SecretKey: newKey})
	if err != nil {
		t.Fatalf("the new key alone after the rotation: %v", err)
	}
	svc := runs.NewService(f.db, store.NewVault(f.db, newOnly), f.local, f.clock.Now, nil)
	if problem, err := svc.TargetProblem(f.ctx); err != nil || problem != "" {
		t.Fatalf("target after the rotation: %q %v", problem, err)
	}
	run, err := svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Runner.Execute(f.ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("backup with the new key alone: %s (%s)", got.Status, got.Reason)
	}
	b, _ := f.db.BackupByRun(f.ctx, run.ID)
	if objs := objectsOf(t, srv, b); len(objs) != 3 {
		t.Fatalf("objects of the snapshot after the rotation: %v", objs)
	}
}

// The backups page's check of many snapshots on S3 lists the bucket
// instead of asking for each object, and says the same: a missing object
// or one of another size makes its snapshot missing, the others not.
func TestBackupS3MissingSnapshotsListed(t *testing.T) {
	t.Parallel()
	f, srv := newS3BackupFixture(t)
	f.local.SnapshotSize = 100
	var list []store.Backup
	for range 3 {
		run, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv())
		if err != nil {
			t.Fatal(err)
		}
		f.execute(run.ID)
		b, err := f.db.BackupByRun(f.ctx, run.ID)
		if err != nil || !b.Succeeded() {
			t.Fatalf("backup: %v %v", b, err)
		}
		list = append([]store.Backup{*b}, list...) // newest first, as the page lists them
	}
	c := srv.Client(t, "backups")
	if err := c.Delete(f.ctx, "studio/vault/production/"+list[1].Name+"/bucket-files.snapshot"); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(f.ctx, "studio/vault/production/"+list[2].Name+"/database-main.snapshot", []byte("short")); err != nil {
		t.Fatal(err)
	}
	missing, err := f.svc.MissingSnapshots(f.ctx, f.reloadEnv(), list)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{
		list[1].ID: "Its file bucket-files.snapshot is missing.",
		list[2].ID: "Its file database-main.snapshot is not the size recorded when it was written.",
	}
	if len(missing) != len(want) || missing[list[1].ID] != want[list[1].ID] || missing[list[2].ID] != want[list[2].ID] {
		t.Fatalf("missing = %v, want %v", missing, want)
	}
}
