package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	if _, err := listener.Exec(ctx, "LISTEN "+store.RunEventsChannel); err != nil {
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
		seen[note.Payload] = true
	}
	for i := 1; i <= n; i++ {
		if want := fmt.Sprintf("%d:%d", runID, i); !seen[want] {
			t.Errorf("no notification %q", want)
		}
	}
}
