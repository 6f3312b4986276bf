package runs_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
)

// otherEnvironment adds a second project (rival-wiki, the same manifest)
// with an environment production whose APP_DOMAIN is domain.
func (f *fixture) otherEnvironment(domain string) *store.Environment {
	f.t.Helper()
	return f.otherEnvironmentNamed("rival-wiki", domain)
}

// holder is who holds hostname: "project / environment", or "".
func (f *fixture) holder(hostname string) string {
	f.t.Helper()
	claims, err := f.db.HostnameClaimsOf(f.ctx, []string{hostname})
	if err != nil {
		f.t.Fatal(err)
	}
	if c, ok := claims[hostname]; ok {
		return c.Project + " / " + c.Environment
	}
	return ""
}

// installAdmin is an installation admin acting (refusals name holders to them).
var installAdmin = store.Actor{User: &store.User{Name: "Ada", IsAdmin: true}}

const takenSentence = "wiki.test is served by another environment of this installation."

func TestAPlanNamingAnotherEnvironmentsHostnameIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.finish(f.deploy(runs.DeployRequest{}))
	if got := f.holder("wiki.test"); got != "team-wiki / production" {
		t.Fatalf("wiki.test held by %q after the first deploy", got)
	}

	rival := f.otherEnvironment("wiki.test")
	dp, err := f.svc.PlanDeploy(f.ctx, rival, 0)
	if err != nil {
		t.Fatal(err)
	}
	if dp.CanStart() {
		t.Fatal("the plan may start")
	}
	// Worded for a viewer (the default): the expression, no holder.
	want := []string{
		"The hostname of web / public (${APP_DOMAIN}) is served by another environment of this installation.",
		"The alias www.${APP_DOMAIN} of web / public is served by another environment of this installation.",
	}
	if !slices.Equal(dp.Refused, want) {
		t.Fatalf("refused for a viewer:\n%s\nwant:\n%s", strings.Join(dp.Refused, "\n"), strings.Join(want, "\n"))
	}
	dp.ForReader(true, false)
	if dp.Refused[0] != takenSentence || strings.Contains(strings.Join(dp.Refused, " "), "team-wiki") {
		t.Fatalf("refused for a deployer: %q", dp.Refused)
	}
	dp.ForReader(true, true)
	if dp.Refused[0] != "wiki.test is served by another environment of this installation (held by team-wiki / production)." {
		t.Fatalf("refused for an installation admin: %q", dp.Refused[0])
	}

	// Starting it is refused too, and creates no run.
	for _, a := range []store.Actor{{}, installAdmin} {
		_, err = f.svc.StartDeploy(f.ctx, a, rival, runs.DeployRequest{})
		var refusal *runs.DeployRefusal
		if !errors.As(err, &refusal) || !strings.HasPrefix(refusal.Message, "This deploy is refused: wiki.test is served by another environment of this installation") {
			t.Fatalf("start: %v", err)
		}
		if named := strings.Contains(refusal.Message, "team-wiki / production"); named != (a.User != nil) {
			t.Fatalf("refusal %q names the holder: %v", refusal.Message, named)
		}
	}
	if runs, err := f.db.Runs(f.ctx, rival.ID, 10); err != nil || len(runs) != 0 {
		t.Fatalf("the refused deploys created runs: %d %v", len(runs), err)
	}
}

func TestTheStudiosOwnHostnameCannotBeClaimed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.svc.SetReservedHostnames([]string{"WWW.wiki.test"})
	dp, err := f.svc.PlanDeploy(f.ctx, f.env, 0)
	if err != nil {
		t.Fatal(err)
	}
	dp.ForReader(true, true)
	if !slices.Contains(dp.Refused, "www.wiki.test is this Studio's own address.") || dp.CanStart() {
		t.Fatalf("refused %q", dp.Refused)
	}
	var refusal *runs.DeployRefusal
	if _, err := f.svc.StartDeploy(f.ctx, installAdmin, f.env, runs.DeployRequest{}); !errors.As(err, &refusal) ||
		refusal.Message != "This deploy is refused: www.wiki.test is this Studio's own address." {
		t.Fatalf("start: %v", err)
	}
	if f.holder("www.wiki.test") != "" || f.holder("wiki.test") != "" {
		t.Fatal("a refused deploy claimed hostnames")
	}
}

