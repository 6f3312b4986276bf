package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/runs/platform/s3target/s3test"
	"github.com/skali-dev/studio/store"
)

// scheduledManifest is an application on a database of the operator.
const scheduledManifest = `name: sched
applications:
  web:
    image: registry.local/skali/testapp:latest
    command: ["/testapp", "serve"]
    environment:
      DATABASE_URL: "{{databases.data.url}}"
    ports:
      http:
        port: 8080
databases:
  data:
    engine: postgres
    version: 17
`

// TestKubernetesBackupScheduleFiresOnceAcrossTwoReplicasAndAKill runs two
// `studio serve --platform kubernetes` processes on one database against
// the real-node cluster with the CloudNativePG operator, and a schedule
// every minute into the S3 test server. The replica executing a snapshot
// is killed with SIGKILL while pg_dump streams; it is started again. Over
// the next fires: every minute fired once (a run, or a skipped fire
// recorded), the killed snapshot resumed and succeeded, and the bucket
// holds exactly the snapshots the Studio lists, retention (2 minutes,
// the newest good kept) having deleted the others there too.
func TestKubernetesBackupScheduleFiresOnceAcrossTwoReplicasAndAKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a real-node Kubernetes test cluster and Studio processes, and waits for five fires")
	}
	cluster := clustertest.StartReal(t, clustertest.CNPG)
	ctx := context.Background()
	srv := s3test.Start(t, "backups")
	db, dbURL, key := newKubeProject(t, scheduledManifest, nil)
	const ns = "sched-production"
	t.Cleanup(func() { kubectl(t, cluster, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false") })
	flags := []string{"--platform", "kubernetes", "--kubeconfig", cluster.Kubeconfig, "--postgres-images", clustertest.PostgresImages,
		// A lease of 10 s: the killed replica's snapshot is taken over
		// within 12.5 s, and a live replica on a busy machine (the suite's
		// other tests beside it) renews in time.
		"--run-lease", "10s",
		// The reference's minute is the goal: the operator made a Cluster
		// Ready in about 25 s on an idle 2-core machine, and in more than
		// 60 s on CI's, beside a browser and two other real-pod tests.
		"--provision-timeout", "4m"}
	a := startStudio(t, dbURL, key, flags...)
	ca := signedIn(t, a)
	runID := deployNewest(t, a, ca, db, "sched")
	// Up to the provision timeout for the database, then the rollout.
	waitForRunEndWithin(t, db, runID, 6*time.Minute)
	if status, reason := runOutcome(t, db, runID); status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s", status, reason)
	}
	var ready string
	if err := db.Pool.QueryRow(ctx, `SELECT coalesce(max(text), '') FROM run_log_lines WHERE run_id = $1 AND text LIKE 'database data is ready%'`, runID).Scan(&ready); err != nil {
		t.Fatal(err)
	}
	t.Log(ready)
	// Enough rows that a dump takes a moment to stream.
	pod := field(kubeObject(t, cluster, "-n", ns, "clusters.postgresql.cnpg.io", "data"), "status", "currentPrimary")
	kubectl(t, cluster, "", "-n", ns, "exec", pod, "-c", "postgres", "--", "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "/controller/run",
		"-U", "postgres", "-d", "app", "-c", "CREATE TABLE filler (id int PRIMARY KEY, body text); ALTER TABLE filler OWNER TO app; "+
			"INSERT INTO filler SELECT g, repeat(md5(g::text), 12) FROM generate_series(1, 250000) g")

	postForm(t, ca, a.addr+"/admin/backup-target", url.Values{"target": {"s3://backups/studio"}, "endpoint": {srv.Endpoint}, "region": {srv.Region},
		"path_style": {"1"}, "access_key": {srv.Access}, "secret_key": {srv.Secret}}.Encode())
	postForm(t, ca, a.addr+"/projects/sched/environments/production/backups/schedule", url.Values{"cron": {"* * * * *"}, "keep": {"2m"}}.Encode())
	b := startStudio(t, dbURL, key, flags...)
	replicas := map[int]*studioProcess{a.cmd.Process.Pid: a, b.cmd.Process.Pid: b}

	// Kill the replica streaming a snapshot, then start it again.
	// The next minute's fire, taken up by a replica busy beside the
	// suite's other tests.
	var killed int64
	waitForWithin(t, 4*time.Minute, func() bool {
		db.Pool.QueryRow(ctx, `SELECT c.run_id FROM run_checkpoints c JOIN runs r ON r.id = c.run_id
			WHERE r.kind = 'backup' AND c.kind = 'snapshot' AND c.status = 'running' LIMIT 1`).Scan(&killed)
		return killed != 0 && replicas[executorPID(db, killed)] != nil
	})
	victim := replicas[executorPID(db, killed)]
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	victim.cmd.Wait()
	t.Logf("killed replica %d while it streamed run %d's snapshot", victim.cmd.Process.Pid, killed)
	startStudio(t, dbURL, key, flags...)
	// The lease's takeover, then a whole dump streamed again.
	waitForRunEndWithin(t, db, killed, 4*time.Minute)
	if status, reason := runOutcome(t, db, killed); status != store.RunSucceeded {
		t.Fatalf("the killed snapshot's run %s: %s", status, reason)
	}

	// Three more fires after the killed one's.
	var first time.Time
	db.Pool.QueryRow(ctx, `SELECT min(created_at) FROM runs WHERE kind = 'backup'`).Scan(&first)
	until := first.Truncate(time.Minute).Add(3 * time.Minute)
	deadline := time.Now().Add(7 * time.Minute)
	for {
		var n int
		db.Pool.QueryRow(ctx, `SELECT count(*) FROM runs WHERE kind = 'backup' AND finished_at IS NOT NULL AND created_at >= $1`, until).Scan(&n)
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the schedule stopped firing")
		}
		time.Sleep(time.Second)
	}
	// Let the last run's retention finish.
	waitFor(t, func() bool {
		var running int
		db.Pool.QueryRow(ctx, `SELECT count(*) FROM runs WHERE kind = 'backup' AND finished_at IS NULL`).Scan(&running)
		return running == 0
	})

	// Every minute from the first fire to the last fired once: each
	// backup run counted at its fire's minute (a run created a moment
	// after the minute it fires for still counts for that minute; a run
	// with no fire would count at the zero time), each skipped fire at its
	// own.
	minutes := map[time.Time]int{}
	rows, err := db.Pool.Query(ctx, `SELECT COALESCE(date_trunc('minute', b.scheduled_at), 'epoch') FROM runs r LEFT JOIN backups b ON b.run_id = r.id WHERE r.kind = 'backup'
		UNION ALL SELECT date_trunc('minute', scheduled_at) FROM backups WHERE skipped <> ''`)
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for rows.Next() {
		var m time.Time
		rows.Scan(&m)
		minutes[m.UTC()]++
		if m.After(last) {
			last = m
		}
	}
	rows.Close()
	db.Pool.QueryRow(ctx, `SELECT min(scheduled_at) FROM backups`).Scan(&first)
	if n := minutes[time.Unix(0, 0).UTC()]; n != 0 {
		t.Errorf("%d backup runs belong to no fire", n)
	}
	for m := first.UTC().Truncate(time.Minute); !m.After(last.UTC()); m = m.Add(time.Minute) {
		if minutes[m] != 1 {
			t.Errorf("the fire of %s: %d runs or skips, want 1 (all: %v)", m.Format("15:04"), minutes[m], minutes)
		}
	}
	// Each run that did not succeed, with why and its checkpoints.
	rows, err = db.Pool.Query(ctx, `SELECT r.id, r.status, COALESCE(r.reason, ''), (SELECT string_agg(c.kind || ' ' || c.status || ' ' || c.name, '; ' ORDER BY c.position)
		FROM run_checkpoints c WHERE c.run_id = r.id) FROM runs r WHERE r.kind = 'backup' AND r.status <> 'succeeded' ORDER BY r.id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var status, reason string
		var cps *string
		rows.Scan(&id, &status, &reason, &cps)
		if cps == nil {
			cps = new(string)
		}
		t.Errorf("backup run %d %s: %s (checkpoints: %s)", id, status, reason, *cps)
	}
	rows.Close()

	// The bucket holds exactly the snapshots the Studio lists.
	var listed []string
	rows, err = db.Pool.Query(ctx, `SELECT name FROM backups WHERE name <> '' AND deleted_at IS NULL ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		rows.Scan(&name)
		listed = append(listed, name)
	}
	rows.Close()
	var stored []string
	for k := range srv.Objects(t, "backups", "studio/sched/production/") {
		dir := strings.Split(strings.TrimPrefix(k, "studio/sched/production/"), "/")[0]
		if !slices.Contains(stored, dir) {
			stored = append(stored, dir)
		}
	}
	slices.Sort(stored)
	if fmt.Sprint(stored) != fmt.Sprint(listed) {
		t.Fatalf("the bucket holds snapshots %v, the Studio lists %v", stored, listed)
	}
	if len(listed) < 2 || len(listed) > 4 {
		t.Errorf("%d snapshots kept under a retention of 2 minutes with a fire a minute: %v", len(listed), listed)
	}
	if ups, _ := srv.Client(t, "backups").ListMultipart(ctx, "studio/"); len(ups) != 0 {
		t.Errorf("uploads left in the bucket: %v", ups)
	}
}
