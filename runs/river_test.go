package runs_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// countingPlatform counts the work done per environment and can hold a
// rollout until released, to stop a process in the middle of a step.
type countingPlatform struct {
	platform.Platform
	mu       sync.Mutex
	builds   map[int64]int
	rollouts map[int64]int
	// hold, when not nil, makes Rollout wait for it (or the context).
	hold    chan struct{}
	holding chan int64
}

func newCounting(p platform.Platform) *countingPlatform {
	return &countingPlatform{Platform: p, builds: map[int64]int{}, rollouts: map[int64]int{}}
}

func (c *countingPlatform) Build(ctx context.Context, env platform.Env, app string, a *compiler.Application, out platform.Output) (string, error) {
	c.mu.Lock()
	c.builds[env.ID]++
	c.mu.Unlock()
	return c.Platform.Build(ctx, env, app, a, out)
}

func (c *countingPlatform) Rollout(ctx context.Context, env platform.Env, app string, a *compiler.Application, out platform.Output) error {
	c.mu.Lock()
	c.rollouts[env.ID]++
	hold, holding := c.hold, c.holding
	c.mu.Unlock()
	if hold != nil {
		holding <- env.ID
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.Platform.Rollout(ctx, env, app, a, out)
}

const plainManifest = `name: plain
applications:
  api:
    image: ghcr.io/acme/api:1
`

func startRiver(t *testing.T, svc *runs.Service) {
	t.Helper()
	if err := svc.StartRiver(context.Background(), runs.RiverOptions{PollInterval: 50 * time.Millisecond, ReconcileInterval: -1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		svc.StopRiver(ctx)
	})
}

// waitFinished polls until every run is finished, for up to two minutes;
// it asserts nothing about time. When they do not, it says where each
// unfinished run stands.
func waitFinished(t testing.TB, db *store.DB, ids []int64) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		var n int
		if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM runs WHERE id = ANY($1) AND finished_at IS NULL`, ids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	rows, _ := db.Pool.Query(context.Background(), `SELECT format('run %s %s (%s), lease %s until %s, job %s %s attempt %s at %s', r.id, r.status, r.reason,
		r.lease_owner, r.lease_expires_at, j.id, j.state, j.attempt, j.scheduled_at)
		FROM runs r LEFT JOIN river_job j ON j.id = r.job_id WHERE r.id = ANY($1) AND r.finished_at IS NULL ORDER BY r.id`, ids)
	seen, err := pgx.CollectRows(rows, pgx.RowTo[string])
	t.Fatalf("runs did not finish within 2 minutes: %v (%v)", seen, err)
}

func TestTwoRiverClientsExecuteEveryRunExactlyOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	counting := newCounting(f.local)
	a := runs.NewService(f.db, f.vault, counting, time.Now, nil)
	b := runs.NewService(f.db, f.vault, counting, time.Now, nil)
	f.db.Now = time.Now
	startRiver(t, a)
	startRiver(t, b)
	var ids []int64
	var envs []*store.Environment
	for i := range 100 {
		env, err := f.db.CreateEnvironment(f.ctx, store.Actor{}, f.project.ID, fmt.Sprintf("e%d", i))
		if err != nil {
			t.Fatal(err)
		}
		svc := a
		if i%2 == 1 {
			svc = b
		}
		run, err := svc.StartDeploy(f.ctx, store.Actor{}, env, runs.DeployRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID)
		envs = append(envs, env)
	}
	waitFinished(t, f.db, ids)
	// Both processes took part.
	var workers int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(DISTINCT attempted_by[1]) FROM river_job WHERE kind = 'studio_run'`).Scan(&workers); err != nil {
		t.Fatal(err)
	}
	if workers != 2 {
		t.Errorf("%d clients executed runs, want both", workers)
	}
	for i, id := range ids {
		run := f.run(id)
		if run.Status != store.RunSucceeded {
			t.Fatalf("run %d: %s %s", id, run.Status, run.Reason)
		}
		// pending, running, 2 per checkpoint, finished: nothing twice.
		cps := f.checkpoints(id)
		if got, want := len(f.changeEvents(id)), 3+2*len(cps); got != want {
			t.Fatalf("run %d has %d events, want %d", id, got, want)
		}
		if n := counting.builds[envs[i].ID]; n != 1 {
			t.Fatalf("environment %s was built %d times", envs[i].Name, n)
		}
	}
}

func TestARunStoppedMidStepResumesInAnotherProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.db.Now = time.Now
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	counting := newCounting(f.local)
	counting.hold, counting.holding = make(chan struct{}), make(chan int64, 1)
	first := runs.NewService(f.db, f.vault, counting, time.Now, nil)
	if err := first.StartRiver(context.Background(), runs.RiverOptions{PollInterval: 50 * time.Millisecond, ReconcileInterval: -1}); err != nil {
		t.Fatal(err)
	}
	run, err := first.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	<-counting.holding // the first process is inside the rollout
	// The first process goes away in the middle of the step.
	if err := first.StopAndCancelRiver(context.Background()); err != nil {
		t.Fatal(err)
	}
	cp, _ := f.checkpoint(run.ID, runs.KindRollout)
	if cp.Status != store.CheckpointRunning {
		t.Fatalf("rollout is %s after the stop", cp.Status)
	}
	counting.mu.Lock()
	counting.hold = nil
	counting.mu.Unlock()
	second := runs.NewService(f.db, f.vault, counting, time.Now, nil)
	startRiver(t, second)
	waitFinished(t, f.db, []int64{run.ID})
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("resumed run: %s %s", got.Status, got.Reason)
	}
	// Nothing finished before the stop was done again: one build, one
	// event per change of each earlier checkpoint, numbers without gaps.
	if counting.builds[f.env.ID] != 1 {
		t.Fatalf("built %d times", counting.builds[f.env.ID])
	}
	perCheckpoint := map[int]int{}
	for _, e := range f.events(run.ID) {
		if e.Checkpoint != nil {
			perCheckpoint[*e.Checkpoint]++
		}
	}
	for _, c := range f.checkpoints(run.ID) {
		if c.Kind != runs.KindRollout && perCheckpoint[c.Position] != 2 {
			t.Fatalf("%s has %d events, want 2 (running, succeeded)", c.Name, perCheckpoint[c.Position])
		}
	}
	if c := f.certificate("wiki.test"); c.Attempts != 1 {
		t.Fatalf("the certificate was requested %d times", c.Attempts)
	}
}

func (c *countingPlatform) Unwrap() platform.Platform { return c.Platform }
