package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestRunEventsAreNumberedWithoutGapsAndAnnounced appends events to one run
// from many transactions at once, some rolled back, and checks that the
// stored sequence is 1..n in order and that each commit was announced.
func TestRunEventsAreNumberedWithoutGapsAndAnnounced(t *testing.T) {
	url := storetest.NewURL(t)
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	ctx := context.Background()
	var runID int64
	err = db.Pool.QueryRow(ctx, `
		WITH p AS (INSERT INTO projects (name) VALUES ('wiki') RETURNING id),
		     e AS (INSERT INTO environments (project_id, name) SELECT id, 'production' FROM p RETURNING id)
		INSERT INTO runs (environment_id, kind) SELECT id, 'deploy' FROM e RETURNING id`).Scan(&runID)
	if err != nil {
		t.Fatal(err)
	}
	listener, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	// Listen as the event hub does: a run's commits are announced only
	// while some session follows it.
	if _, err := listener.Exec(ctx, "LISTEN "+pgx.Identifier{store.RunEventsChannel(runID)}.Sanitize()+";"+store.FollowRunSQL(runID)); err != nil {
		t.Fatal(err)
	}

	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pos := i
			if _, err := db.AppendRunEvent(ctx, runID, &pos, map[string]any{"i": i}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()

	evs, err := db.RunEventsAfter(ctx, runID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != n {
		t.Fatalf("stored %d events, want %d", len(evs), n)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d, want %d", i, e.Seq, i+1)
		}
	}
	tail, err := db.RunEventsAfter(ctx, runID, n-3, 1000)
	if err != nil || len(tail) != 3 || tail[0].Seq != n-2 {
		t.Errorf("events after %d = %d events (err %v), want the last 3", n-3, len(tail), err)
	}
	seen := map[string]bool{}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for len(seen) < n {
		note, err := listener.WaitForNotification(wctx)
		if err != nil {
			t.Fatal(err)
		}
		// "<run>:<seq>", then the event itself when it fits.
		parts := strings.SplitN(note.Payload, ":", 3)
		if len(parts) < 2 {
			t.Fatalf("notification %q has no run and sequence number", note.Payload)
		}
		if len(parts) == 3 {
			notice, err := store.DecodeRunNotice(parts[2])
			if err != nil {
				t.Fatalf("notification %s:%s carries an event that does not decode: %v", parts[0], parts[1], err)
			}
			var p struct{ I int }
			if err := json.Unmarshal(notice.Payload, &p); err != nil || notice.Checkpoint == nil || *notice.Checkpoint != p.I {
				t.Errorf("notification %s:%s carries checkpoint %v with payload %s, want the appended event", parts[0], parts[1], notice.Checkpoint, notice.Payload)
			}
		}
		seen[parts[0]+":"+parts[1]] = true
	}
	for i := 1; i <= n; i++ {
		if want := fmt.Sprintf("%d:%d", runID, i); !seen[want] {
			t.Errorf("no notification %q", want)
		}
	}
}

// The event hub reads a stream's new events together with what the live
// page renders from them, in one round trip: each event's checkpoint as
// stored now, the run and its environment, or an environment's newest runs.
func TestEventsAreReadWithTheStateTheyRender(t *testing.T) {
	url := storetest.NewURL(t)
	ctx := context.Background()
	db, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	var envID int64
	err = db.Pool.QueryRow(ctx, `
		WITH p AS (INSERT INTO projects (name) VALUES ('wiki') RETURNING id)
		INSERT INTO environments (project_id, name) SELECT id, 'production' FROM p RETURNING id`).Scan(&envID)
	if err != nil {
		t.Fatal(err)
	}
	var runIDs []int64
	for range 3 {
		var id int64
		if err := db.Pool.QueryRow(ctx, `INSERT INTO runs (environment_id, kind) VALUES ($1, 'deploy') RETURNING id`, envID).Scan(&id); err != nil {
			t.Fatal(err)
		}
		runIDs = append(runIDs, id)
	}
	runID := runIDs[2]
	if _, err := db.Pool.Exec(ctx, `
		INSERT INTO run_checkpoints (run_id, position, kind, name, status)
		VALUES ($1, 0, 'build', 'web', 'pending'), ($1, 1, 'issue-tls', 'shop.example.com', 'pending')`, runID); err != nil {
		t.Fatal(err)
	}
	one := 1
	for _, p := range []*int{nil, &one, &one} {
		if _, err := db.AppendRunEvent(ctx, runID, p, map[string]any{"run": map[string]any{"status": "running"}}); err != nil {
			t.Fatal(err)
		}
	}
	// The checkpoint moved on after its events were written: the state
	// read with them is the newest.
	if _, err := db.Pool.Exec(ctx, `UPDATE run_checkpoints SET status = 'waiting', warning = 'TLS deferred' WHERE run_id = $1 AND position = 1`, runID); err != nil {
		t.Fatal(err)
	}
	evs, run, env, err := db.RunEventsWithState(ctx, runID, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Seq != 2 || evs[1].Seq != 3 {
		t.Fatalf("events after 1 = %+v, want seq 2 and 3", evs)
	}
	for _, e := range evs {
		if c := e.CheckpointNow; c == nil || c.Position != 1 || c.Name != "shop.example.com" || c.Status != "waiting" || c.Warning != "TLS deferred" {
			t.Errorf("event %d's checkpoint = %+v, want shop.example.com waiting with TLS deferred", e.Seq, c)
		}
	}
	if run.ID != runID || run.LastSeq != 3 || env.ID != envID || env.Project != "wiki" || env.Name != "production" {
		t.Errorf("state = run %d (last seq %d) in %s/%s, want run %d (3) in wiki/production", run.ID, run.LastSeq, env.Project, env.Name, runID)
	}
	evs, _, _, err = db.RunEventsWithState(ctx, runID, 0, 1)
	if err != nil || len(evs) != 1 || evs[0].CheckpointNow != nil {
		t.Errorf("first event = %+v (err %v), want the run-level change alone, without a checkpoint", evs, err)
	}
	evs, run, _, err = db.RunEventsWithState(ctx, runID, 3, 10)
	if err != nil || len(evs) != 0 || run == nil || run.ID != runID {
		t.Errorf("events after the last = %+v of run %+v (err %v), want none, and the run", evs, run, err)
	}
	if _, _, _, err := db.RunEventsWithState(ctx, runID+100, 0, 10); apperr.CodeOf(err) != apperr.NotFound {
		t.Errorf("events of a run that does not exist: err %v, want NotFound", err)
	}

	if _, err := db.Pool.Exec(ctx, `
		WITH s AS (UPDATE environments SET last_event_seq = 3 WHERE id = $1 RETURNING id)
		INSERT INTO environment_events (environment_id, seq, run_id, payload)
		SELECT id, 1, $2::bigint, '{"type": "run.started"}'::jsonb FROM s
		UNION ALL
		SELECT id, 2, $2::bigint, '{"type": "service.state", "service": {"domain": "shop.example.com", "state": "issued"}}' FROM s
		UNION ALL
		SELECT id, 3, NULL, '{"type": "environment.state", "state": "down"}' FROM s`, envID, runID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `
		INSERT INTO certificates (environment_id, domain, route, state)
		VALUES ($1, 'shop.example.com', 'web / public', 'issued'), ($1, 'other.example.com', 'web / admin', 'deferred')`, envID); err != nil {
		t.Fatal(err)
	}
	envEvs, env, latest, err := db.EnvironmentEventsWithState(ctx, envID, 0, 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(envEvs) != 3 || envEvs[0].Seq != 1 || env.ID != envID || env.LastEventSeq != 3 {
		t.Errorf("environment events = %+v in environment %+v, want seq 1 to 3 of environment %d", envEvs, env, envID)
	} else {
		// The run of an event comes with it, also when it is not one of
		// the latest (the runs list shows more).
		for _, e := range envEvs[:2] {
			if e.RunNow == nil || e.RunNow.ID != runID || e.RunNow.LastSeq != 3 {
				t.Errorf("event %d came with run %+v, want run %d as stored (last seq 3)", e.Seq, e.RunNow, runID)
			}
		}
		if envEvs[2].RunNow != nil {
			t.Errorf("an environment's own change came with run %+v, want none", envEvs[2].RunNow)
		}
		if envEvs[0].CertificateNow != nil {
			t.Errorf("a run's start came with certificate %+v, want none", envEvs[0].CertificateNow)
		}
		if c := envEvs[1].CertificateNow; c == nil || c.Domain != "shop.example.com" || c.State != "issued" || c.Route != "web / public" {
			t.Errorf("a service's change came with certificate %+v, want shop.example.com issued", c)
		}
	}
	if len(latest) != 2 || latest[0].ID != runIDs[2] || latest[1].ID != runIDs[1] {
		t.Errorf("latest runs = %d runs, want the newest two (%d, %d), newest first", len(latest), runIDs[2], runIDs[1])
	}
	if _, _, _, err := db.EnvironmentEventsWithState(ctx, envID+100, 0, 10, 2); apperr.CodeOf(err) != apperr.NotFound {
		t.Errorf("events of an environment that does not exist: err %v, want NotFound", err)
	}
}

// A run is announced only while some session follows it
// (store.FollowRunSQL), and its notification then carries the event; a
// process that starts following waits for a transaction that appended
// without announcing, so that its next read of the table has that event.
func TestRunIsAnnouncedWithItsEventOnlyWhileFollowed(t *testing.T) {
	url := storetest.NewURL(t)
	ctx := context.Background()
	db, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	var runID int64
	err = db.Pool.QueryRow(ctx, `
		WITH p AS (INSERT INTO projects (name) VALUES ('wiki') RETURNING id),
		     e AS (INSERT INTO environments (project_id, name) SELECT id, 'production' FROM p RETURNING id)
		INSERT INTO runs (environment_id, kind) SELECT id, 'deploy' FROM e RETURNING id`).Scan(&runID)
	if err != nil {
		t.Fatal(err)
	}
	listener, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	if _, err := listener.Exec(ctx, "LISTEN "+pgx.Identifier{store.RunEventsChannel(runID)}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	appendStep := func(step int) {
		t.Helper()
		if _, err := db.AppendRunEvent(ctx, runID, nil, map[string]any{"step": step}); err != nil {
			t.Fatal(err)
		}
	}
	next := func() string {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		note, err := listener.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("waiting for a notification: %v", err)
		}
		return note.Payload
	}
	// Notifications arrive in commit order: had step 1, appended while
	// nobody follows the run, been announced, its notification would come
	// before step 2's.
	appendStep(1)
	if _, err := listener.Exec(ctx, store.FollowRunSQL(runID)); err != nil {
		t.Fatal(err)
	}
	appendStep(2)
	got := next()
	prefix := fmt.Sprintf("%d:2:", runID)
	if !strings.HasPrefix(got, prefix) {
		t.Fatalf("first notification = %.40q…, want step 2's (step 1 came while nobody followed the run), carrying its event after %q", got, prefix)
	}
	notice, err := store.DecodeRunNotice(strings.TrimPrefix(got, prefix))
	if err != nil {
		t.Fatalf("the notification's event does not decode: %v", err)
	}
	var p struct{ Step int }
	if err := json.Unmarshal(notice.Payload, &p); err != nil || p.Step != 2 {
		t.Errorf("the notification carries payload %s, want step 2", notice.Payload)
	}

	// Unfollowed again, a transaction appends step 3 and stays open: a
	// session that starts following now waits for it to end.
	if _, err := listener.Exec(ctx, store.UnfollowRunSQL(runID)); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, store.AppendRunEventSQL(), runID, nil, []byte(`{"step": 3}`)); err != nil {
		t.Fatal(err)
	}
	var marked []int64
	if rows, err := listener.Query(ctx, store.TryFollowRunsSQL([]int64{runID, runID + 1000})); err != nil {
		t.Fatal(err)
	} else if marked, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
	if len(marked) != 1 || marked[0] != runID+1000 {
		t.Fatalf("trying to follow runs %d (held by the open transaction) and %d (free) marked %v, want only the free one", runID, runID+1000, marked)
	}
	followed := make(chan error, 1)
	go func() {
		_, err := listener.Exec(ctx, store.FollowRunSQL(runID))
		followed <- err
	}()
	waitForLockWait(t, db, runID)
	select {
	case err := <-followed:
		t.Fatalf("following the run did not wait for the open transaction that appended without announcing (err %v)", err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-followed; err != nil {
		t.Fatal(err)
	}
	appendStep(4)
	if got, prefix := next(), fmt.Sprintf("%d:4:", runID); !strings.HasPrefix(got, prefix) {
		t.Errorf("notification once followed again = %.40q…, want step 4's after %q", got, prefix)
	}
}

// waitForLockWait waits until some session waits for the run's followed
// lock.
func waitForLockWait(t *testing.T, db *store.DB, runID int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := db.Pool.QueryRow(context.Background(), `
			SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			               AND classid = $1::int::oid AND objid = $2::int::oid AND objsubid = 2)`,
			store.RunFollowedLockClass, store.RunFollowedLockKey(runID)).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no session waits for the run's followed lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
