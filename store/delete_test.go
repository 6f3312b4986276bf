package store_test

import (
	"context"
	"testing"

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
