package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/store"
)

// ReconcileDeadline is how long one environment's reconcile may probe
// (unless Service.ReconcileDeadline says otherwise): each domain takes at
// most its probe's deadline (10 s), and the domains not probed by then
// wait for the environment's next reconcile.
const ReconcileDeadline = time.Minute

// ReconcileEnvironmentArgs is the River job that re-probes one
// environment's deferred and failed domains. It is unique by environment:
// at most one per environment is queued or running, however often the
// periodic reconcile or Check now asks for one.
type ReconcileEnvironmentArgs struct {
	EnvironmentID int64 `json:"environment_id" river:"unique"`
	// Force is Check now: certificates in backoff are probed too.
	Force bool `json:"force,omitempty"`
	// Domain limits a Check now to one domain.
	Domain string `json:"domain,omitempty"`
	// UserID and RequestID are who asked for a Check now: the runs it
	// creates name them.
	UserID    *int64 `json:"user_id,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// Kind implements river.JobArgs.
func (ReconcileEnvironmentArgs) Kind() string { return "studio_reconcile_environment" }

type reconcileEnvironmentWorker struct {
	river.WorkerDefaults[ReconcileEnvironmentArgs]
	service *Service
}

// Timeout lets River cancel a reconcile that somehow outlives its own
// deadline, so its slot in the reconcile queue comes back.
func (w *reconcileEnvironmentWorker) Timeout(*river.Job[ReconcileEnvironmentArgs]) time.Duration {
	return w.service.reconcileDeadline() + time.Minute
}

func (w *reconcileEnvironmentWorker) Work(ctx context.Context, job *river.Job[ReconcileEnvironmentArgs]) error {
	a := store.Actor{RequestID: job.Args.RequestID}
	if job.Args.UserID != nil {
		u, err := w.service.DB.UserByID(ctx, *job.Args.UserID)
		if err != nil && apperr.CodeOf(err) != apperr.NotFound {
			return err
		}
		a.User = u
	}
	results, err := w.service.reconcileEnvironment(ctx, a, job.Args)
	if apperr.CodeOf(err) == apperr.NotFound {
		return nil // the environment was deleted meanwhile
	}
	if err != nil {
		return err
	}
	out := make([]checkOutput, len(results))
	for i, r := range results {
		out[i] = checkOutput{Domain: r.Domain, Verdict: r.Verdict, NotProbed: r.NotProbed, Addresses: r.Addresses, NotAsked: r.NotAsked}
		if r.Run != nil {
			out[i].RunID = r.Run.ID
		}
	}
	return river.RecordOutput(ctx, out)
}

// checkOutput is one CheckResult as the job records it for Check now.
type checkOutput struct {
	Domain    string `json:"domain"`
	Verdict   string `json:"verdict,omitempty"`
	NotProbed bool   `json:"not_probed,omitempty"`
	Addresses int    `json:"addresses,omitempty"`
	NotAsked  int    `json:"not_asked,omitempty"`
	RunID     int64  `json:"run_id,omitempty"`
}

// reconcileInsertOpts puts an environment's reconcile on the reconcile
// queue, once: a second one while the first is queued or running is not
// inserted (completed ones do not count, so the next interval inserts
// again).
func reconcileInsertOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: QueueReconcile, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled}}}
}

// due reports whether the reconciler probes c now: a deferred domain
// always, a failed one once its retry and any CA rate limit are due.
func due(c store.Certificate, now time.Time) bool {
	switch {
	case c.State == store.CertIssued:
		return false
	case c.State != store.CertFailed:
		return true
	case c.NextRetryAt != nil && c.NextRetryAt.After(now):
		return false
	case c.RateLimitedUntil != nil && c.RateLimitedUntil.After(now):
		return false
	}
	return true
}

// QueueReconciles inserts a reconcile job for every environment with a
// deferred domain or a failed one due for a retry, on the reconcile queue
// whose own worker count bounds them all; an environment that already has
// one queued or running gets no second one. This is what the periodic
// reconcile does.
func (s *Service) QueueReconciles(ctx context.Context) error {
	if s.river == nil {
		return errors.New("runs: queue reconciles: River is not running")
	}
	certs, err := s.DB.UnissuedCertificates(ctx)
	if err != nil {
		return err
	}
	now := s.Now()
	queued := map[int64]bool{}
	for _, c := range certs {
		if queued[c.EnvironmentID] || !due(c, now) {
			continue
		}
		queued[c.EnvironmentID] = true
		if _, err := s.river.Insert(ctx, ReconcileEnvironmentArgs{EnvironmentID: c.EnvironmentID}, reconcileInsertOpts()); err != nil {
			return fmt.Errorf("runs: queue reconcile: %w", err)
		}
	}
	return nil
}

// Reconcile re-probes every deferred domain, and every failed one whose
// retry is due, now, one environment after another, each within its
// deadline (tests, and a Studio without River). A domain that arrived is
// recorded as a reconcile run and its issuance requested at once as a
// second reconcile run, which records the outcome.
func (s *Service) Reconcile(ctx context.Context) error {
	certs, err := s.DB.UnissuedCertificates(ctx)
	if err != nil {
		return err
	}
	now := s.Now()
	done := map[int64]bool{}
	for _, c := range certs {
		if done[c.EnvironmentID] || !due(c, now) {
			continue
		}
		done[c.EnvironmentID] = true
		if _, err := s.reconcileEnvironment(ctx, store.Actor{}, ReconcileEnvironmentArgs{EnvironmentID: c.EnvironmentID}); err != nil &&
			apperr.CodeOf(err) != apperr.NotFound {
			return err
		}
	}
	return nil
}

func (s *Service) reconcileDeadline() time.Duration {
	if s.ReconcileDeadline > 0 {
		return s.ReconcileDeadline
	}
	return ReconcileDeadline
}

// reconcileEnvironment probes the environment's deferred and failed
// domains that are due (with Force, every one; with Domain, that one) one
// after another until the reconcile's deadline; the rest are listed as
// not probed. Each domain that answers here is recorded as arrived and
// its issuance requested, unless a reconcile of it is under way.
func (s *Service) reconcileEnvironment(ctx context.Context, a store.Actor, args ReconcileEnvironmentArgs) ([]CheckResult, error) {
	env, err := s.DB.EnvironmentByID(ctx, args.EnvironmentID)
	if err != nil {
		return nil, err
	}
	if env.State == store.EnvironmentDeleting {
		return nil, nil // its domains go with it
	}
	certs, err := s.DB.Certificates(ctx, env.ID)
	if err != nil {
		return nil, err
	}
	// A domain the environment does not hold is never probed or issued
	// for it (its claim was moved to another environment).
	held, err := s.DB.HeldHostnames(ctx, env.ID)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	var todo []store.Certificate
	for _, c := range certs {
		if !held[c.Domain] {
			continue
		}
		if c.State != store.CertIssued && (args.Domain == "" || c.Domain == args.Domain) && (args.Force || due(c, now)) {
			todo = append(todo, c)
		}
	}
	if !args.Force {
		// Domains left unprobed at the deadline get their turn in a later
		// reconcile rather than always the same ones.
		rand.Shuffle(len(todo), func(i, j int) { todo[i], todo[j] = todo[j], todo[i] })
	}
	// Only the probes are bounded: recording a domain that answered
	// happens whatever the time.
	probeCtx, cancel := context.WithTimeout(ctx, s.reconcileDeadline())
	defer cancel()
	var out []CheckResult
	notProbed := 0
	for _, c := range todo {
		if probeCtx.Err() != nil {
			out = append(out, CheckResult{Domain: c.Domain, NotProbed: true})
			notProbed++
			continue
		}
		busy, err := s.DB.UnfinishedReconcile(ctx, env.ID, c.Domain)
		if err != nil {
			return nil, err
		}
		if !args.Force {
			if !busy && c.State == store.CertFailed {
				// A deploy waiting on this certificate retries it itself.
				if busy, err = s.DB.HasUnfinishedDeploy(ctx, env.ID); err != nil {
					return nil, err
				}
			}
			if busy {
				continue
			}
		}
		probe := s.Platform.Probe(probeCtx, c.Domain)
		if probe.Verdict != PointsHere {
			// The pages count the next automatic check from this probe.
			recorded, err := json.Marshal(probe)
			if err != nil {
				return nil, err
			}
			if err := s.DB.MarkProbed(ctx, env.ID, c.Domain, s.Now(), recorded); err != nil {
				return nil, err
			}
		}
		res := CheckResult{Domain: c.Domain, Verdict: probe.Verdict, Addresses: len(probe.Addresses), NotAsked: probe.NotAsked}
		if probe.Verdict == PointsHere && !busy {
			if res.Run, err = s.arrive(ctx, a, env, c, probe, args.Force); err != nil {
				return nil, fmt.Errorf("runs: reconcile: %w", err)
			}
		}
		out = append(out, res)
	}
	if notProbed > 0 {
		s.Logger.Info("reconcile: deadline passed; the next reconcile probes the rest", "environment", env.ID,
			"deadline", s.reconcileDeadline(), "not_probed", notProbed)
	}
	return out, nil
}

// arrive records a domain that answers here and requests its issuance:
// for a deferred domain an arrival run and an issuance run, for a failed
// one the issuance run only. It returns the issuance run. Check now (force)
// makes one run of both: one click, one run, its first checkpoint the
// arrival the person asked about.
func (s *Service) arrive(ctx context.Context, a store.Actor, env *store.Environment, c store.Certificate, probe ProbeResult, force bool) (*store.Run, error) {
	issue := store.NewCheckpoint{Kind: KindIssueTLS, Name: "Issue TLS certificate · " + c.Route, Detail: CheckpointDetail{
		TLS: &TLSDetail{Route: c.Route, Expression: c.Domain, Domain: c.Domain, Policy: "automatic"}}}
	if c.State == store.CertDeferred && force {
		return s.DB.CreateRun(ctx, a, env, store.NewRun{
			EnvironmentID: env.ID, Kind: store.RunReconcile,
			Checkpoints: []store.NewCheckpoint{{Kind: KindProbe, Name: "Domain arrived · " + c.Domain, Detail: CheckpointDetail{Probe: &probe}}, issue},
			Detail:      RunDetail{Domain: c.Domain, Force: force},
			Enqueue:     s.enqueueKind("reconcile"),
		})
	}
	if c.State == store.CertDeferred {
		_, err := s.DB.CreateRun(ctx, a, env, store.NewRun{
			EnvironmentID: env.ID, Kind: store.RunReconcile,
			Checkpoints: []store.NewCheckpoint{{Kind: KindProbe, Name: "Domain arrived · " + c.Domain, Detail: CheckpointDetail{Probe: &probe}}},
			Detail:      RunDetail{Domain: c.Domain + " (arrival)"},
			Enqueue:     s.enqueueKind("reconcile"),
		})
		if err != nil {
			return nil, err
		}
	}
	return s.DB.CreateRun(ctx, a, env, store.NewRun{
		EnvironmentID: env.ID, Kind: store.RunReconcile,
		Checkpoints: []store.NewCheckpoint{issue},
		Detail:      RunDetail{Domain: c.Domain, Force: force},
		Enqueue:     s.enqueueKind("reconcile"),
	})
}

// CheckResult is what Check now found for one domain.
type CheckResult struct {
	Domain  string
	Verdict string
	// NotProbed: the check's deadline passed before this domain's turn.
	NotProbed bool
	// Addresses is how many addresses the domain resolved to; NotAsked how
	// many of them the probe's deadline left unasked.
	Addresses, NotAsked int
	// Run is the issuance run requested for a domain that answers here.
	Run *store.Run
}

// CheckWait is how long Check now waits for its check to finish before it
// answers that the check goes on (ErrCheckStillRunning).
const CheckWait = 15 * time.Second

// ErrCheckUnderWay is Check now's answer while a check or reconcile of the
// environment is already queued or running: no second one is added.
var ErrCheckUnderWay = errors.New("runs: a check of the environment's domains is already under way")

// ErrCheckStillRunning is Check now's answer when its check did not finish
// within CheckWait; it goes on, and creates its runs when it finishes.
var ErrCheckStillRunning = errors.New("runs: the check of the environment's domains is still running")

// CheckNow probes the environment's deferred and failed domains (or only
// domain) at once. A domain that answers here counts as arrived, and its
// issuance is requested at once, also for a certificate in backoff (a CA's
// rate limit still holds). With River the check is the environment's
// reconcile job, on the reconcile queue and unique per environment, and
// CheckNow waits up to CheckWait for its results.
func (s *Service) CheckNow(ctx context.Context, a store.Actor, env *store.Environment, domain string) ([]CheckResult, error) {
	certs, err := s.DB.Certificates(ctx, env.ID)
	if err != nil {
		return nil, err
	}
	held, err := s.DB.HeldHostnames(ctx, env.ID)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range certs {
		if c.State != store.CertIssued && (domain == "" || c.Domain == domain) && held[c.Domain] {
			names = append(names, c.Domain)
		}
	}
	if domain != "" && len(names) == 0 && !held[domain] && slices.ContainsFunc(certs, func(c store.Certificate) bool { return c.Domain == domain }) {
		return nil, apperr.Errorf(apperr.Invalid, "%s is served by another environment of this installation.", domain)
	}
	if domain != "" && len(names) == 0 {
		return nil, apperr.Errorf(apperr.Invalid, "%s is not a deferred or failed domain of %s.", domain, env.Name)
	}
	if err := s.DB.AuditCheckNow(ctx, a, env, names); err != nil {
		return nil, err
	}
	args := ReconcileEnvironmentArgs{EnvironmentID: env.ID, Force: true, Domain: domain, RequestID: a.RequestID}
	if a.User != nil {
		id := a.User.ID
		args.UserID = &id
	}
	var out []CheckResult
	if s.river == nil {
		if out, err = s.reconcileEnvironment(ctx, a, args); err != nil {
			return nil, err
		}
	} else if len(names) > 0 {
		if out, err = s.checkInQueue(ctx, args); err != nil {
			return nil, err
		}
	}
	// Waiting deploys look again now rather than at their next retry;
	// only those that started: one that waits for its approval, a freeze
	// window's end or its rule's wait is not due.
	runs, err := s.DB.Runs(ctx, env.ID, 20)
	if err != nil {
		return nil, err
	}
	for i := range runs {
		if runs[i].Status == store.RunWaiting && runs[i].StartedAt != nil {
			s.wake(ctx, &runs[i])
		}
	}
	return out, nil
}

// checkInQueue inserts the environment's reconcile job for Check now and
// waits up to CheckWait for its results.
func (s *Service) checkInQueue(ctx context.Context, args ReconcileEnvironmentArgs) ([]CheckResult, error) {
	ins, err := s.river.Insert(ctx, args, reconcileInsertOpts())
	if err != nil {
		return nil, fmt.Errorf("runs: check now: %w", err)
	}
	if ins.UniqueSkippedAsDuplicate {
		return nil, ErrCheckUnderWay
	}
	wait := time.NewTimer(CheckWait)
	defer wait.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wait.C:
			return nil, ErrCheckStillRunning
		case <-tick.C:
		}
		job, err := s.river.JobGet(ctx, ins.Job.ID)
		if err != nil {
			return nil, fmt.Errorf("runs: check now: %w", err)
		}
		switch job.State {
		case rivertype.JobStateCompleted:
			var recorded []checkOutput
			if o := job.Output(); o != nil {
				if err := json.Unmarshal(o, &recorded); err != nil {
					return nil, fmt.Errorf("runs: check now: %w", err)
				}
			}
			out := make([]CheckResult, len(recorded))
			for i, r := range recorded {
				out[i] = CheckResult{Domain: r.Domain, Verdict: r.Verdict, NotProbed: r.NotProbed, Addresses: r.Addresses, NotAsked: r.NotAsked}
				if r.RunID != 0 {
					if out[i].Run, err = s.DB.RunByID(ctx, r.RunID); err != nil {
						return nil, err
					}
				}
			}
			return out, nil
		case rivertype.JobStateDiscarded, rivertype.JobStateCancelled:
			return nil, fmt.Errorf("runs: check now: job %d ended %s", job.ID, job.State)
		}
	}
}

// ExecuteUnfinished executes every unfinished run once, oldest first, and
// returns where each was left. Tests use it without River.
func (s *Service) ExecuteUnfinished(ctx context.Context) (map[int64]Result, error) {
	ids, err := s.DB.UnfinishedRuns(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int64]Result{}
	for _, id := range ids {
		res, err := s.Runner.Execute(ctx, id)
		if err != nil {
			return out, err
		}
		out[id] = res
	}
	return out, nil
}