// TestTwoRacingFirstDeploysOfOneHostnameStartOneRun starts the first
// deploys of two environments naming the same hostnames at the same time,
// again and again: each time one run starts, the other is refused.
func TestTwoRacingFirstDeploysOfOneHostnameStartOneRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	for i := range 8 {
		domain := "race" + string(rune('a'+i)) + ".test"
		f.setValue("APP_DOMAIN", domain)
		rival := f.otherEnvironmentNamed("rival"+string(rune('a'+i)), domain)
		envs := []*store.Environment{f.reloadEnv(), rival}
		errs := make([]error, 2)
		started := make([]*store.Run, 2)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for j := range envs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				started[j], errs[j] = f.svc.StartDeploy(f.ctx, store.Actor{}, envs[j], runs.DeployRequest{})
			}()
		}
		close(gate)
		wg.Wait()
		won := 0
		for j := range envs {
			var refusal *runs.DeployRefusal
			switch {
			case errs[j] == nil:
				won++
			case errors.As(errs[j], &refusal) && strings.Contains(refusal.Message, domain+" is served by another environment of this installation."):
			default:
				t.Fatalf("round %d: %v", i, errs[j])
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d deploys started, want one", i, won)
		}
		for j := range envs {
			if started[j] != nil {
				// Finish it, so the next round's deploy of f.env may start.
				f.svc.Cancel(f.ctx, store.Actor{}, envs[j], started[j].ID)
			}
		}
	}
}

// otherEnvironmentNamed is otherEnvironment with a project name of its own.
func (f *fixture) otherEnvironmentNamed(project, domain string) *store.Environment {
	f.t.Helper()
	manifest := strings.Replace(wiki("10m"), "name: team-wiki", "name: "+project, 1)
	res := compiler.Compile([]byte(manifest))
	if !res.Valid() {
		f.t.Fatalf("manifest: %v", res.Errors())
	}
	p, _, err := f.db.CreateProject(f.ctx, store.Actor{}, store.NewRevision{Name: project, Source: manifest,
		Canonical: res.Definition.Canonical(), Hash: res.Hash})
	if err != nil {
		f.t.Fatal(err)
	}
	env, err := f.db.CreateEnvironment(f.ctx, store.Actor{}, p.ID, "production")
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range map[string]string{"APP_DOMAIN": domain, "SESSION_SECRET": "another-secret-never-shown"} {
		if _, err := f.vault.SetValue(f.ctx, store.Actor{}, env, k, v); err != nil {
			f.t.Fatal(err)
		}
	}
	return env
}

// watching is the local platform with a record of the domains probed and
// issued for, and a hook called at each probe.
type watching struct {
	*local.Platform
	mu        sync.Mutex
	probed    []string
	issued    []string
	rolledOut []string
	onProbe   func(domain string)
	onRelease func()
}

func (w *watching) Release(ctx context.Context, env platform.Env, app string, a *compiler.Application, cmd *compiler.ReleaseCommand, key platform.ReleaseKey, out platform.Output) error {
	if w.onRelease != nil {
		w.onRelease()
	}
	return w.Platform.Release(ctx, env, app, a, cmd, key, out)
}

// Rollout is where a cluster writes the application's routes (HTTPRoutes
// on Kubernetes).
func (w *watching) Rollout(ctx context.Context, env platform.Env, app string, a *compiler.Application, out platform.Output) error {
	w.mu.Lock()
	w.rolledOut = append(w.rolledOut, app)
	w.mu.Unlock()
	return w.Platform.Rollout(ctx, env, app, a, out)
}

func (w *watching) Probe(ctx context.Context, domain string) platform.ProbeResult {
	w.mu.Lock()
	w.probed = append(w.probed, domain)
	hook := w.onProbe
	w.mu.Unlock()
	if hook != nil {
		hook(domain)
	}
	return w.Platform.Probe(ctx, domain)
}

