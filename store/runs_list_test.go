package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// twoEnvironments is a database with a project's production and staging.
func twoEnvironments(t *testing.T) (*store.DB, *store.Environment, *store.Environment) {
	t.Helper()
	db := storetest.NewDB(t)
	ctx := context.Background()
	p, _, err := db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: "wiki", Source: "name: wiki", Canonical: []byte(`{"name":"wiki"}`), Hash: "sha256:x"})
	if err != nil {
		t.Fatal(err)
	}
	var envs [2]*store.Environment
	for i, name := range []string{"production", "staging"} {
		if envs[i], err = db.CreateEnvironment(ctx, store.Actor{}, p.ID, name); err != nil {
			t.Fatal(err)
		}
	}
	return db, envs[0], envs[1]
}

// TestRunsListsOfAnEnvironmentWhoseRunsAreOld: an environment whose runs
// are all older than another environment's many runs lists the same runs
// as a plain reading of the table: newest first, a page at a time, by
// kind, by several statuses merged, all combined; the stream's latest runs
// too. The lists read through a lateral join on the environment's row
// (newestRunsOf), so that no plan walks the other environment's newer
// runs (issue 41).
func TestRunsListsOfAnEnvironmentWhoseRunsAreOld(t *testing.T) {
	ctx := context.Background()
	db, old, busy := twoEnvironments(t)
	kinds := []store.RunKind{store.RunDeploy, store.RunBackup, store.RunRestore, store.RunReconcile}
	statuses := []string{store.RunSucceeded, store.RunFailed, store.RunCancelled, store.RunSucceededWithWarnings, store.RunRejected}
	create := func(env *store.Environment, i int) {
		t.Helper()
		r, err := db.CreateRun(ctx, store.Actor{}, env, store.NewRun{EnvironmentID: env.ID, Kind: kinds[i%len(kinds)]})
		if err != nil {
			t.Fatal(err)
		}
		if i%7 == 6 {
			return // left pending
		}
		if _, err := db.ApplyRunChange(ctx, store.RunChange{RunID: r.ID, Status: statuses[i%len(statuses)]}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		create(old, i)
	}
	for i := range 80 {
		create(busy, i)
	}

	// The reference: every run of the environment, newest first.
	type row struct {
		id     int64
		kind   store.RunKind
		status string
	}
	rows, _ := db.Pool.Query(ctx, `SELECT id, kind, status FROM runs WHERE environment_id = $1 ORDER BY id DESC`, old.ID)
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.id, &x.kind, &x.status)
		return x, err
	})
	if err != nil || len(all) != 40 {
		t.Fatalf("reference: %d runs, err %v", len(all), err)
	}
	want := func(f store.RunFilter, limit int) []int64 {
		var out []int64
		for _, r := range all {
			if (f.Before == 0 || r.id < f.Before) && (f.Kind == "" || r.kind == f.Kind) && (len(f.Statuses) == 0 || slices.Contains(f.Statuses, r.status)) && len(out) < limit {
				out = append(out, r.id)
			}
		}
		return out
	}
	ids := func(runs []store.Run) []int64 {
		var out []int64
		for _, r := range runs {
			if r.EnvironmentID != old.ID {
				t.Errorf("run %d of environment %d in production's list", r.ID, r.EnvironmentID)
			}
			out = append(out, r.ID)
		}
		return out
	}
	mid := all[15].id
	for _, c := range []struct {
		f     store.RunFilter
		limit int
	}{
		{store.RunFilter{}, 10},
		{store.RunFilter{}, 100},
		{store.RunFilter{Before: mid}, 10},
		{store.RunFilter{Kind: store.RunRestore}, 5},
		{store.RunFilter{Kind: store.RunRestore, Before: mid}, 5},
		{store.RunFilter{Statuses: []string{store.RunFailed, store.RunRejected}}, 6},
		{store.RunFilter{Statuses: []string{store.RunSucceeded, store.RunSucceededWithWarnings}, Kind: store.RunDeploy, Before: mid}, 3},
		{store.RunFilter{Statuses: []string{store.RunPending}}, 10},
	} {
		got, err := db.RunsWhere(ctx, old.ID, c.f, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if w := want(c.f, c.limit); !slices.Equal(ids(got), w) || len(w) == 0 {
			t.Errorf("RunsWhere(%+v, %d) = %v, want %v", c.f, c.limit, ids(got), w)
		}
	}
	// The stream's latest runs of the environment.
	evs, env, latest, err := db.EnvironmentEventsWithState(ctx, old.ID, 0, 10, 5)
	if err != nil || env.ID != old.ID || len(evs) != 10 {
		t.Fatalf("environment events: %d, env %+v err %v", len(evs), env, err)
	}
	// Each event carries the run it concerns as it is now.
	concerned := 0
	for _, e := range evs {
		if e.RunID == nil {
			continue
		}
		concerned++
		if e.RunNow == nil || e.RunNow.ID != *e.RunID {
			t.Errorf("event %d of run %d carries run %+v", e.Seq, *e.RunID, e.RunNow)
		}
	}
	if concerned == 0 {
		t.Error("no event of the first 10 concerns a run")
	}
	if w := want(store.RunFilter{}, 5); !slices.Equal(ids(latest), w) {
		t.Errorf("latest runs = %v, want %v", ids(latest), w)
	}
	if _, err := db.RunsWhere(ctx, old.ID+1000, store.RunFilter{}, 10); err != nil {
		t.Errorf("runs of an environment that does not exist: %v", err)
	}
}

// TestLatestProbeReadsTheEnvironmentsOwnNewestRuns: the newest probe of a
// domain among the environment's last runs, never another environment's
// newer one; NotFound when none probed it (issue 41: read as the runs
// lists are).
func TestLatestProbeReadsTheEnvironmentsOwnNewestRuns(t *testing.T) {
	ctx := context.Background()
	db, env, other := twoEnvironments(t)
	run := func(e *store.Environment, cps ...store.NewCheckpoint) int64 {
		t.Helper()
		r, err := db.CreateRun(ctx, store.Actor{}, e, store.NewRun{EnvironmentID: e.ID, Kind: store.RunReconcile, Checkpoints: cps})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	tls := store.NewCheckpoint{Kind: "issue-tls", Name: "Issue TLS", Detail: map[string]any{"tls": map[string]any{"domain": "wiki.test", "verdict": "pointing"}}}
	probe := store.NewCheckpoint{Kind: "probe", Name: "Probe", Detail: map[string]any{"probe": map[string]any{"domain": "wiki.test"}}}
	if _, err := db.LatestProbe(ctx, env.ID, "wiki.test"); err == nil {
		t.Fatal("a probe found before any run")
	}
	first := run(env, tls)
	run(env, store.NewCheckpoint{Kind: "build", Name: "Build"})
	run(other, probe)
	if rec, err := db.LatestProbe(ctx, env.ID, "wiki.test"); err != nil || rec.RunID != first {
		t.Fatalf("latest probe = %+v, %v; want run %d (the other environment's newer probe is not production's)", rec, err, first)
	}
	second := run(env, probe)
	if rec, err := db.LatestProbe(ctx, env.ID, "wiki.test"); err != nil || rec.RunID != second {
		t.Fatalf("latest probe = %+v, %v; want run %d", rec, err, second)
	}
	if _, err := db.LatestProbe(ctx, env.ID, "other.test"); err == nil {
		t.Fatal("a probe of a domain never probed was found")
	}
}
