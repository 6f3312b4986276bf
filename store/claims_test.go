package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// claimFixture is two projects with an environment each, on a fresh database.
type claimFixture struct {
	t    *testing.T
	ctx  context.Context
	db   *store.DB
	shop *store.Environment // shop / production
	blog *store.Environment // blog / production
}

func newClaimFixture(t *testing.T) *claimFixture {
	t.Helper()
	f := &claimFixture{t: t, ctx: context.Background(), db: storetest.NewDB(t)}
	f.shop = f.environment("shop")
	f.blog = f.environment("blog")
	return f
}

func (f *claimFixture) environment(project string) *store.Environment {
	f.t.Helper()
	p, _, err := f.db.CreateProject(f.ctx, store.Actor{}, store.NewRevision{Name: project, Source: "name: " + project,
		Canonical: []byte(`{"name":"` + project + `"}`), Hash: "sha256:" + project})
	if err != nil {
		f.t.Fatal(err)
	}
	env, err := f.db.CreateEnvironment(f.ctx, store.Actor{}, p.ID, "production")
	if err != nil {
		f.t.Fatal(err)
	}
	return env
}

// deploy creates a deploy run of env claiming names.
func (f *claimFixture) deploy(env *store.Environment, names ...string) (*store.Run, error) {
	return f.db.CreateRun(f.ctx, store.Actor{}, env, store.NewRun{EnvironmentID: env.ID, Kind: "deploy", ClaimHostnames: names,
		Checkpoints: []store.NewCheckpoint{{Kind: "check-values", Name: "Check values"}}})
}