func (w *watching) Issue(ctx context.Context, env platform.Env, domain string, now time.Time, out platform.Output) (*platform.IssuedCertificate, platform.Issuance, error) {
	w.mu.Lock()
	w.issued = append(w.issued, domain)
	w.mu.Unlock()
	return w.Platform.Issue(ctx, env, domain, now, out)
}

func (w *watching) touched(domain string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.probed, domain) || slices.Contains(w.issued, domain)
}

// watch makes the fixture's service run on a watching platform.
func (f *fixture) watch() *watching {
	w := &watching{Platform: f.local}
	f.svc = runs.NewService(f.db, f.vault, w, f.clock.Now, nil)
	return w
}

func TestARunRefusesAHostnameStepForAClaimMovedAwayMidRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	w := f.watch()
	rival := f.otherEnvironment("rival.test")
	run := f.deploy(runs.DeployRequest{})
	// An installation admin moves the alias away while the run issues the
	// route's certificate.
	w.onProbe = func(domain string) {
		if domain == "wiki.test" {
			if _, err := f.db.MoveHostnameClaim(f.ctx, store.Actor{}, "www.wiki.test", rival.ID); err != nil {
				t.Error(err)
			}
		}
	}
	f.execute(run.ID)
	got := f.run(run.ID)
	if got.Status != store.RunFailed || got.Reason != "www.wiki.test is served by another environment of this installation." {
		t.Fatalf("run %s (%s), want failed on www.wiki.test", got.Status, got.Reason)
	}
	if w.touched("www.wiki.test") {
		t.Fatal("the platform was asked to probe or issue www.wiki.test")
	}
	if !slices.Contains(w.issued, "wiki.test") {
		t.Fatal("wiki.test, which the environment holds, was not issued")
	}
	if env := f.reloadEnv(); env.ActiveRevisionID != nil {
		t.Fatal("the failed deploy activated its revision")
	}
	// A failed deploy keeps what it claimed.
	if f.holder("wiki.test") != "team-wiki / production" {
		t.Fatalf("wiki.test held by %q after the failed deploy", f.holder("wiki.test"))
	}
}

func TestARunRefusesHostnamesItsValuesChangedToSinceItWasCreated(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	w := f.watch()
	rival := f.otherEnvironment("rival.test")
	if _, err := f.db.CreateRun(f.ctx, store.Actor{}, rival, store.NewRun{EnvironmentID: rival.ID, Kind: "deploy", ClaimHostnames: []string{"rival.test"}}); err != nil {
		t.Fatal(err)
	}
	run := f.deploy(runs.DeployRequest{})
	f.setValue("APP_DOMAIN", "rival.test") // after the run was created: the run deploys it
	f.execute(run.ID)
	got := f.run(run.ID)
	cp, _ := f.checkpoint(run.ID, runs.KindCheckValues)
	if got.Status != store.RunFailed || got.Reason != "rival.test is served by another environment of this installation." || cp.Status != store.CheckpointFailed {
		t.Fatalf("run %s (%s), check values %s; want failed at check values on rival.test", got.Status, got.Reason, cp.Status)
	}
	if w.touched("rival.test") || w.touched("www.rival.test") {
		t.Fatal("the platform was asked about a hostname another environment holds")
	}
	if f.holder("www.rival.test") != "" {
		t.Fatalf("the refused run claimed www.rival.test for %s", f.holder("www.rival.test"))
	}
}

