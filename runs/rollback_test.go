package runs_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
)

// finish executes a run to its end and fails the test unless it succeeded.
func (f *fixture) finish(run *store.Run) {
	f.t.Helper()
	if res := f.execute(run.ID); !res.Finished {
		f.t.Fatalf("run %d waits until %v", run.ID, res.WaitUntil)
	}
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		f.t.Fatalf("run %d: status %s (%s), want succeeded", run.ID, got.Status, got.Reason)
	}
}

// received says whether the local platform was last handed value for
// name in the environment, without ever printing a value.
func (f *fixture) received(name, value string) bool {
	got, ok := f.local.ReceivedValues(f.env.ID)[name]
	return ok && got == value
}

func TestRollbackDeploysTheReleaseRevisionWithItsValueVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": "first-secret-v1"})
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	first := f.deploy(runs.DeployRequest{})
	f.finish(first)
	if !f.received("SESSION_SECRET", "first-secret-v1") || !f.received("APP_DOMAIN", "wiki.test") {
		t.Fatal("the first deploy did not hand the platform SESSION_SECRET v1 and APP_DOMAIN v1")
	}

	// SESSION_SECRET changes twice; revision 2 drops the bucket.
	f.setValue("SESSION_SECRET", "second-secret-v2")
	f.setValue("SESSION_SECRET", "third-secret-v3")
	changes, err := f.svc.ValueChangesSinceActive(f.ctx, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Name != "SESSION_SECRET" || changes[0].Action != "changed" || changes[0].From != 1 || changes[0].To != 3 {
		t.Fatalf("changes since the active deploy = %+v, want SESSION_SECRET v1 → v3", changes)
	}
	plan, err := f.svc.PlanDeploy(f.ctx, f.reloadEnv(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Changes) != 0 || len(plan.ValueChanges) != 1 {
		t.Fatalf("a redeploy plan after a value change: %d service changes, value changes %+v; want the value change listed", len(plan.Changes), plan.ValueChanges)
	}
	rev2 := strings.Replace(wiki("10m"), "buckets:\n  attachments:\n    quotas:\n      storage: 50GB\n", "", 1)
	f.addRevision(strings.Replace(rev2, "      S3_BUCKET: \"{{buckets.attachments.name}}\"\n", "", 1))
	second := f.deploy(runs.DeployRequest{Confirm: "production"})
	f.finish(second)
	if !f.received("SESSION_SECRET", "third-secret-v3") {
		t.Fatal("the second deploy did not hand the platform SESSION_SECRET v3")
	}

	dp, err := f.svc.PlanRollback(f.ctx, f.reloadEnv(), first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !dp.Rollback || dp.To.Number != 1 || dp.Release == nil || !dp.Release.Recorded {
		t.Fatalf("rollback plan: rollback %v to revision %d release %+v", dp.Rollback, dp.To.Number, dp.Release)
	}
	i := slices.IndexFunc(dp.Release.Values, func(v runs.ReleaseValue) bool { return v.Name == "SESSION_SECRET" })
	if i < 0 || dp.Release.Values[i].Now != 3 || dp.Release.Values[i].Then != 1 || !dp.Release.Values[i].Kept {
		t.Fatalf("release values %+v, want SESSION_SECRET v3 → v1, kept", dp.Release.Values)
	}
	if !slices.Equal(dp.Release.ComeBackEmpty, []string{"bucket attachments"}) {
		t.Fatalf("come back empty: %q, want the removed bucket", dp.Release.ComeBackEmpty)
	}
	if !slices.Equal(dp.Release.ReleaseCommandsSince, []string{"web in revision 2"}) {
		t.Fatalf("release commands since: %q", dp.Release.ReleaseCommandsSince)
	}
	if !dp.CanStart() {
		t.Fatalf("the rollback cannot start: refused %q, missing %q", dp.Refused, dp.MissingValues)
	}

	back := f.deploy(runs.DeployRequest{Release: first.ID})
	if back.ReleaseOf == nil || *back.ReleaseOf != first.ID {
		t.Fatalf("rollback run release_of %v, want %d", back.ReleaseOf, first.ID)
	}
	f.finish(back)
	if !f.received("SESSION_SECRET", "first-secret-v1") {
		t.Fatal("the rollback did not hand the platform SESSION_SECRET v1: it must bring back the release's value versions")
	}
	if env := f.reloadEnv(); env.ActiveRevisionID == nil || *env.ActiveRevisionID != *first.RevisionID {
		t.Fatalf("active revision %v, want revision 1's id %d", env.ActiveRevisionID, *first.RevisionID)
	}
	// The stored values stay as they were: what runs now differs from them.
	stored, err := f.db.StoredValues(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range stored {
		if v.Name == "SESSION_SECRET" && v.Version != 3 {
			t.Fatalf("stored SESSION_SECRET is v%d after the rollback, want v3 untouched", v.Version)
		}
	}
	changes, err = f.svc.ValueChangesSinceActive(f.ctx, f.reloadEnv())
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].From != 1 || changes[0].To != 3 {
		t.Fatalf("after the rollback, changes = %+v, want SESSION_SECRET v1 → v3 pending", changes)
	}
	// A plain deploy afterwards uses the current versions again.
	again := f.deploy(runs.DeployRequest{Revision: 1, Redeploy: true})
	f.finish(again)
	if !f.received("SESSION_SECRET", "third-secret-v3") {
		t.Fatal("a deploy after the rollback did not hand the platform the current SESSION_SECRET v3")
	}
}

func TestRollbackIsRefusedWhenAValueVersionIsPastRetention(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": "secret-1"})
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	first := f.deploy(runs.DeployRequest{})
	f.finish(first)
	for _, v := range []string{"secret-2", "secret-3", "secret-4", "secret-5", "secret-6", "secret-7"} {
		f.setValue("SESSION_SECRET", v)
	}
	// Within the retention nothing is pruned, however many versions.
	if n, err := f.db.PruneValueVersions(f.ctx, 24*time.Hour, time.Now()); err != nil || n != 0 {
		t.Fatalf("prune within the retention deleted %d (%v), want 0", n, err)
	}
	dp, err := f.svc.PlanRollback(f.ctx, f.reloadEnv(), first.ID)
	if err != nil || !dp.CanStart() {
		t.Fatalf("rollback within the retention: %v, refused %q", err, dp.Refused)
	}
	// Past it, the five newest earlier versions (v2 to v6) stay; v1 goes.
	n, err := f.db.PruneValueVersions(f.ctx, 24*time.Hour, time.Now().Add(48*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("prune past the retention deleted %d (%v), want 1 (v1)", n, err)
	}
	earlier, err := f.db.EarlierValueVersions(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kept []int
	for _, v := range earlier["SESSION_SECRET"] {
		kept = append(kept, v.Version)
	}
	if !slices.Equal(kept, []int{6, 5, 4, 3, 2}) {
		t.Fatalf("kept earlier versions %v, want [6 5 4 3 2]", kept)
	}
	dp, err = f.svc.PlanRollback(f.ctx, f.reloadEnv(), first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if dp.CanStart() || len(dp.Refused) == 0 || !strings.Contains(dp.Refused[len(dp.Refused)-1], "SESSION_SECRET v1 is no longer kept") {
		t.Fatalf("rollback past the retention: refused %q, want SESSION_SECRET v1 named", dp.Refused)
	}
	_, err = f.svc.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), runs.DeployRequest{Release: first.ID})
	var refusal *runs.DeployRefusal
	if !errors.As(err, &refusal) {
		t.Fatalf("start rollback past the retention: %v, want a refusal", err)
	}
}

func TestRollbackTargetMustBeASuccessfulDeployOfTheEnvironment(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": "secret-1"})
	f.faults.Set(func(fl *local.Faults) { fl.Build = map[string]string{"web": "compiler exploded"} })
	failed := f.deploy(runs.DeployRequest{})
	f.execute(failed.ID)
	if _, err := f.svc.PlanRollback(f.ctx, f.reloadEnv(), failed.ID); err == nil {
		t.Fatal("a failed deploy was accepted as a release to roll back to")
	}
	if _, err := f.svc.PlanRollback(f.ctx, f.reloadEnv(), 999999); err == nil {
		t.Fatal("an unknown run was accepted as a release to roll back to")
	}
}