// holders is every claim as "hostname=project/env".
func (f *claimFixture) holders() map[string]string {
	f.t.Helper()
	claims, err := f.db.HostnameClaims(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range claims {
		out[c.Hostname] = c.Project + "/" + c.Environment
	}
	return out
}

func (f *claimFixture) runCount(env *store.Environment) int {
	f.t.Helper()
	runs, err := f.db.Runs(f.ctx, env.ID, 100)
	if err != nil {
		f.t.Fatal(err)
	}
	return len(runs)
}

func TestAHostnameIsClaimedByTheFirstEnvironmentThatDeploysIt(t *testing.T) {
	f := newClaimFixture(t)
	first, err := f.deploy(f.shop, "Shop.Example.com", "shop.example.com", "www.shop.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.holders(); len(got) != 2 || got["shop.example.com"] != "shop/production" || got["www.shop.example.com"] != "shop/production" {
		t.Fatalf("claims %v, want shop.example.com and www.shop.example.com (lower-cased, once) for shop/production", got)
	}

	// Another project's environment naming one of them: no run is created.
	_, err = f.deploy(f.blog, "blog.example.com", "shop.example.com")
	var cc *store.ClaimConflict
	if !errors.As(err, &cc) || cc.Hostname != "shop.example.com" || cc.Owner != "shop / production" {
		t.Fatalf("deploy of another environment's hostname: %v, want a claim conflict on shop.example.com held by shop / production", err)
	}
	if cc.Error() != "shop.example.com is served by another environment of this installation." {
		t.Fatalf("conflict reads %q", cc.Error())
	}
	if n := f.runCount(f.blog); n != 0 {
		t.Fatalf("the refused deploy created %d runs", n)
	}
	if got := f.holders(); len(got) != 2 {
		t.Fatalf("the refused deploy changed the claims: %v", got)
	}

	// The holder deploys it again: its claim stays the first run's.
	if _, err := f.deploy(f.shop, "shop.example.com"); err != nil {
		t.Fatalf("the holder's next deploy: %v", err)
	}
	claims, err := f.db.HostnameClaimsOf(f.ctx, []string{"SHOP.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if c := claims["shop.example.com"]; c.RunID == nil || *c.RunID != first.ID || c.EnvironmentID != f.shop.ID {
		t.Fatalf("claim %+v, want held by shop since run %d", c, first.ID)
	}
}

func TestASuccessfulDeployReleasesTheHostnamesItNoLongerUses(t *testing.T) {
	f := newClaimFixture(t)
	run, err := f.deploy(f.shop, "shop.example.com", "old.shop.example.com")
	if err != nil {
		t.Fatal(err)
	}
	var revID int64
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT id FROM revisions WHERE project_id = $1`, f.shop.ProjectID).Scan(&revID); err != nil {
		t.Fatal(err)
	}
	// A failed deploy keeps what it claimed.
	if _, err := f.db.ApplyRunChange(f.ctx, store.RunChange{RunID: run.ID, Status: store.RunFailed, Reason: "rollout failed"}); err != nil {
		t.Fatal(err)
	}
	if got := f.holders(); len(got) != 2 {
		t.Fatalf("a failed deploy released claims: %v", got)
	}
	run2, err := f.deploy(f.shop, "shop.example.com", "new.shop.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.ApplyRunChange(f.ctx, store.RunChange{RunID: run2.ID, Activate: &revID, ActiveHostnames: []string{"shop.example.com", "new.shop.example.com"}}); err != nil {
		t.Fatal(err)
	}
	got := f.holders()
	if len(got) != 2 || got["shop.example.com"] == "" || got["new.shop.example.com"] == "" {
		t.Fatalf("claims after the activation %v, want exactly shop.example.com and new.shop.example.com", got)
	}
	// The released name is free for another environment.
	blogRun, err := f.deploy(f.blog, "old.shop.example.com")
	if err != nil {
		t.Fatalf("deploying a released hostname: %v", err)
	}
	if f.holders()["old.shop.example.com"] != "blog/production" {
		t.Fatalf("claims %v, want old.shop.example.com held by blog", f.holders())
	}
	// Deleting an environment releases its claims.
	if _, err := f.db.ApplyRunChange(f.ctx, store.RunChange{RunID: blogRun.ID, Status: store.RunCancelled}); err != nil {
		t.Fatal(err)
	}
	if err := f.db.DeleteEnvironment(f.ctx, store.Actor{}, f.blog); err != nil {
		t.Fatal(err)
	}
	if got := f.holders(); got["old.shop.example.com"] != "" {
		t.Fatalf("the deleted environment still holds old.shop.example.com: %v", got)
	}
}

func TestAnInstallationAdminMovesAClaimWithAnAuditRecord(t *testing.T) {
	f := newClaimFixture(t)
	if _, err := f.deploy(f.shop, "shop.example.com"); err != nil {
		t.Fatal(err)
	}
	admin := store.Actor{}
	if _, err := f.db.MoveHostnameClaim(f.ctx, admin, "nothing.example.com", f.blog.ID); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("moving an unclaimed hostname: %v", err)
	}
	if _, err := f.db.MoveHostnameClaim(f.ctx, admin, "shop.example.com", f.shop.ID); apperr.CodeOf(err) != apperr.Invalid {
		t.Fatalf("moving a claim to its holder: %v", err)
	}
	if _, err := f.db.MoveHostnameClaim(f.ctx, admin, "shop.example.com", 999999); apperr.CodeOf(err) != apperr.Invalid {
		t.Fatalf("moving a claim to no environment: %v", err)
	}
	if _, err := f.db.Pool.Exec(f.ctx, `INSERT INTO certificates (environment_id, domain, route, state) VALUES ($1, 'shop.example.com', 'web / public', 'deferred')`, f.shop.ID); err != nil {
		t.Fatal(err)
	}
	moved, err := f.db.MoveHostnameClaim(f.ctx, admin, "Shop.Example.com", f.blog.ID)
	if err != nil {
		t.Fatal(err)
	}
	if moved.EnvironmentID != f.blog.ID || f.holders()["shop.example.com"] != "blog/production" {
		t.Fatalf("after the move %+v, claims %v", moved, f.holders())
	}
	if _, err := f.db.CertificateFor(f.ctx, f.shop.ID, "shop.example.com"); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("the old holder's deferred certificate stays after the move: %v", err)
	}
	// The old holder's next deploy naming it is refused now.
	var cc *store.ClaimConflict
	if _, err := f.deploy(f.shop, "shop.example.com"); !errors.As(err, &cc) {
		t.Fatalf("the old holder's deploy after the move: %v", err)
	}
	recs, _, err := f.db.AuditEvents(f.ctx, store.AuditQuery{All: true, Action: "hostname.moved", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Target != "shop.example.com" || fmt.Sprint(recs[0].Detail["from"]) != "shop / production" ||
		fmt.Sprint(recs[0].Detail["to"]) != "blog / production" {
		t.Fatalf("audit records %+v, want one hostname.moved from shop / production to blog / production", recs)
	}
	// Only installation admins read it: it names no environment.
	recs, _, err = f.db.AuditEvents(f.ctx, store.AuditQuery{EnvironmentIDs: []int64{f.shop.ID, f.blog.ID}, Action: "hostname.moved", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Fatalf("environment admins read the move: %+v", recs)
	}
}

// TestConcurrentFirstDeploysOfOneHostnameCreateOneRun races two
// environments' first deploys of the same hostname, many times: each
// time exactly one run is created and the other is a claim conflict.
func TestConcurrentFirstDeploysOfOneHostnameCreateOneRun(t *testing.T) {
	f := newClaimFixture(t)
	const rounds = 20
	wins := map[int64]int{}
	for i := range rounds {
		name := fmt.Sprintf("race-%d.example.com", i)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		for j, env := range []*store.Environment{f.shop, f.blog} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				// Two names each, in different orders: no deadlock either.
				names := []string{name, fmt.Sprintf("own-%d-%d.example.com", i, j)}
				if j == 1 {
					names[0], names[1] = names[1], names[0]
				}
				_, errs[j] = f.deploy(env, names...)
			}()
		}
		close(start)
		wg.Wait()
		var won []int64
		for j, env := range []*store.Environment{f.shop, f.blog} {
			var cc *store.ClaimConflict
			switch {
			case errs[j] == nil:
				won = append(won, env.ID)
			case errors.As(errs[j], &cc) && cc.Hostname == name:
			default:
				t.Fatalf("round %d: %v", i, errs[j])
			}
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d deploys created, want exactly one", i, len(won))
		}
		wins[won[0]]++
		claims, err := f.db.HostnameClaimsOf(f.ctx, []string{name})
		if err != nil {
			t.Fatal(err)
		}
		if claims[name].EnvironmentID != won[0] {
			t.Fatalf("round %d: %s is held by %d, the winner is %d", i, name, claims[name].EnvironmentID, won[0])
		}
	}
	if n := f.runCount(f.shop) + f.runCount(f.blog); n != rounds {
		t.Fatalf("%d runs for %d races", n, rounds)
	}
	t.Logf("wins by environment: %v", wins)
}

func TestExistingEnvironmentsClaimTheirActiveHostnamesOnce(t *testing.T) {
	f := newClaimFixture(t)
	keys, err := store.OpenKeyring(f.ctx, f.db, store.KeyringOptions{SecretKey: store.GenerateKey()})
	if err != nil {
		t.Fatal(err)
	}
	vault := store.NewVault(f.db, keys)
	manifest := `name: NAME
applications:
  web:
    build:
      context: .
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: "${APP_DOMAIN}"
        port: http
        aliases: ["www.shared.example.com"]
`
	activate := func(env *store.Environment, project, domain string) {
		t.Helper()
		res := compiler.Compile([]byte(strings.Replace(manifest, "NAME", project, 1)))
		if !res.Valid() {
			t.Fatalf("manifest: %v", res.Errors())
		}
		rev, _, err := f.db.AddRevision(f.ctx, store.Actor{}, env.ProjectID, store.NewRevision{Name: project, Source: manifest,
			Canonical: res.Definition.Canonical(), Hash: res.Hash})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := vault.SetValue(f.ctx, store.Actor{}, env, "APP_DOMAIN", domain); err != nil {
			t.Fatal(err)
		}
		if _, err := f.db.Pool.Exec(f.ctx, `UPDATE environments SET active_revision_id = $1 WHERE id = $2`, rev.ID, env.ID); err != nil {
			t.Fatal(err)
		}
	}
	activate(f.shop, "shop", "shop.example.com")
	activate(f.blog, "blog", "blog.example.com")
	// As migration 100 leaves an installation that has deployed before.
	if _, err := f.db.Pool.Exec(f.ctx, `INSERT INTO installation_settings (key, value) VALUES ('hostname_claims_backfill', 'pending')`); err != nil {
		t.Fatal(err)
	}
	// notes.example.com is the Studio's own address here: never claimed.
	activate(f.environment("notes"), "notes", "notes.example.com")
	claimed, conflicts, err := vault.BackfillHostnameClaims(f.ctx, []string{"notes.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	got := f.holders()
	if claimed != 3 || conflicts != 2 || got["shop.example.com"] != "shop/production" || got["blog.example.com"] != "blog/production" ||
		got["www.shared.example.com"] != "shop/production" || got["notes.example.com"] != "" {
		t.Fatalf("backfill claimed %d (%d held already): %v; want shop's two, blog's own, the shared alias to the older shop, not the Studio's own", claimed, conflicts, got)
	}
	// Once: a claim released or moved later is not taken back at the next start.
	if _, err := f.db.MoveHostnameClaim(f.ctx, store.Actor{}, "www.shared.example.com", f.blog.ID); err != nil {
		t.Fatal(err)
	}
	if claimed, _, err := vault.BackfillHostnameClaims(f.ctx, []string{"studio.example.com"}); err != nil || claimed != 0 {
		t.Fatalf("second backfill: %d claimed, %v", claimed, err)
	}
	if got := f.holders()["www.shared.example.com"]; got != "blog/production" {
		t.Fatalf("the second backfill changed the moved claim: held by %s", got)
	}
}
