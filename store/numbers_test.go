package store_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestRunsAndSnapshotsAreNumberedPerEnvironment: runs created at once in
// one environment get distinct, consecutive numbers; another environment
// counts from 1 on its own; a deleted run leaves its number unused; a
// skipped scheduled fire takes no snapshot number.
func TestRunsAndSnapshotsAreNumberedPerEnvironment(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := context.Background()
	p, _, err := db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: "wiki", Source: "name: wiki", Canonical: []byte(`{"name":"wiki"}`), Hash: "sha256:x"})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := db.CreateEnvironment(ctx, store.Actor{}, p.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	staging, err := db.CreateEnvironment(ctx, store.Actor{}, p.ID, "staging")
	if err != nil {
		t.Fatal(err)
	}
	create := func(env *store.Environment) (*store.Run, error) {
		return db.CreateRun(ctx, store.Actor{}, env, store.NewRun{EnvironmentID: env.ID, Kind: "reconcile",
			Checkpoints: []store.NewCheckpoint{{Kind: "check-values", Name: "Check values"}}})
	}

	// Twelve runs of production created at once, a staging run among them.
	const n = 12
	var wg sync.WaitGroup
	numbers := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := create(prod)
			errs[i] = err
			if err == nil {
				numbers[i] = r.Number
			}
		}()
	}
	first, err := create(staging)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(numbers)
	for i, got := range numbers {
		if got != i+1 {
			t.Fatalf("the runs of production created at once are numbered %v, want 1 to %d, each once", numbers, n)
		}
	}
	if first.Number != 1 {
		t.Errorf("staging's first run is #%d, want #1 (its own count)", first.Number)
	}

	// A deleted run: the next one does not take its number.
	runs, err := db.RunsWhere(ctx, prod.ID, store.RunFilter{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].Number != n {
		t.Fatalf("the newest run of production is #%d, want #%d", runs[0].Number, n)
	}
	if _, err := db.Pool.Exec(ctx, `DELETE FROM runs WHERE id = $1`, runs[0].ID); err != nil {
		t.Fatal(err)
	}
	next, err := create(prod)
	if err != nil {
		t.Fatal(err)
	}
	if next.Number != n+1 {
		t.Errorf("after #%d was deleted the next run is #%d, want #%d", n, next.Number, n+1)
	}
	again, err := db.RunByID(ctx, next.ID)
	if err != nil {
		t.Fatal(err)
	}
	if again.Number != n+1 {
		t.Errorf("the run read back is #%d, want #%d", again.Number, n+1)
	}

	// Snapshots count apart from runs, and a skipped fire counts none.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO backups (environment_id, origin, scheduled_at, skipped) VALUES ($1, 'scheduled', now(), 'nothing is deployed yet')`, prod.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		snap := store.Snapshot{Name: "snap", Target: "/srv/backups", Run: store.NewRun{EnvironmentID: prod.ID, Kind: "backup",
			Checkpoints: []store.NewCheckpoint{{Kind: "snapshot", Name: "Snapshot"}}}}
		r, err := db.CreateManualBackup(ctx, store.Actor{}, prod, snap)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Pool.Exec(ctx, `UPDATE runs SET status = 'succeeded', finished_at = now() WHERE id = $1`, r.ID); err != nil {
			t.Fatal(err)
		}
	}
	backups, err := db.Backups(ctx, prod.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, b := range backups {
		got = append(got, b.Number)
	}
	if !slices.Equal(got, []int{2, 1, 0}) {
		t.Errorf("production's backups, newest first, are numbered %v, want [2 1 0] (the skipped fire none)", got)
	}
}
