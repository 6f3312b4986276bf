package kubernetes_test

// Backups where the data lives: a real PostgreSQL of the CloudNativePG
// operator on the real-node cluster, snapshotted by the Studio into a real
// S3 server, restored and drilled, all as the Studio's service account.

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/runs/platform/s3target"
	"github.com/skali-dev/studio/runs/platform/s3target/s3test"
	"github.com/skali-dev/studio/store"
)

// backupManifest is an application on a database of the operator, the
// release command making its table and writing a row.
const backupManifest = `name: ledger
applications:
  web:
    image: ` + testApp + `
    command: ["/testapp", "serve"]
    environment:
      DATABASE_URL: "{{databases.data.url}}"
      TESTAPP_NOTE: "written by the release command"
    ports:
      http:
        port: 8080
    health:
      readiness:
        http:
          port: http
          path: /readyz
    scaling:
      replicas:
        min: 2
        max: 2
    deployment:
      releaseCommand:
        command: ["/testapp", "migrate"]
        timeout: 3m
databases:
  data:
    engine: postgres
    version: 17
`

// finish executes run until it ends and returns it.
func (f *fixture) finish(run *store.Run) *store.Run {
	f.t.Helper()
	for i := 0; ; i++ {
		res, err := f.svc.Runner.Execute(f.ctx, run.ID)
		if err != nil {
			f.t.Fatalf("execute run %d: %v\n%s", run.ID, err, f.runState(run.ID))
		}
		if res.Finished {
			break
		}
		if i > 50 {
			f.t.Fatalf("run %d did not finish; it waits until %v", run.ID, res.WaitUntil)
		}
		time.Sleep(time.Until(res.WaitUntil))
	}
	got, err := f.db.RunByID(f.ctx, run.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

// sql runs query in the database's primary pod with kubectl (the test's
// own way in, as the database's superuser) and returns its output.
func (f *fixture) sql(cluster *clustertest.Cluster, db, query string) string {
	f.t.Helper()
	c := f.get(kubernetes.KindPGCluster, "data")
	pod := str(c, "status", "currentPrimary")
	out, err := exec.Command(cluster.Kubectl, "--kubeconfig", cluster.Kubeconfig, "-n", f.ns, "exec", pod, "-c", "postgres", "--",
		"psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", "/controller/run", "-U", "postgres", "-d", db, "-c", query).CombinedOutput()
	if err != nil {
		f.t.Fatalf("psql %q in %s: %v: %s", query, pod, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestRealDatabaseSnapshotRestoreAndDrill: a snapshot of the operator's
// PostgreSQL is its own pg_dump in the S3 bucket, with the size and
// SHA-256 recorded; a drill restores it into a scratch database, counts
// every table's rows against the snapshot's and drops the scratch
// database, leaving the environment as it was; a restore stops the
// application, brings back exactly the snapshot's rows and starts it
// again, Ready, serving them; a changed object fails a restore before
// anything stops, and fails a drill naming the file.
func TestRealDatabaseSnapshotRestoreAndDrill(t *testing.T) {
	// Beside the kwok tests: it waits for the operator, a helper pod
	// and its restores, and reads no deadline from the kubelet.
	t.Parallel()
	cluster := clustertest.StartReal(t, clustertest.CNPG)
	applyStudioRole(t, cluster)
	srv := s3test.Start(t, "backups")
	f := newFixtureOn(t, cluster, studioAccount, backupManifest, "realbackup", nil)
	f.platform.Opts.PostgresImages = clustertest.PostgresImages
	f.platform.Opts.ProvisionTimeout = 4 * time.Minute
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s\n%s", run.Status, run.Reason, f.stepLog(run))
	}
	f.sql(cluster, "app", "CREATE TABLE ledger_entries (id int PRIMARY KEY, memo text); ALTER TABLE ledger_entries OWNER TO app; "+
		"INSERT INTO ledger_entries SELECT g, 'entry ' || g || ' ' || repeat(md5(g::text), 8) FROM generate_series(1, 5000) g; "+
		"INSERT INTO testapp_rows (note) VALUES ('second row, before the snapshot')")

	f.saveTarget(srv)
	started := time.Now()
	b := f.snapshot()
	t.Logf("snapshot taken in %s", time.Since(started).Round(10*time.Millisecond))
	prefix := "studio/ledger/realbackup/" + b.Name + "/"
	objs := srv.Objects(t, "backups", prefix)
	if len(objs) != 1 || objs[prefix+"database-data.sql"] < 1000 {
		t.Fatalf("the bucket holds %v under %s", objs, prefix)
	}
	rc, _, err := srv.Client(t, "backups").Get(f.ctx, prefix+"database-data.sql")
	if err != nil {
		t.Fatal(err)
	}
	dump := readAll(t, rc)
	for _, want := range []string{"PostgreSQL database dump", "COPY public.ledger_entries (id, memo) FROM stdin;", "5000\tentry 5000 ",
		`-- skali-snapshot: {"tables":[{"table":"public.ledger_entries","rows":5000},{"table":"public.testapp_rows","rows":2}]}`} {
		if !strings.Contains(dump, want) {
			t.Fatalf("the snapshot object lacks %q:\n%.2000s", want, dump)
		}
	}

	// Written after the snapshot: a restore takes it away.
	f.sql(cluster, "app", "INSERT INTO ledger_entries VALUES (5001, 'after the snapshot'); INSERT INTO testapp_rows (note) VALUES ('after the snapshot')")

	// The scratch database of a drill that never finished (its Studio
	// killed, the run then cancelled): the next drill drops it.
	f.sql(cluster, "postgres", "CREATE DATABASE skali_drill_0123456789abcdef")

	// A drill proves the snapshot without touching the environment.
	got, s := f.drill()
	if got.Status != store.RunSucceeded {
		t.Fatalf("drill %s: %s\n%s", got.Status, got.Reason, f.stepLog(got))
	}
	if !s.Counted || s.Tables != 2 || s.Rows != 5002 {
		t.Fatalf("the drill proved %+v, want 2 tables and 5,002 rows counted", s)
	}
	if n := f.sql(cluster, "postgres", "SELECT count(*) FROM pg_database WHERE datname LIKE 'skali_drill_%'"); n != "0" {
		t.Fatalf("%s scratch databases left after the drill", n)
	}
	if n := f.sql(cluster, "app", "SELECT count(*) FROM ledger_entries"); n != "5001" {
		t.Fatalf("the drill changed the environment's data: %s entries", n)
	}

	// A restore's psql left by a Studio killed mid-restore: its session
	// waits for input that never comes, holding its transaction's locks.
	// The next restore ends it first.
	pod := str(f.get(kubernetes.KindPGCluster, "data"), "status", "currentPrimary")
	orphan := exec.Command(cluster.Kubectl, "--kubeconfig", cluster.Kubeconfig, "-n", f.ns, "exec", "-i", pod, "-c", "postgres", "--",
		"psql", "-X", "-h", "/controller/run", "-U", "postgres", "-d", "dbname=app application_name=skali-restore")
	orphanIn, err := orphan.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orphanIn.Close(); orphan.Process.Kill(); orphan.Wait() })
	io.WriteString(orphanIn, "BEGIN;\nLOCK TABLE ledger_entries IN ACCESS EXCLUSIVE MODE;\n")
	for deadline := time.Now().Add(30 * time.Second); f.sql(cluster, "app", "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'ledger_entries' AND l.mode = 'AccessExclusiveLock' AND l.granted") != "1"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the left-over session never took its lock")
		}
	}

	// The restore: stopped, replayed, started.
	restoreStarted := time.Now().Add(-time.Second) // the API server's clock rounds to seconds
	if got := f.restore(b); got.Status != store.RunSucceeded {
		t.Fatalf("restore %s: %s\n%s", got.Status, got.Reason, f.stepLog(got))
	}
	if !strings.Contains(f.logs.String(), "ended sessions a stopped Studio left on a database before restoring it") {
		t.Error("the restore did not say it ended the left-over session")
	}
	if n := f.sql(cluster, "app", "SELECT count(*) || ' ' || max(id) FROM ledger_entries"); n != "5000 5000" {
		t.Fatalf("after the restore the entries are %q, want the snapshot's 5000", n)
	}
	if notes := f.sql(cluster, "app", "SELECT string_agg(note, '|' ORDER BY id) FROM testapp_rows"); notes != "written by the release command|second row, before the snapshot" {
		t.Fatalf("after the restore testapp_rows holds %q", notes)
	}
	if owner := f.sql(cluster, "app", "SELECT tableowner FROM pg_tables WHERE tablename = 'ledger_entries'"); owner != "app" {
		t.Fatalf("the restored table is owned by %q, not the app user", owner)
	}
	dep := f.serving("web")
	if r, ready := num(at(dep, "spec", "replicas")), num(at(dep, "status", "readyReplicas")); r != 2 || ready != 2 {
		t.Fatalf("after the restore web has %d of %d replicas ready, want 2 of 2", ready, r)
	}
	if a, _ := at(dep, "metadata", "annotations").(map[string]any); a["skali.dev/stopped-for-restore"] != nil {
		t.Fatalf("the stop's annotation stays: %v", a)
	}
	if env := f.reloadEnv(); env.State != store.EnvironmentActive {
		t.Fatalf("after the restore the environment is %q", env.State)
	}
	// Stopped for real: every pod serving now was started by the restore.
	pods, err := f.client.List(f.ctx, kubernetes.KindPod, f.ns, "skali.dev/service=web,app.kubernetes.io/component=application")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		created, _ := time.Parse(time.RFC3339, str(p, "metadata", "creationTimestamp"))
		if created.Before(restoreStarted) {
			t.Fatalf("pod %s (created %s) ran through the restore", str(p, "metadata", "name"), created)
		}
	}
	// And the application serves the snapshot's rows.
	ip := str(f.get(kubernetes.KindService, "web"), "spec", "clusterIP")
	client := &http.Client{Timeout: 5 * time.Second}
	want := "1 written by the release command\n2 second row, before the snapshot\n"
	var last string
	for deadline := time.Now().Add(60 * time.Second); ; {
		resp, err := client.Get("http://" + ip + ":8080/rows")
		if err == nil {
			last = resp.Status + " " + readAll(t, resp.Body)
			if last == "200 OK "+want {
				break
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the application's rows after the restore: %s, want %q", last, want)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// A replay that leaves other rows than the snapshot says fails the
	// restore (as a replay whose input lost its COMMIT on the way would:
	// psql ends with success): a file whose counts say 4,999 entries.
	lie := strings.Replace(dump, `"rows":5000}`, `"rows":4999}`, 1)
	if err := srv.Client(t, "backups").Put(f.ctx, "studio/ledger/realbackup/lie/database-data.sql", []byte(lie)); err != nil {
		t.Fatal(err)
	}
	tg, err := s3target.New(s3target.Config{URL: "s3://backups/studio", Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
		AccessKey: srv.Access, SecretKey: srv.Secret})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Client().Close()
	sum := sha256.Sum256([]byte(lie))
	err = f.platform.Restore(f.ctx, platform.Env{ID: f.env.ID, Project: f.project.Name, Name: f.env.Name},
		platform.SnapshotService{Kind: "database", Name: "data"},
		platform.SnapshotLocation{Target: tg, Installation: "inst", Dir: "ledger/realbackup/lie"},
		platform.SnapshotFile{File: "database-data.sql", Size: int64(len(lie)), SHA256: fmt.Sprintf("%x", sum)})
	if err == nil || !strings.Contains(err.Error(), "database data does not hold the snapshot after its replay: table public.ledger_entries has 5000 rows restored, 4999 when the snapshot was taken") {
		t.Fatalf("a replay whose rows differ from the snapshot's: %v", err)
	}

	// The same size, other bytes.
	key := prefix + "database-data.sql"
	if err := srv.Client(t, "backups").Put(f.ctx, key, []byte(strings.Repeat("x", len(dump)))); err != nil {
		t.Fatal(err)
	}
	if got := f.restore(b); got.Status != store.RunFailed || !strings.Contains(got.Reason, "database-data.sql does not match its recorded checksum") {
		t.Fatalf("restore of a changed object: %s (%s)", got.Status, got.Reason)
	}
	if env := f.reloadEnv(); env.State != store.EnvironmentActive {
		t.Fatalf("a refused restore left the environment %q", env.State)
	}
	if r := num(at(f.serving("web"), "spec", "replicas")); r != 2 {
		t.Fatalf("a refused restore scaled web to %d", r)
	}
	if got, _ := f.drill(); got.Status != store.RunFailed || !strings.Contains(got.Reason, "database-data.sql") {
		t.Fatalf("drill of a changed object: %s (%s)", got.Status, got.Reason)
	}
	if n := f.sql(cluster, "postgres", "SELECT count(*) FROM pg_database WHERE datname LIKE 'skali_drill_%'"); n != "0" {
		t.Fatalf("%s scratch databases left after a failed drill", n)
	}
	// The psql the refused file was streamed into ended: its stdin was
	// closed, not abandoned (a psql waiting for more would hold its
	// transaction, and keep the database from shutting down).
	for deadline := time.Now().Add(30 * time.Second); ; {
		n := f.sql(cluster, "postgres", "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'skali-%' AND pid <> pg_backend_pid()")
		if n == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s psql sessions still open after the refused restore and drill", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.checkNoPlaintext()
	if strings.Contains(f.logs.String(), srv.Secret) {
		t.Fatal("the S3 secret key is in the Studio's log")
	}
}

// serving is app's Deployment with pods (blue-green: the live slot's).
func (f *fixture) serving(app string) kubernetes.Object {
	f.t.Helper()
	deps, err := f.client.List(f.ctx, kubernetes.KindDeployment, f.ns, "skali.dev/service="+app)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, d := range deps {
		if num(at(d, "spec", "replicas")) > 0 {
			return d
		}
	}
	f.t.Fatalf("no Deployment of %s has replicas (%d Deployments)", app, len(deps))
	return nil
}

// saveTarget saves srv's bucket backups, prefix studio, as the backup
// target.
func (f *fixture) saveTarget(srv *s3test.Server) {
	f.t.Helper()
	if err := f.svc.SaveBackupTarget(f.ctx, store.Actor{}, runs.BackupTargetForm{Target: "s3://backups/studio", Endpoint: srv.Endpoint,
		Region: srv.Region, PathStyle: true, AccessKey: srv.Access, SecretKey: srv.Secret}); err != nil {
		f.t.Fatal(err)
	}
}

// snapshot takes a snapshot by hand and returns it once it succeeded.
func (f *fixture) snapshot() *store.Backup {
	f.t.Helper()
	run, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		f.t.Fatal(err)
	}
	if got := f.finish(run); got.Status != store.RunSucceeded {
		f.t.Fatalf("snapshot %s: %s\n%s", got.Status, got.Reason, f.stepLog(got))
	}
	b, err := f.db.BackupByRun(f.ctx, run.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// drill runs a restore drill to its end and returns it with what it
// proved.
func (f *fixture) drill() (*store.Run, runs.DrillSummary) {
	f.t.Helper()
	run, err := f.svc.StartDrill(f.ctx, store.Actor{}, f.reloadEnv())
	if err != nil {
		f.t.Fatal(err)
	}
	got := f.finish(run)
	cps, err := f.db.Checkpoints(f.ctx, run.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return got, runs.SummarizeDrill(cps)
}

// restore restores snapshot b to its end.
func (f *fixture) restore(b *store.Backup) *store.Run {
	f.t.Helper()
	run, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), b.ID, f.env.Name)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.finish(run)
}

// noHelperLeft fails when a helper pod of the Studio's is still running.
func (f *fixture) noHelperLeft() {
	f.t.Helper()
	helpers, err := f.client.List(f.ctx, kubernetes.KindPod, f.ns, kubernetes.LabelHelper)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, h := range helpers {
		if str(h, "metadata", "deletionTimestamp") == "" {
			f.t.Fatalf("helper pod %s is left", str(h, "metadata", "name"))
		}
	}
}

// reloadEnv reads the environment again.
func (f *fixture) reloadEnv() *store.Environment {
	f.t.Helper()
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return env
}

func readAll(t testing.TB, rc io.ReadCloser) string {
	t.Helper()
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func num(v any) int {
	n, _ := strconv.Atoi(fmt.Sprint(v))
	return n
}

// volumeManifest is an application keeping files on a volume.
const volumeManifest = `name: album
applications:
  photos:
    image: ` + testApp + `
    command: ["/testapp", "serve"]
    environment:
      TESTAPP_DATA: /data
    ports:
      http:
        port: 8080
    health:
      readiness:
        http:
          port: http
          path: /readyz
    volumes:
      uploads:
        mountPath: /data
        size: 1GB
`

// pushStudioImage builds the Studio's image (its volume agent is the
// helper pods') with the repository's image tool and pushes it to the
// cluster's registry; it returns the image's name in the cluster.
func pushStudioImage(t testing.TB, c *clustertest.Cluster) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	cmd := exec.Command("go", "run", "./cmd/imagetool", "--registry", c.Registry, "--source", root, "studio")
	cmd.Dir = filepath.Join(root, "testcluster")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("imagetool studio: %v\n%s", err, out)
	}
	t.Logf("the Studio's image built and pushed in %s", time.Since(started).Round(100*time.Millisecond))
	return "registry.local/skali/studio:latest"
}

// files calls the application's /files through its Service.
func (f *fixture) files(method, name string, body []byte) string {
	f.t.Helper()
	ip := str(f.get(kubernetes.KindService, "photos"), "spec", "clusterIP")
	client := &http.Client{Timeout: 10 * time.Second}
	var last string
	for deadline := time.Now().Add(60 * time.Second); ; {
		req, _ := http.NewRequest(method, "http://"+ip+":8080/files/"+name, bytes.NewReader(body))
		resp, err := client.Do(req)
		if err == nil {
			text := readAll(f.t, resp.Body)
			if resp.StatusCode == http.StatusOK {
				return text
			}
			last = resp.Status + " " + text
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s /files/%s: %s", method, name, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestRealVolumeSnapshotRestoreAndDrill: a volume's snapshot is the
// archive of its files, read by the Studio's volume agent in a helper pod
// next to the application's; a drill extracts it into scratch and checks
// every file; a restore stops the application, makes the volume exactly
// the snapshot's (a file added after it gone, a changed one back) and
// starts it again; no helper pod is left.
func TestRealVolumeSnapshotRestoreAndDrill(t *testing.T) {
	// Beside the kwok tests: it waits for the operator, a helper pod
	// and its restores, and reads no deadline from the kubelet.
	t.Parallel()
	cluster := clustertest.StartReal(t)
	applyStudioRole(t, cluster)
	image := studioImageOn(t, cluster)
	srv := s3test.Start(t, "backups")
	f := newFixtureOn(t, cluster, studioAccount, volumeManifest, "realvolume", nil)
	f.platform.Opts.HelperImage = image
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s\n%s", run.Status, run.Reason, f.stepLog(run))
	}
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7919 >> 3)
	}
	f.files("PUT", "cover.txt", []byte("the album's cover"))
	f.files("PUT", "2026/december/big.bin", big)
	f.files("PUT", "2026/empty", nil)
	before := f.files("GET", "", nil)
	if strings.Count(before, "\n") != 3 {
		t.Fatalf("the volume holds:\n%s", before)
	}

	f.saveTarget(srv)
	// The helper pod of a Studio killed during an earlier step: the next
	// step deletes it (the check after the restore sees none).
	if _, err := f.client.Create(f.ctx, kubernetes.KindPod, kubernetes.Object{
		"metadata": kubernetes.Object{"name": "skali-helper-photos-left-over", "namespace": f.ns,
			"labels": kubernetes.Object{kubernetes.LabelHelper: "backup", "skali.dev/service": "photos"}},
		"spec": kubernetes.Object{"containers": []kubernetes.Object{{"name": "agent", "image": testApp, "args": []string{"pause"}}}},
	}); err != nil {
		t.Fatal(err)
	}
	b := f.snapshot()
	objs := srv.Objects(t, "backups", "studio/album/realvolume/"+b.Name+"/")
	if n := objs["studio/album/realvolume/"+b.Name+"/volume-photos-uploads.tar"]; n < 3<<20 {
		t.Fatalf("the bucket holds %v", objs)
	}

	f.files("PUT", "cover.txt", []byte("changed after the snapshot"))
	f.files("PUT", "later.txt", []byte("written after the snapshot"))

	got, s := f.drill()
	if got.Status != store.RunSucceeded {
		t.Fatalf("drill %s: %s\n%s", got.Status, got.Reason, f.stepLog(got))
	}
	if s.Objects != 3 || s.Bytes != 3<<20+17 {
		t.Fatalf("the drill checked %+v, want the 3 files of 3 MiB and 17 bytes", s)
	}

	if got := f.restore(b); got.Status != store.RunSucceeded {
		t.Fatalf("restore %s: %s\n%s", got.Status, got.Reason, f.stepLog(got))
	}
	if after := f.files("GET", "", nil); after != before {
		t.Fatalf("after the restore the volume holds:\n%s\nthe snapshot held:\n%s", after, before)
	}
	f.noHelperLeft()
	f.checkNoPlaintext()
}

var (
	studioImageOnce sync.Once
	studioImage     string
)

// studioImageOn pushes the Studio's image once per test binary.
func studioImageOn(t testing.TB, c *clustertest.Cluster) string {
	t.Helper()
	studioImageOnce.Do(func() { studioImage = pushStudioImage(t, c) })
	if studioImage == "" {
		t.Fatal("the Studio's image was not pushed")
	}
	return studioImage
}

// bucketManifest is an application with a bucket.
const bucketManifest = `name: vault
applications:
  web:
    image: ` + testApp + `
    command: ["/testapp", "serve"]
    environment:
      S3_BUCKET: "{{buckets.files.name}}"
    ports:
      http:
        port: 8080
buckets:
  files:
    visibility: private
`

// TestRealBucketSnapshotRestoreAndDrill: a bucket's snapshot is the
// archive of its objects, read by the Studio's volume agent in a helper
// pod whose environment is the claim's ConfigMap and Secret (the Studio
// never reads the bucket's keys); a drill checks every object; a restore
// makes the bucket hold exactly the snapshot's objects again (a large one
// in parts, one added after it deleted, one deleted after it back).
func TestRealBucketSnapshotRestoreAndDrill(t *testing.T) {
	// Beside the kwok tests: it waits for the operator, a helper pod
	// and its restores, and reads no deadline from the kubelet.
	t.Parallel()
	cluster := clustertest.StartReal(t)
	applyStudioRole(t, cluster)
	image := studioImageOn(t, cluster)
	f := newFixtureOn(t, cluster, studioAccount, bucketManifest, "realbucket", nil)
	f.platform.Opts.HelperImage = image
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s\n%s", run.Status, run.Reason, f.stepLog(run))
	}
	// The played provisioner's bucket becomes a real one, on a server
	// the pods reach on the cluster's bridge.
	bucket := str(f.get(kubernetes.KindConfigMap, "files"), "data", "BUCKET_NAME")
	srv := s3test.StartOn(t, clustertest.BridgeIP, "backups", bucket)
	_, port, _ := net.SplitHostPort(srv.Addr)
	if _, err := f.client.ApplyForce(f.ctx, kubernetes.KindConfigMap, kubernetes.Object{"metadata": kubernetes.Object{"name": "files", "namespace": f.ns},
		"data": kubernetes.Object{"BUCKET_HOST": clustertest.BridgeIP, "BUCKET_PORT": port, "BUCKET_NAME": bucket, "BUCKET_REGION": srv.Region}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.ApplyForce(f.ctx, kubernetes.KindSecret, kubernetes.Object{"metadata": kubernetes.Object{"name": "files", "namespace": f.ns},
		"stringData": kubernetes.Object{"AWS_ACCESS_KEY_ID": srv.Access, "AWS_SECRET_ACCESS_KEY": srv.Secret}}); err != nil {
		t.Fatal(err)
	}
	c := srv.Client(t, bucket)
	big := make([]byte, 20<<20) // more than one part
	for i := range big {
		big[i] = byte(i * 31 >> 5)
	}
	for key, body := range map[string][]byte{"a.txt": []byte("first object"), "photos/2026/big.bin": big, "notes/é and spaces.txt": []byte("a key that is no file name")} {
		if err := c.Put(f.ctx, key, body); err != nil {
			t.Fatal(err)
		}
	}
	listing := func() string {
		objs, err := c.List(f.ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, o := range objs {
			rc, _, err := c.Get(f.ctx, o.Key)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256([]byte(readAll(t, rc)))
			fmt.Fprintf(&b, "%s %d %x\n", o.Key, o.Size, sum[:8])
		}
		return b.String()
	}
	before := listing()

	f.saveTarget(srv)
	b := f.snapshot()
	if n := srv.Objects(t, "backups", "")["studio/vault/realbucket/"+b.Name+"/bucket-files.tar"]; n < 20<<20 {
		t.Fatalf("the snapshot's object has %d bytes", n)
	}

	if err := c.Put(f.ctx, "a.txt", []byte("changed after the snapshot")); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(f.ctx, "later.txt", []byte("written after the snapshot")); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(f.ctx, "photos/2026/big.bin"); err != nil {
		t.Fatal(err)
	}

	got, s := f.drill()
	if got.Status != store.RunSucceeded {
		t.Fatalf("drill %s: %s\n%s", got.Status, got.Reason, f.stepLog(got))
	}
	if s.Objects != 3 || s.Bytes != 20<<20+12+26 {
		t.Fatalf("the drill checked %+v, want the 3 objects", s)
	}

	if got := f.restore(b); got.Status != store.RunSucceeded {
		t.Fatalf("restore %s: %s\n%s", got.Status, got.Reason, f.stepLog(got))
	}
	if after := listing(); after != before {
		t.Fatalf("after the restore the bucket holds:\n%s\nthe snapshot held:\n%s", after, before)
	}
	f.noHelperLeft()
	if strings.Contains(f.logs.String(), srv.Secret) {
		t.Fatal("the bucket's secret key is in the Studio's log")
	}
	f.checkNoPlaintext()
}