func TestTheReconcilerAndCheckNowSkipHostnamesTheEnvironmentDoesNotHold(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	w := f.watch()
	f.resolver.Set("wiki.test", nobody)
	f.resolver.Set("www.wiki.test", nobody)
	run := f.deploy(runs.DeployRequest{}) // both deferred
	f.execute(run.ID)
	if got := f.run(run.ID); got.Status != store.RunSucceededWithWarnings {
		t.Fatalf("first deploy %s (%s), want succeeded with warnings", got.Status, got.Reason)
	}
	rival := f.otherEnvironment("rival.test")
	// Another environment holds wiki.test while this one keeps its deferred
	// certificate (as the backfill leaves an environment whose hostname an
	// older one served too; a move drops the certificate itself).
	if _, err := f.db.Pool.Exec(f.ctx, `UPDATE hostname_claims SET environment_id = $1 WHERE hostname = 'wiki.test'`, rival.ID); err != nil {
		t.Fatal(err)
	}
	if c := f.certificate("wiki.test"); c.State != store.CertDeferred {
		t.Fatalf("wiki.test's certificate is %s, want deferred", c.State)
	}
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	w.mu.Lock()
	w.probed, w.issued = nil, nil
	w.mu.Unlock()
	if err := f.svc.Reconcile(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ExecuteUnfinished(f.ctx); err != nil {
		t.Fatal(err)
	}
	if w.touched("wiki.test") {
		t.Fatal("the reconciler probed or issued wiki.test, which the environment no longer holds")
	}
	if !slices.Contains(w.issued, "www.wiki.test") {
		t.Fatalf("the reconciler did not issue www.wiki.test, which the environment holds (probed %v)", w.probed)
	}
	_, err := f.svc.CheckNow(f.ctx, store.Actor{}, f.reloadEnv(), "wiki.test")
	if err == nil || !strings.Contains(err.Error(), takenSentence) {
		t.Fatalf("Check now of wiki.test: %v", err)
	}
	if w.touched("wiki.test") {
		t.Fatal("Check now probed wiki.test")
	}
}

func TestASuccessfulDeployHoldsExactlyTheHostnamesItRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	for _, d := range []string{"wiki.test", "www.wiki.test", "wiki2.test", "www.wiki2.test"} {
		f.resolver.Set(d, here)
	}
	f.finish(f.deploy(runs.DeployRequest{}))
	f.setValue("APP_DOMAIN", "wiki2.test")
	run := f.deploy(runs.DeployRequest{})
	// A deploy that has not activated yet holds both, the old and the new.
	if f.holder("wiki.test") == "" || f.holder("wiki2.test") == "" {
		t.Fatalf("before activation: wiki.test %q, wiki2.test %q", f.holder("wiki.test"), f.holder("wiki2.test"))
	}
	f.finish(run)
	held, err := f.db.HeldHostnames(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 || !held["wiki2.test"] || !held["www.wiki2.test"] {
		t.Fatalf("held %v, want wiki2.test and www.wiki2.test", held)
	}
	// The released hostname is another environment's to deploy now.
	rival := f.otherEnvironment("wiki.test")
	dp, err := f.svc.PlanDeploy(f.ctx, rival, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !dp.CanStart() {
		t.Fatalf("the released hostname is still refused: %q", dp.Refused)
	}
}

// TestARolloutIsRefusedForARouteWhoseHostnameWasMovedAway: a route without
// TLS has no certificate step; the rollout that would write its routes is
// refused before the platform is called.
func TestARolloutIsRefusedForARouteWhoseHostnameWasMovedAway(t *testing.T) {
	t.Parallel()
	manifest := strings.Replace(wiki("10m"), `aliases: ["www.${APP_DOMAIN}"]`, `aliases: ["www.${APP_DOMAIN}"]`+"\n        tls: disabled", 1)
	f := newFixture(t, manifest, wikiValues)
	w := f.watch()
	rival := f.otherEnvironment("rival.test")
	run := f.deploy(runs.DeployRequest{})
	for _, cp := range f.checkpoints(run.ID) {
		if cp.Kind == runs.KindIssueTLS {
			t.Fatalf("the route without TLS has a certificate step: %s", cp.Name)
		}
	}
	w.onRelease = func() {
		if _, err := f.db.MoveHostnameClaim(f.ctx, store.Actor{}, "www.wiki.test", rival.ID); err != nil {
			t.Error(err)
		}
	}
	f.execute(run.ID)
	got := f.run(run.ID)
	cp, _ := f.checkpoint(run.ID, runs.KindRollout)
	if got.Status != store.RunFailed || got.Reason != "www.wiki.test is served by another environment of this installation." || cp.Status != store.CheckpointFailed {
		t.Fatalf("run %s (%s), rollout %s; want the rollout refused on www.wiki.test", got.Status, got.Reason, cp.Status)
	}
	if len(w.rolledOut) != 0 {
		t.Fatalf("the platform rolled out %v", w.rolledOut)
	}
}
