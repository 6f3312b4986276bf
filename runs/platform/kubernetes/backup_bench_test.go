package kubernetes_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/runs/platform/s3target"
	"github.com/skali-dev/studio/runs/platform/s3target/s3test"
	"github.com/skali-dev/studio/store"
)

var benchDatabaseMB = flag.Int("backup-bench-mb", 256, "BenchmarkRealDatabaseBackup: the size of the database to snapshot, in MB (the issue's goal is 1024)")

// heapPeak samples the process's heap in use until stop is called and
// returns its growth over the start, in bytes.
func heapPeak() (stop func() uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > peak.Load() {
				peak.Store(ms.HeapInuse - base)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

// BenchmarkRealDatabaseBackup times the Studio's snapshot, restore and
// drill of a real database of the operator (-backup-bench-mb, 256 MB by
// default, 1024 for the goal) against their floors measured in the
// same run: pg_dump of the same database to a file in its pod plus one
// multipart upload of a file of the dump's size from this machine to the
// same S3 server; psql replaying that file in its pod in one transaction.
// It reports the ratios (goals: snapshot and restore ≤ 1.3x their
// floors, a drill ≤ 1.5x a restore), each the median of its rounds, and
// the heap's largest growth during any of them (goal ≤ 64 MB).
//
//	SKALI_TEST_REAL_KUBECONFIG=… go test -run '^$' -bench RealDatabaseBackup -benchtime 3x ./runs/platform/kubernetes/ -args -backup-bench-mb 1024
func BenchmarkRealDatabaseBackup(b *testing.B) {
	cluster := clustertest.StartReal(b, clustertest.CNPG)
	srv := s3test.Start(b, "backups")
	manifest := strings.Replace(backupManifest, "    version: 17\n", fmt.Sprintf("    version: 17\n    storage:\n      size: %dGB\n", 3*(*benchDatabaseMB)/1024+2), 1)
	f := newFixtureOn(b, cluster, "", manifest, "backupbench", nil)
	f.platform.Opts.PostgresImages = clustertest.PostgresImages
	f.platform.Opts.ProvisionTimeout = 4 * time.Minute
	if run := f.deploy(); run.Status != store.RunSucceeded {
		b.Fatalf("deploy %s: %s", run.Status, run.Reason)
	}
	// About 300 bytes a row on disk.
	rows := *benchDatabaseMB << 20 / 300
	start := time.Now()
	f.sql(cluster, "app", fmt.Sprintf("CREATE TABLE bench (id bigint PRIMARY KEY, body text); ALTER TABLE bench OWNER TO app; "+
		"INSERT INTO bench SELECT g, repeat(md5(g::text), 7) FROM generate_series(1, %d) g", rows))
	size := f.sql(cluster, "app", "SELECT pg_size_pretty(pg_database_size('app'))")
	b.Logf("database of %s (%d rows) written in %s", size, rows, time.Since(start).Round(time.Second))
	if err := f.svc.SaveBackupTarget(f.ctx, store.Actor{}, runs.BackupTargetForm{Target: "s3://backups/studio", Endpoint: srv.Endpoint,
		Region: srv.Region, PathStyle: true, AccessKey: srv.Access, SecretKey: srv.Secret}); err != nil {
		b.Fatal(err)
	}
	pod := str(f.get(kubernetes.KindPGCluster, "data"), "status", "currentPrimary")
	inPod := func(script string) time.Duration {
		start := time.Now()
		out, err := exec.Command(cluster.Kubectl, "--kubeconfig", cluster.Kubeconfig, "-n", f.ns, "exec", pod, "-c", "postgres", "--", "sh", "-c", script).CombinedOutput()
		if err != nil {
			b.Fatalf("%s: %v: %s", script, err, out)
		}
		return time.Since(start)
	}
	ratios := map[string][]float64{}
	var heapGrowth uint64
	b.ResetTimer()
	for range b.N {
		// Floor of a snapshot: the dump to a file, then one upload.
		dumpFloor := inPod("pg_dump --clean --if-exists -h /controller/run -U postgres -d app > /var/lib/postgresql/data/floor.sql")
		peak := heapPeak()
		start := time.Now()
		backup, err := f.svc.StartBackup(f.ctx, store.Actor{}, f.reloadEnv())
		if err != nil {
			b.Fatal(err)
		}
		if got := f.finish(backup); got.Status != store.RunSucceeded {
			b.Fatalf("snapshot %s: %s", got.Status, got.Reason)
		}
		snapshot, snapshotHeap := time.Since(start), peak()
		bk, err := f.db.BackupByRun(f.ctx, backup.ID)
		if err != nil {
			b.Fatal(err)
		}
		key := "studio/ledger/backupbench/" + bk.Name + "/database-data.sql"
		c := srv.Client(b, "backups")
		local, err := os.CreateTemp(b.TempDir(), "floor")
		if err != nil {
			b.Fatal(err)
		}
		rc, n, err := c.Get(f.ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(local, rc)
		rc.Close()
		local.Seek(0, io.SeekStart)
		uploadFloor := upload(b, c, local, "floor/dump.sql")
		local.Close()

		restoreFloor := inPod("psql -X -q -v ON_ERROR_STOP=1 -1 -h /controller/run -U postgres -d app -f /var/lib/postgresql/data/floor.sql > /dev/null && : > /var/lib/postgresql/data/floor.sql")

		peak = heapPeak()
		start = time.Now()
		restore, err := f.svc.StartRestore(f.ctx, store.Actor{}, f.reloadEnv(), bk.ID, "backupbench")
		if err != nil {
			b.Fatal(err)
		}
		if got := f.finish(restore); got.Status != store.RunSucceeded {
			b.Fatalf("restore %s: %s", got.Status, got.Reason)
		}
		restoreAll, restoreHeap := time.Since(start), peak()
		replay := checkpointTime(b, f, restore.ID, "restore")

		peak = heapPeak()
		start = time.Now()
		drill, err := f.svc.StartDrill(f.ctx, store.Actor{}, f.reloadEnv())
		if err != nil {
			b.Fatal(err)
		}
		if got := f.finish(drill); got.Status != store.RunSucceeded {
			b.Fatalf("drill %s: %s", got.Status, got.Reason)
		}
		drillAll, drillHeap := time.Since(start), peak()

		mb := float64(n) / (1 << 20)
		b.Logf("dump of %.0f MB: snapshot %s (floor %s = pg_dump to a file %s + upload %s); restore %s, its replay %s (floor: psql of the file %s); drill %s; heap growth %d / %d / %d MB",
			mb, snapshot.Round(time.Millisecond), (dumpFloor + uploadFloor).Round(time.Millisecond), dumpFloor.Round(time.Millisecond), uploadFloor.Round(time.Millisecond),
			restoreAll.Round(time.Millisecond), replay.Round(time.Millisecond), restoreFloor.Round(time.Millisecond), drillAll.Round(time.Millisecond),
			snapshotHeap>>20, restoreHeap>>20, drillHeap>>20)
		ratios["snapshot/floor"] = append(ratios["snapshot/floor"], snapshot.Seconds()/(dumpFloor+uploadFloor).Seconds())
		ratios["replay/floor"] = append(ratios["replay/floor"], replay.Seconds()/restoreFloor.Seconds())
		ratios["restore-run/floor"] = append(ratios["restore-run/floor"], restoreAll.Seconds()/restoreFloor.Seconds())
		ratios["drill/replay"] = append(ratios["drill/replay"], drillAll.Seconds()/replay.Seconds())
		heapGrowth = max(heapGrowth, snapshotHeap, restoreHeap, drillHeap)
	}
	// Each ratio is the median of the rounds (-benchtime Nx): on two
	// cores that also run the cluster, one round's floor moves by ±20 %.
	for name, rs := range ratios {
		slices.Sort(rs)
		b.ReportMetric(rs[len(rs)/2], name)
	}
	b.ReportMetric(float64(heapGrowth)/(1<<20), "heap-growth-MB")
}

// upload is one multipart upload of r (16 MiB parts, one after the other)
// and how long it took.
func upload(b *testing.B, c *s3target.Client, r io.Reader, key string) time.Duration {
	start := time.Now()
	id, err := c.CreateMultipart(b.Context(), key)
	if err != nil {
		b.Fatal(err)
	}
	var parts []s3target.Part
	buf := make([]byte, s3target.DefaultPartSize)
	for n := 1; ; n++ {
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			p, err := c.UploadPart(b.Context(), key, id, n, bytes.Clone(buf[:k]))
			if err != nil {
				b.Fatal(err)
			}
			parts = append(parts, p)
		}
		if err != nil {
			break
		}
	}
	if err := c.CompleteMultipart(b.Context(), key, id, parts); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// checkpointTime is how long the run's first checkpoint of kind took.
func checkpointTime(b *testing.B, f *fixture, runID int64, kind string) time.Duration {
	cps, err := f.db.Checkpoints(f.ctx, runID)
	if err != nil {
		b.Fatal(err)
	}
	for _, cp := range cps {
		if cp.Kind == kind && cp.StartedAt != nil && cp.FinishedAt != nil {
			return cp.FinishedAt.Sub(*cp.StartedAt)
		}
	}
	b.Fatalf("run %d has no finished %s checkpoint", runID, kind)
	return 0
}
