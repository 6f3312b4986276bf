package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestDeleteEnvironmentAndProject: an environment goes with its values and
// memberships but not its audit records, not while a run is unfinished;
// a project goes only without environments.
func TestDeleteEnvironmentAndProject(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := context.Background()
	admin, err := db.UpsertSignIn(ctx, "https://idp.example", "admin-1", "ada@example.com", "Ada", true)
	if err != nil {
		t.Fatal(err)
	}
	a := store.Actor{User: admin, RequestID: "req-1"}
	p, _, err := db.CreateProject(ctx, a, store.NewRevision{Name: "wiki", Source: "name: wiki\n", Canonical: []byte(`{"name":"wiki"}`), Hash: "sha256:1"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := db.CreateEnvironment(ctx, a, p.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := db.Pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO runs (environment_id, kind) VALUES ($1, 'backup')`, env.ID); err != nil {
		t.Fatal(err)
	}
	if busy, err := db.RunInProgress(ctx, env.ID); err != nil || !busy {
		t.Fatalf("RunInProgress = %v, %v; want true", busy, err)
	}
	if err := db.DeleteEnvironment(ctx, a, env); apperr.CodeOf(err) != apperr.Conflict {
		t.Fatalf("delete with a run in progress: code %q, want conflict", apperr.CodeOf(err))
	}
	if err := db.DeleteProject(ctx, a, p); apperr.CodeOf(err) != apperr.Conflict {
		t.Fatalf("delete a project with an environment: code %q, want conflict", apperr.CodeOf(err))
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE runs SET status = 'succeeded', finished_at = now()`); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteEnvironment(ctx, a, env); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM environments WHERE id = $1`, env.ID); n != 0 {
		t.Errorf("environment still stored")
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE environment = 'production' AND environment_id IS NULL`); n != 2 {
		t.Errorf("audit records of the deleted environment = %d, want its creation and its deletion", n)
	}
	if err := db.DeleteEnvironment(ctx, a, env); apperr.CodeOf(err) != apperr.NotFound {
		t.Errorf("deleting it again: code %q, want not found", apperr.CodeOf(err))
	}
	if err := db.DeleteProject(ctx, a, p); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM revisions WHERE project_id = $1`, p.ID); n != 0 {
		t.Errorf("%d revisions outlive their project", n)
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE action = 'project.deleted' AND project = 'wiki' AND actor = 'Ada'`); n != 1 {
		t.Errorf("project.deleted records = %d, want 1", n)
	}
}

// TestEnvironmentDeletionRun: starting the deletion marks the environment
// deleting with its delete run; no other run starts then, nor a second
// delete run; the rows go only when the delete run's executor finishes it
// (the run with them); after a failed delete run a second start retries.
func TestEnvironmentDeletionRun(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := context.Background()
	admin, err := db.UpsertSignIn(ctx, "https://idp.example", "admin-1", "ada@example.com", "Ada", true)
	if err != nil {
		t.Fatal(err)
	}
	a := store.Actor{User: admin, RequestID: "req-1"}
	p, _, err := db.CreateProject(ctx, a, store.NewRevision{Name: "wiki", Source: "name: wiki\n", Canonical: []byte(`{"name":"wiki"}`), Hash: "sha256:1"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := db.CreateEnvironment(ctx, a, p.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := db.Pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	nr := store.NewRun{EnvironmentID: env.ID, Checkpoints: []store.NewCheckpoint{{Kind: "delete-platform", Name: "Delete"}}}
	run, err := db.StartEnvironmentDeletion(ctx, a, env, nr)
	if err != nil {
		t.Fatal(err)
	}
	if run.Kind != "delete" {
		t.Errorf("the delete run's kind is %q", run.Kind)
	}
	got, err := db.EnvironmentByID(ctx, env.ID)
	if err != nil || got.State != store.EnvironmentDeleting {
		t.Fatalf("after starting the deletion the environment is %v (%v), want deleting", got, err)
	}
	if _, err := db.StartEnvironmentDeletion(ctx, a, got, nr); apperr.CodeOf(err) != apperr.Conflict {
		t.Errorf("a second delete while the first runs: code %q, want conflict", apperr.CodeOf(err))
	}
	if _, err := db.CreateRun(ctx, a, got, store.NewRun{EnvironmentID: env.ID, Kind: "deploy"}); apperr.CodeOf(err) != apperr.Conflict {
		t.Errorf("a deploy of a deleting environment: code %q, want conflict", apperr.CodeOf(err))
	}
	// Only the executor holding the run's lease deletes the rows.
	if ok, err := db.FinishEnvironmentDeletion(ctx, run.ID, "someone-else"); err != nil || ok {
		t.Fatalf("finishing without the lease: %v, %v; want refused", ok, err)
	}
	if ok, _, err := db.ClaimRunLease(ctx, run.ID, "executor-1", time.Minute); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	// The platform part failed: the run ends, the environment stays
	// deleting with every row, and a second start retries.
	if _, err := db.Pool.Exec(ctx, `UPDATE runs SET status = 'failed', reason = 'namespace stuck', finished_at = now() WHERE id = $1`, run.ID); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.FinishEnvironmentDeletion(ctx, run.ID, "executor-1"); err != nil || ok {
		t.Fatalf("finishing a failed delete run: %v, %v; want refused", ok, err)
	}
	if n := count(`SELECT count(*) FROM environments WHERE id = $1 AND state = 'deleting'`, env.ID); n != 1 {
		t.Fatalf("after a failed delete run the environment is gone or not deleting")
	}
	retry, err := db.StartEnvironmentDeletion(ctx, a, got, nr)
	if err != nil {
		t.Fatalf("retrying the deletion: %v", err)
	}
	if ok, _, err := db.ClaimRunLease(ctx, retry.ID, "executor-2", time.Minute); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if ok, err := db.FinishEnvironmentDeletion(ctx, retry.ID, "executor-2"); err != nil || !ok {
		t.Fatalf("finishing the retried delete run: %v, %v", ok, err)
	}
	if n := count(`SELECT count(*) FROM environments WHERE id = $1`, env.ID); n != 0 {
		t.Errorf("the environment outlived its delete run")
	}
	if n := count(`SELECT count(*) FROM runs WHERE id IN ($1, $2)`, run.ID, retry.ID); n != 0 {
		t.Errorf("%d delete runs outlived their environment", n)
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE action = 'environment.deleted' AND environment = 'production' AND actor = 'Ada'`); n != 1 {
		t.Errorf("environment.deleted records naming the run's creator = %d, want 1", n)
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE action = 'environment.deletion_started' AND environment = 'production'`); n != 2 {
		t.Errorf("environment.deletion_started records = %d, want 2 (the first try and the retry)", n)
	}
	// A new environment of the same name starts afresh.
	again, err := db.CreateEnvironment(ctx, a, p.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	if again.ID == env.ID || again.State != store.EnvironmentActive {
		t.Errorf("the new environment: id %d (old %d), state %s", again.ID, env.ID, again.State)
	}
}
