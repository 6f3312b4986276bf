package store_test

import (
	"context"
	"testing"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

func TestProjectsAndEnvironmentsAreVisibleOnlyToMembers(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := context.Background()
	admin, err := db.UpsertSignIn(ctx, "https://idp.example", "admin-1", "ada@example.com", "Ada", true)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := db.UpsertSignIn(ctx, "https://idp.example", "bob-1", "bob@example.com", "Bob", false)
	if err != nil {
		t.Fatal(err)
	}
	a := store.Actor{User: admin, RequestID: "req-1"}
	p, rev, err := db.CreateProject(ctx, a, store.NewRevision{Name: "wiki", Source: "name: wiki\n", Canonical: []byte(`{"name":"wiki"}`), Hash: "sha256:1"})
	if err != nil {
		t.Fatal(err)
	}
	if rev.Number != 1 || rev.CreatedBy != "Ada" {
		t.Errorf("first revision = #%d by %q, want #1 by Ada", rev.Number, rev.CreatedBy)
	}
	if _, _, err := db.CreateProject(ctx, a, store.NewRevision{Name: "wiki", Canonical: []byte(`{}`), Hash: "sha256:2"}); apperr.CodeOf(err) != apperr.Conflict {
		t.Errorf("second project named wiki: error code %q, want conflict", apperr.CodeOf(err))
	}
	_, unchanged, err := db.AddRevision(ctx, a, p.ID, store.NewRevision{Name: "wiki", Canonical: []byte(`{"name":"wiki"}`), Hash: "sha256:1"})
	if err != nil || !unchanged {
		t.Errorf("same hash again: unchanged=%v err=%v, want unchanged", unchanged, err)
	}
	rev2, unchanged, err := db.AddRevision(ctx, a, p.ID, store.NewRevision{Name: "wiki", Canonical: []byte(`{"name":"wiki","x":1}`), Hash: "sha256:3"})
	if err != nil || unchanged || rev2.Number != 2 {
		t.Errorf("changed hash: rev=%v unchanged=%v err=%v, want revision 2", rev2, unchanged, err)
	}
	prod, err := db.CreateEnvironment(ctx, a, p.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateEnvironment(ctx, a, p.ID, "staging"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateEnvironment(ctx, a, p.ID, "Bad_Name"); apperr.CodeOf(err) != apperr.Invalid {
		t.Errorf("environment Bad_Name: code %q, want invalid", apperr.CodeOf(err))
	}

	if got, _ := db.VisibleProjects(ctx, bob); len(got) != 0 {
		t.Errorf("non-member sees %d projects, want 0", len(got))
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO memberships (environment_id, user_id, role) VALUES ($1, $2, 'viewer')`, prod.ID, bob.ID); err != nil {
		t.Fatal(err)
	}
	got, err := db.VisibleProjects(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Environments) != 1 || got[0].Environments[0] != "production" {
		t.Errorf("viewer of production sees %+v, want wiki with production only", got)
	}
	all, _ := db.VisibleProjects(ctx, admin)
	if len(all) != 1 || len(all[0].Environments) != 2 {
		t.Errorf("installation admin sees %+v, want wiki with both environments", all)
	}
	role, _ := db.EnvironmentRole(ctx, bob, prod.ID)
	if role != store.RoleViewer || role.Includes(store.RoleDeployer) {
		t.Errorf("bob's role = %q; viewer must not include deployer", role)
	}
}
