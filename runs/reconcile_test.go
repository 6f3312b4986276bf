package runs_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// silentEdges are loopback addresses whose edge port accepts connections
// and never answers, and counts the connections.
type silentEdges struct {
	addrs []string
	mu    sync.Mutex
	total int
}

// startSilent listens on port at n addresses 127.1.x.y (all loopback) and
// accepts every connection without ever answering.
func startSilent(t *testing.T, port, n int) *silentEdges {
	t.Helper()
	s := &silentEdges{}
	for i := range n {
		addr := fmt.Sprintf("127.1.%d.%d", i/250, i%250+1)
		l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		s.addrs = append(s.addrs, addr)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				s.mu.Lock()
				s.total++
				s.mu.Unlock()
				go func() {
					// Read until the prober hangs up; never write.
					buf := make([]byte, 512)
					for {
						if _, err := c.Read(buf); err != nil {
							break
						}
					}
					c.Close()
				}()
			}
		}()
		t.Cleanup(func() { l.Close() })
	}
	return s
}

// connections returns how many connections the edges accepted.
func (s *silentEdges) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func TestAProbeOfManySilentAddressesEndsAtItsDeadline(t *testing.T) {
	// Parallel though it times the probe: twice the deadline tells a probe
	// that stops at its deadline from one that asks every address (a
	// minute, eight at a time), whatever the machine's speed.
	t.Parallel()
	f := newFixture(t, plainManifest, nil)
	silent := startSilent(t, f.local.Prober.EdgePort, 240)
	f.resolver.Set("silent.test", append([]string{here}, silent.addrs...)...)

	// Each address waits 2 s (the fixture's timeout): one after another,
	// the 240 would take 8 minutes.
	began := time.Now()
	res := f.local.Probe(f.ctx, "silent.test")
	took := time.Since(began)
	t.Logf("the probe took %v", took)
	if took > 2*runs.DefaultProbeDeadline {
		t.Errorf("the probe took %v, want about its deadline of %v", took, runs.DefaultProbeDeadline)
	}
	if len(res.Addresses) != 241 {
		t.Fatalf("the result lists %d addresses, want all 241 resolved", len(res.Addresses))
	}
	if a := res.Addresses[0]; a.Address != here || a.Answer != runs.AnsweredHere {
		t.Errorf("first address %+v, want %s answered as this installation", a, here)
	}
	notAsked := 0
	for _, a := range res.Addresses[1:] {
		switch a.Answer {
		case runs.NotAsked:
			notAsked++
		case runs.NoAnswerTimeout:
		default:
			t.Errorf("silent address %s answered %q", a.Address, a.Answer)
		}
	}
	if notAsked == 0 || notAsked != res.NotAsked {
		t.Errorf("%d addresses listed as not asked, NotAsked = %d; want the deadline to leave some unasked", notAsked, res.NotAsked)
	}
	if res.Verdict != runs.PointsPartial {
		t.Errorf("verdict %q, want partial: one address answers here, the rest do not", res.Verdict)
	}
	// Each ask lasts the 2 s timeout, so the deadline leaves room for 5
	// rounds: one address at a time would ask 5, eight at a time 40.
	rounds := int(runs.DefaultProbeDeadline / (2 * time.Second))
	if total := silent.connections(); total != 240-notAsked || total <= 2*rounds || total > 8*(rounds+1) {
		t.Errorf("%d silent addresses were asked (%d listed as asked), want several at once and at most 8 at a time", total, 240-notAsked)
	}
}

// deadlineProbe is a platform whose probes last until their context ends
// (the reconcile's deadline), and then say what the platform's probe says
// of the domain at once; it records the domains it was asked to probe.
type deadlineProbe struct {
	platform.Platform
	mu     sync.Mutex
	probed []string
}

func (p *deadlineProbe) Probe(ctx context.Context, domain string) platform.ProbeResult {
	p.mu.Lock()
	p.probed = append(p.probed, domain)
	p.mu.Unlock()
	<-ctx.Done()
	return p.Platform.Probe(ctx, domain)
}

func (p *deadlineProbe) Unwrap() platform.Platform { return p.Platform }

// asked returns the domains probed since the last call, and forgets them.
func (p *deadlineProbe) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.probed
	p.probed = nil
	return out
}

func TestAReconcileStopsProbingAtItsDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", nobody)
	f.resolver.Set("www.wiki.test", nobody)
	f.execute(f.deploy(runs.DeployRequest{}).ID)
	silent := startSilent(t, f.local.Prober.EdgePort, 16)
	f.resolver.Set("wiki.test", silent.addrs...)
	f.resolver.Set("www.wiki.test", silent.addrs...)
	// The first domain's probe lasts until the deadline, however long
	// that is; the deadline only has to leave room for what comes before
	// the first probe (a query). When it did not, on a slow machine, the
	// check is made again with twice the deadline, up to a minute.
	probe := &deadlineProbe{Platform: f.local}
	svc := runs.NewService(f.db, f.vault, probe, f.clock.Now, nil)
	var results []runs.CheckResult
	var asked []string
	for deadline := time.Second; ; deadline *= 2 {
		svc.ReconcileDeadline = deadline
		var err error
		if results, err = svc.CheckNow(f.ctx, store.Actor{}, f.reloadEnv(), ""); err != nil {
			t.Fatal(err)
		}
		if asked = probe.asked(); len(asked) > 0 || deadline >= time.Minute {
			break
		}
		t.Logf("the deadline of %v passed before the first domain's turn: %+v; again with %v", deadline, results, 2*deadline)
	}
	if len(results) != 2 {
		t.Fatalf("results %+v, want both domains", results)
	}
	// Domains are checked in order: the first used the whole deadline,
	// the second was never probed.
	if len(asked) != 1 || asked[0] != "wiki.test" {
		t.Errorf("probed %v, want wiki.test only", asked)
	}
	if r := results[0]; r.Domain != "wiki.test" || r.NotProbed || r.Verdict != runs.PointsElsewhere || r.Addresses != 16 || r.NotAsked != 16 {
		t.Errorf("first domain %+v, want wiki.test probed until the deadline, its 16 addresses left unasked", r)
	}
	if r := results[1]; r.Domain != "www.wiki.test" || !r.NotProbed {
		t.Errorf("second domain %+v, want www.wiki.test not probed", r)
	}
	for _, d := range []string{"wiki.test", "www.wiki.test"} {
		if c := f.certificate(d); c.State != store.CertDeferred {
			t.Errorf("%s is %s after the check, want still deferred", d, c.State)
		}
	}
}

