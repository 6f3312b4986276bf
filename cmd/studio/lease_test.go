package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// signedIn returns a client signed in to the Studio process s.
func signedIn(t testing.TB, s *studioProcess) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(s.addr + s.link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c
}

// executorPID returns the process id in the lease of the run (its owner
// is host:pid:token), 0 while no execution holds it.
func executorPID(db *store.DB, runID int64) int {
	var owner *string
	db.Pool.QueryRow(context.Background(), `SELECT lease_owner FROM runs WHERE id = $1`, runID).Scan(&owner)
	if owner == nil {
		return 0
	}
	parts := strings.Split(*owner, ":")
	if len(parts) < 3 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[len(parts)-2])
	return pid
}

func checkpointStatus(db *store.DB, runID int64, kind string) string {
	var status string
	db.Pool.QueryRow(context.Background(), `SELECT status FROM run_checkpoints WHERE run_id = $1 AND kind = $2`, runID, kind).Scan(&status)
	return status
}

// waitForRunEnd waits until the run has finished, however it ended.
func waitForRunEnd(t testing.TB, db *store.DB, runID int64) {
	t.Helper()
	waitForRunEndWithin(t, db, runID, 2*time.Minute)
}

// waitForRunEndWithin is waitForRunEnd giving up after limit, printing
// the run's checkpoints when it does.
func waitForRunEndWithin(t testing.TB, db *store.DB, runID int64, limit time.Duration) {
	t.Helper()
	if !pollUntil(limit, func() bool {
		var finished bool
		db.Pool.QueryRow(context.Background(), `SELECT finished_at IS NOT NULL FROM runs WHERE id = $1`, runID).Scan(&finished)
		return finished
	}) {
		var cps string
		db.Pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(kind || ' ' || status, ', ' ORDER BY position), 'none')
			FROM run_checkpoints WHERE run_id = $1`, runID).Scan(&cps)
		t.Fatalf("run %d did not end within %s (checkpoints: %s)", runID, limit, cps)
	}
}

// checkRunSucceededOnce checks that the run succeeded, its events are
// numbered without gaps, and no checkpoint was started or finished twice.
func checkRunSucceededOnce(t *testing.T, db *store.DB, runID int64) []store.RunEvent {
	t.Helper()
	ctx := context.Background()
	run, err := db.RunByID(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != store.RunSucceeded {
		t.Fatalf("run %s: %s", run.Status, run.Reason)
	}
	evs, err := db.RunEventsAfter(ctx, runID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	per := map[int]int{}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i+1, e.Seq)
		}
		if e.Checkpoint != nil {
			per[*e.Checkpoint]++
		}
	}
	cps, _ := db.Checkpoints(ctx, runID)
	for _, cp := range cps {
		if cp.Status != store.CheckpointSucceeded || per[cp.Position] != 2 {
			t.Errorf("%s: %s with %d events, want succeeded with 2 (running, succeeded)", cp.Name, cp.Status, per[cp.Position])
		}
	}
	return evs
}

// TestTheOtherReplicaTakesOverTheRunOfAKilledExecutor runs two Studio
// processes with River's own rescue left at its default (15 minutes), kills
// the one executing a deploy with SIGKILL in the middle of a step, and
// watches the survivor: the run is marked "executor lost" once the lease
// expires and resumed by the survivor, which finishes it with no step
// started twice.
func TestTheOtherReplicaTakesOverTheRunOfAKilledExecutor(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Studio processes")
	}
	db, dbURL, key := newKilledEnvironment(t)
	a, b := startStudio(t, dbURL, key), startStudio(t, dbURL, key)
	procs := map[int]*studioProcess{a.cmd.Process.Pid: a, b.cmd.Process.Pid: b}
	// Sessions live in the database: this client is signed in on both.
	client := signedIn(t, a)
	runID := deployRevision1(t, client, a.addr, db)
	waitFor(t, func() bool { return checkpointStatus(db, runID, "import") == store.CheckpointRunning })
	victim := procs[executorPID(db, runID)]
	if victim == nil {
		t.Fatalf("the run's lease names no process of the test")
	}
	survivor := a
	if victim == a {
		survivor = b
	}
	killed := time.Now()
	victim.cmd.Process.Kill()
	victim.cmd.Wait()

	waitForRunEnd(t, db, runID)
	t.Logf("the survivor finished the run %s after the kill (lease 2 s)", time.Since(killed).Round(time.Millisecond))
	if pid := executorPID(db, runID); pid != 0 {
		t.Fatalf("a finished run still holds a lease of process %d", pid)
	}
	evs := checkRunSucceededOnce(t, db, runID)
	var lost bool
	for _, e := range evs {
		var p struct {
			Run struct {
				ExecutorLost bool `json:"executorLost"`
			} `json:"run"`
		}
		if json.Unmarshal(e.Payload, &p) == nil && p.Run.ExecutorLost {
			lost = true
		}
	}
	if !lost {
		t.Fatal("no event said the run's executor was lost")
	}
	// The run page on the survivor shows how it ended.
	resp, err := client.Get(survivor.addr + "/projects/killed/environments/production/runs/" + strconv.FormatInt(runID, 10))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `data-run-status="succeeded"`) {
		t.Fatalf("the run page does not show the run succeeded (%d)", resp.StatusCode)
	}
}

// TestSIGTERMLetsARunningReleaseCommandFinishAndTheNextProcessResumes sends
// SIGTERM (a rolling restart) to the process executing a deploy while its
// release command runs: the process records the command's result, gives
// the run back and exits; the next process finishes the deploy.
func TestSIGTERMLetsARunningReleaseCommandFinishAndTheNextProcessResumes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Studio processes")
	}
	db, dbURL, key := newKilledEnvironment(t)
	first := startStudio(t, dbURL, key, "--local-step-delay", "2s")
	runID := deployRevision1(t, signedIn(t, first), first.addr, db)
	waitFor(t, func() bool { return checkpointStatus(db, runID, "release") == store.CheckpointRunning })
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := first.cmd.Wait(); err != nil {
		t.Fatalf("the Studio did not stop cleanly: %v", err)
	}
	if got := checkpointStatus(db, runID, "release"); got != store.CheckpointSucceeded {
		t.Fatalf("after the graceful stop the release command is %s, want succeeded", got)
	}
	if pid := executorPID(db, runID); pid != 0 {
		t.Fatalf("the stopped process kept the run's lease")
	}
	startStudio(t, dbURL, key, "--local-step-delay", "100ms")
	waitForRunEnd(t, db, runID)
	checkRunSucceededOnce(t, db, runID)
}

// TestAPostgreSQLRestartDuringAReleaseCommandFailsNothing restarts the
// database (a fast shutdown; the private server comes back after a few
// seconds) while a release command runs: the Studio records the command's
// result once the database is back, and the deploy succeeds.
func TestAPostgreSQLRestartDuringAReleaseCommandFailsNothing(t *testing.T) {
	// Serial: it restarts the PostgreSQL server every test of the binary uses.
	if testing.Short() {
		t.Skip("starts Studio processes and restarts PostgreSQL")
	}
	db, dbURL, key := newKilledEnvironment(t)
	s := startStudio(t, dbURL, key, "--local-step-delay", "2s", "--run-lease", "20s")
	runID := deployRevision1(t, signedIn(t, s), s.addr, db)
	waitFor(t, func() bool { return checkpointStatus(db, runID, "release") == store.CheckpointRunning })
	if err := storetest.Server().Interrupt(); err != nil {
		t.Fatal(err)
	}
	waitForRunEnd(t, db, runID)
	checkRunSucceededOnce(t, db, runID)
	var restarted bool
	// The database did go away during the run.
	db.Pool.QueryRow(context.Background(), `SELECT pg_postmaster_start_time() > (SELECT created_at FROM runs WHERE id = $1)`, runID).Scan(&restarted)
	if !restarted {
		t.Fatal("PostgreSQL was not restarted during the run")
	}
}