// TestOneEnvironmentsReconcilesLeaveDeploysTheirWorkers: two environments
// whose domains resolve to 240 silent addresses are reconciled again and
// again while another project deploys, on a process with a single worker
// for runs and one for reconciles.
func TestOneEnvironmentsReconcilesLeaveDeploysTheirWorkers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", nobody)
	f.resolver.Set("www.wiki.test", nobody)
	f.execute(f.deploy(runs.DeployRequest{}).ID)
	first := f.reloadEnv()
	second, err := f.db.CreateEnvironment(f.ctx, store.Actor{}, f.project.ID, "staging")
	if err != nil {
		t.Fatal(err)
	}
	f.env = second
	f.setValue("APP_DOMAIN", "staging.wiki.test")
	f.setValue("SESSION_SECRET", "another-secret")
	f.resolver.Set("staging.wiki.test", nobody)
	f.resolver.Set("www.staging.wiki.test", nobody)
	f.execute(f.deploy(runs.DeployRequest{}).ID)
	silent := startSilent(t, f.local.Prober.EdgePort, 240)
	domains := map[string]*store.Environment{"wiki.test": first, "www.wiki.test": first, "staging.wiki.test": second, "www.staging.wiki.test": second}
	for d, env := range domains {
		if c, err := f.db.CertificateFor(f.ctx, env.ID, d); err != nil || c.State != store.CertDeferred {
			t.Fatalf("%s: %+v %v, want deferred", d, c, err)
		}
		f.resolver.Set(d, silent.addrs...)
	}
	f.local.Prober.Deadline = 6 * time.Second

	f.db.Now = time.Now
	svc := runs.NewService(f.db, f.vault, f.local, time.Now, nil)
	if err := svc.StartRiver(context.Background(), runs.RiverOptions{PollInterval: 50 * time.Millisecond, ReconcileInterval: -1,
		Workers: 1, ReconcileWorkers: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		svc.StopRiver(ctx)
	})

	type jobCounts struct{ unfinished, running, queueRunning int }
	counts := func(envID int64) jobCounts {
		t.Helper()
		var c jobCounts
		if err := f.db.Pool.QueryRow(f.ctx, `SELECT
			count(*) FILTER (WHERE kind = 'studio_reconcile_environment' AND (args->>'environment_id')::bigint = $1 AND finalized_at IS NULL),
			count(*) FILTER (WHERE kind = 'studio_reconcile_environment' AND (args->>'environment_id')::bigint = $1 AND state = 'running'),
			count(*) FILTER (WHERE queue = 'reconcile' AND state = 'running')
			FROM river_job`, envID).Scan(&c.unfinished, &c.running, &c.queueRunning); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// check asks, many times over, for a reconcile of every environment
	// and a Check now of the first, and sees at most one reconcile job per
	// environment and no more running than the queue's one worker.
	check := func() {
		t.Helper()
		for range 5 {
			if err := svc.QueueReconciles(f.ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := svc.CheckNow(f.ctx, store.Actor{}, first, ""); !errors.Is(err, runs.ErrCheckUnderWay) {
			t.Fatalf("Check now while the first environment's reconcile is queued or running: %v, want ErrCheckUnderWay", err)
		}
		for _, env := range []*store.Environment{first, second} {
			if c := counts(env.ID); c.unfinished > 1 || c.queueRunning > 1 {
				t.Fatalf("%s: %d reconcile jobs queued or running, %d running on the reconcile queue; want at most 1 of each", env.Name, c.unfinished, c.queueRunning)
			}
		}
	}

	check()
	for i := 0; counts(first.ID).running+counts(second.ID).running == 0; i++ {
		if i == 400 {
			t.Fatal("no reconcile started")
		}
		time.Sleep(25 * time.Millisecond)
	}
	check()

	// Another project deploys meanwhile.
	res := compiler.Compile([]byte(plainManifest))
	project, _, err := f.db.CreateProject(f.ctx, store.Actor{}, store.NewRevision{Name: res.Definition.Name, Source: plainManifest,
		Canonical: res.Definition.Canonical(), Hash: res.Hash})
	if err != nil {
		t.Fatal(err)
	}
	otherEnv, err := f.db.CreateEnvironment(f.ctx, store.Actor{}, project.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := svc.StartDeploy(f.ctx, store.Actor{}, otherEnv, runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		run, err := f.db.RunByID(f.ctx, deploy.ID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != store.RunPending {
			break
		}
		if i == 400 {
			t.Fatalf("the other project's deploy is still pending")
		}
		time.Sleep(25 * time.Millisecond)
	}
	// It started while the silent domains were still being probed: the
	// reconciles did not hold its worker.
	if c1, c2 := counts(first.ID), counts(second.ID); c1.running+c2.running != 1 || c1.unfinished+c2.unfinished != 2 {
		t.Errorf("when the deploy started: %+v and %+v; want one reconcile running and the other queued", c1, c2)
	}
	check()
	waitFinished(t, f.db, []int64{deploy.ID})
	if got := f.run(deploy.ID); got.Status != store.RunSucceeded {
		t.Fatalf("deploy: %s %s", got.Status, got.Reason)
	}
	if got, want := len(f.changeEvents(deploy.ID)), 3+2*len(f.checkpoints(deploy.ID)); got != want {
		t.Errorf("the deploy has %d events, want %d: nothing twice", got, want)
	}

	// Every environment was reconciled exactly once, however often it was
	// asked for, and nothing arrived from silent addresses.
	for i := 0; counts(first.ID).unfinished+counts(second.ID).unfinished > 0; i++ {
		if i == 2400 {
			t.Fatal("the reconciles did not finish")
		}
		time.Sleep(25 * time.Millisecond)
	}
	for _, env := range []*store.Environment{first, second} {
		var completed int
		if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM river_job WHERE kind = 'studio_reconcile_environment'
			AND (args->>'environment_id')::bigint = $1 AND state = 'completed'`, env.ID).Scan(&completed); err != nil {
			t.Fatal(err)
		}
		if completed != 1 {
			t.Errorf("%s was reconciled %d times, want once", env.Name, completed)
		}
		list, err := f.db.Runs(f.ctx, env.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 {
			t.Errorf("%s has %d runs, want its deploy only", env.Name, len(list))
		}
	}
}
