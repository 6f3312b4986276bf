package runs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// Runner executes runs checkpoint by checkpoint. The checkpoint rows are
// the truth: a finished checkpoint is never done again, so a run that a
// killed process left behind resumes where it stopped.
//
// An execution holds the run's lease (store.ClaimRunLease) and renews it
// every Lease/4; every change it writes is fenced by that lease, so an
// executor that lost its run to another process changes nothing more.
type Runner struct {
	DB    *store.DB
	Vault *store.Vault
	// S3PartSize is the part size of an S3 target's multipart uploads
	// (s3target.DefaultPartSize when zero).
	S3PartSize int
	Platform   platform.Platform
	// Now is the clock of every decision (deadlines, backoff); tests
	// replace it.
	Now    func() time.Time
	Logger *slog.Logger
	// Replan plans a deploy run again as it would start now, for its
	// Approval checkpoint (NewService sets it).
	Replan func(ctx context.Context, env *store.Environment, run *store.Run) (ApprovalPlan, error)
	// Activated hears that a run made a revision active in env (after
	// it is stored): what runs there is read again (NewService sets it
	// to the health monitor's, which reads health and drift against the
	// revision now active).
	Activated func(env platform.Env)
	// YieldAfter is how long one execution works before it gives its job
	// back (default a minute), so River never takes a live execution for
	// the job of a killed process.
	YieldAfter time.Duration
	// Lease is how long a claim on a run lasts unless renewed (default
	// 20 s): a run whose executor died shows "executor lost" that long
	// after its last renewal at most, and is taken over right after.
	Lease time.Duration
	// DeleteTimeout bounds a delete run's wait for the platform
	// (DefaultDeleteTimeout when zero).
	DeleteTimeout time.Duration
	// ScratchDir is where restore drills make their scratch directories
	// (os.TempDir() when empty).
	ScratchDir string
	// reserved are the Studio's own hostnames (Service.SetReservedHostnames).
	reserved []string

	// stopping: the process is shutting down; executions give their job
	// back at the next safe point.
	stopping atomic.Bool
	// stopped is closed by Stop: a step that waits (for the cluster, a
	// certificate, a rollout) stops waiting at once (yielding).
	stopOnce sync.Once
	stopped  chan struct{}
}

// Result is where Execute left a run: finished, or waiting until a time.
type Result struct {
	Finished  bool
	WaitUntil time.Time
}

// ErrTakenOver means another executor changed the run while this one
// worked on it; this one stops.
var ErrTakenOver = errors.New("runs: the run was changed by another executor")

// errLeaseExpired means the execution could not renew its lease in time
// (the database was out of reach): another process may take the run over,
// so this one stops.
var errLeaseExpired = errors.New("runs: the run's lease expired before it could be renewed")

// stepResult is what one checkpoint's work came to.
type stepResult struct {
	status  string // succeeded, skipped, failed, waiting
	warning string
	detail  CheckpointDetail
	reason  string // why the run fails
	until   time.Time
	cert    *store.Certificate
	service string
	// converge keeps a failed first deploy converging.
	converge      bool
	activate      *int64
	activeDomains []string
	// activeHostnames become the environment's hostname claims with the
	// activation (nil: unchanged).
	activeHostnames []string
	// state is the environment's new state (a restore stops and starts it).
	state string
	// platformError: the reason quotes an error of the platform, which
	// may hold a value (it is masked before it is recorded).
	platformError bool
	// unknown: the platform cannot tell how a release command ended.
	unknown bool
}

// runContext is what the steps of one Execute share.
type runContext struct {
	run *store.Run
	det RunDetail
	env *store.Environment
	def *compiler.Definition
	// out takes the log lines of the step under way (see LogSink).
	out *LogSink
	// lease is the owner name of this execution's lease on the run.
	lease string
	// detDirty: det changed and is not stored yet.
	detDirty bool
	// cancelledAt is the checkpoint a cancelled run stopped at.
	cancelledAt *store.Checkpoint
}

// Execute works on the run until it finishes or has to wait. It first
// claims the run's lease; while another live execution holds it, it
// returns at once with the time that lease would expire.
func (r *Runner) Execute(ctx context.Context, runID int64) (Result, error) {
	owner := processName + ":" + randomToken()[:12]
	var ok bool
	var heldUntil time.Time
	err := store.WithRetry(ctx, func(ctx context.Context, _ int) (err error) {
		ok, heldUntil, err = r.DB.ClaimRunLease(ctx, runID, owner, r.lease())
		return err
	})
	if apperr.CodeOf(err) == apperr.NotFound {
		// Gone with its environment (a delete run that finished).
		return Result{Finished: true}, nil
	}
	if err != nil {
		return Result{}, err
	}
	if !ok {
		run, err := r.DB.RunByID(ctx, runID)
		if err != nil {
			return Result{}, err
		}
		if store.RunFinished(run.Status) {
			return Result{Finished: true}, nil
		}
		// Another live execution works on it: look again once its lease
		// would have expired.
		return Result{WaitUntil: r.Now().Add(max(time.Until(heldUntil), time.Second))}, nil
	}
	ctx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	done := make(chan struct{})
	var beat sync.WaitGroup
	beat.Go(func() { r.renew(ctx, runID, owner, lost, done) })
	res, err := r.execute(ctx, runID, owner)
	close(done)
	beat.Wait()
	// Every write of the execution is guarded by its lease: one that
	// ended without an error kept it to the end, even when a renewal
	// raced its last write (the run finished, so the renewal found no
	// unfinished run of this owner) and reported the lease lost.
	if cause := context.Cause(ctx); err != nil && (cause == ErrTakenOver || cause == errLeaseExpired) {
		r.Logger.Warn("run lease lost", "run", runID, "cause", cause)
		return Result{}, ErrTakenOver
	}
	if !res.Finished {
		// Waiting in the database (or yielding): no process executes the
		// run until its job runs again.
		if rerr := store.WithRetry(ctx, func(ctx context.Context, _ int) error { return r.DB.ReleaseRunLease(ctx, runID, owner) }); rerr != nil {
			r.Logger.Warn("release run lease", "run", runID, "err", rerr)
		}
	}
	return res, err
}

func (r *Runner) execute(ctx context.Context, runID int64, owner string) (Result, error) {
	run, err := r.DB.RunByID(ctx, runID)
	if err != nil {
		return Result{}, err
	}
	if store.RunFinished(run.Status) {
		return Result{Finished: true}, nil
	}
	rc := &runContext{run: run, det: DecodeRunDetail(run.Detail), lease: owner}
	if rc.env, err = r.DB.EnvironmentByID(ctx, run.EnvironmentID); err != nil {
		return Result{}, err
	}
	if run.RevisionID != nil {
		rev, err := r.DB.RevisionByID(ctx, *run.RevisionID)
		if err != nil {
			return Result{}, err
		}
		rc.def = rev.Definition
	}
	cps, err := r.DB.Checkpoints(ctx, runID)
	if err != nil {
		return Result{}, err
	}
	// cancel is the run's cancel request as of its latest change: every
	// change returns it, so checking it costs no query.
	cancel := run.CancelRequested
	if run.Status != store.RunRunning && !cancel {
		if cancel, _, err = r.apply(ctx, store.RunChange{RunID: runID, Status: store.RunRunning, Lease: owner}); err != nil {
			return Result{}, err
		}
	}
	began := time.Now()
	for i := 0; i < len(cps); {
		// The checkpoints of one phase (provisioning, builds, release
		// commands, rollouts) are independent of each other: they run at
		// the same time, each recorded as it ends. Any other checkpoint is
		// a phase of its own.
		end := phaseEnd(cps, i)
		phase := cps[i:end]
		i = end
		// A step of the phase failed before the process that ran it
		// stopped: the run fails; nothing of the phase starts now.
		if failed := firstFailed(phase); failed != nil {
			if err := r.settleRunning(ctx, rc, phase, "did not finish: "+failed.Name+" failed"); err != nil {
				return Result{}, err
			}
			res := stepResult{status: store.CheckpointFailed, reason: DecodeCheckpointDetail(failed.Detail).Error}
			return r.finish(ctx, rc, store.RunFailed, res.reason, &res)
		}
		todo := unfinished(phase)
		if len(todo) == 0 {
			continue
		}
		cp := todo[0]
		// A safe point: between checkpoints (a release command that runs
		// is never stopped halfway; it is inside one step).
		if cancel {
			return r.cancelAt(ctx, rc, cp, todo)
		}
		// A long run gives its job back now and then, so River never
		// takes a live execution for the job of a killed process; a
		// process that shuts down gives it back at once.
		if r.stopping.Load() || time.Since(began) > cmp.Or(r.YieldAfter, time.Minute) {
			return Result{WaitUntil: r.Now()}, nil
		}
		if len(todo) > 1 {
			res, c, err := r.doTogether(ctx, rc, todo)
			if errors.Is(err, errYielded) {
				return Result{WaitUntil: r.Now()}, nil
			}
			if err != nil {
				return Result{}, err
			}
			cancel = c
			if res != nil {
				return r.finish(ctx, rc, store.RunFailed, res.reason, res)
			}
			continue
		}
		res, c, err := r.do(ctx, rc, cp)
		if errors.Is(err, errYielded) {
			return Result{WaitUntil: r.Now()}, nil
		}
		if err != nil {
			return Result{}, err
		}
		cancel = c
		if res.status == statusVoided {
			// Waiting for approval again: no job, no lease.
			return Result{Finished: true}, nil
		}
		if res.status == store.CheckpointWaiting {
			if _, ok, err := r.apply(ctx, store.RunChange{RunID: runID, Status: store.RunWaiting, Detail: rc.dirtyDetail(), Lease: owner,
				Checkpoint: &store.CheckpointChange{Position: cp.Position, Status: store.CheckpointWaiting, Warning: res.warning, Detail: res.detail,
					From: []string{store.CheckpointRunning, store.CheckpointWaiting}},
				Certificate: res.cert, ServiceState: res.service}); err != nil {
				return Result{}, err
			} else if !ok {
				return Result{}, ErrTakenOver
			}
			return Result{WaitUntil: res.until}, nil
		}
		if res.status == store.CheckpointFailed {
			return r.finish(ctx, rc, store.RunFailed, res.reason, &res)
		}
	}
	return r.finish(ctx, rc, "", "", nil)
}

// phaseEnd returns the end (exclusive) of the phase that starts with
// cps[i]: it and the checkpoints right after it of the same phase; a
// checkpoint of no phase is alone in its own.
func phaseEnd(cps []store.Checkpoint, i int) int {
	phase := steps[cps[i].Kind].phase
	j := i + 1
	for phase != "" && j < len(cps) && steps[cps[j].Kind].phase == phase {
		j++
	}
	return j
}

// firstFailed returns the first failed checkpoint of cps, nil when none failed.
func firstFailed(cps []store.Checkpoint) *store.Checkpoint {
	for i := range cps {
		if cps[i].Status == store.CheckpointFailed {
			return &cps[i]
		}
	}
	return nil
}

// unfinished returns the checkpoints of cps that have not ended.
func unfinished(cps []store.Checkpoint) []store.Checkpoint {
	var out []store.Checkpoint
	for _, cp := range cps {
		if !store.CheckpointDone(cp.Status) {
			out = append(out, cp)
		}
	}
	return out
}

// do runs checkpoint cp's step and records what it came to, except a
// wait, which the caller records. cancel reports whether the run has
// been asked to cancel, as of the last change written.
func (r *Runner) do(ctx context.Context, rc *runContext, cp store.Checkpoint) (res stepResult, cancel bool, err error) {
	if resume := steps[cp.Kind].resume; resume != nil && cp.Status == store.CheckpointRunning {
		// The process that ran it stopped (or this one could not record
		// it): ask what it came to before anything else (a release
		// command runs once per deployment).
		res, again, err := resume(r, ctx, rc, cp)
		if err != nil {
			return stepResult{}, false, err
		}
		if !again {
			cancel, err = r.record(ctx, rc, cp, res)
			return res, cancel, err
		}
	}
	if cp.Status == store.CheckpointPending {
		var ok bool
		if cancel, ok, err = r.apply(ctx, store.RunChange{RunID: rc.run.ID, Lease: rc.lease, Checkpoint: &store.CheckpointChange{
			Position: cp.Position, Status: store.CheckpointRunning, From: []string{store.CheckpointPending}}}); err != nil {
			return stepResult{}, false, err
		} else if !ok {
			return stepResult{}, false, ErrTakenOver
		}
	}
	rc.out = r.stepLog(ctx, rc, cp)
	sctx, endStep := r.stepContext(ctx, cp.Kind)
	waiter := r.newStepWaiter(ctx, rc, cp, rc.out)
	res, err = r.step(platform.WithWaiter(sctx, waiter), rc, cp)
	yielded := ctx.Err() == nil && context.Cause(sctx) == errYielded
	endStep()
	waiter.close()
	// The step's lines are stored before its outcome: a page shows the
	// log of a failed step with its failure.
	rc.out.Close()
	if yielded && (err != nil || res.status == store.CheckpointFailed) {
		// It stopped waiting because the process shuts down: nothing of
		// it is recorded, the next execution takes it up.
		r.Logger.Info("step stopped waiting: shutting down; the run is given back", "run", rc.run.ID, "checkpoint", cp.Name)
		return stepResult{}, false, errYielded
	}
	if err != nil {
		return stepResult{}, false, err
	}
	if res.platformError {
		res = maskOutcome(rc.out.maskerNow(), res)
	}
	if res.status == store.CheckpointWaiting || res.status == statusVoided {
		return res, cancel, nil
	}
	cancel, err = r.record(ctx, rc, cp, res)
	return res, cancel, err
}

// doTogether runs the steps of cps, checkpoints of one phase, at the same
// time, each with its own log, and records each as it ends. A step that
// fails does not stop the others (a release command is never stopped
// halfway, and a rollout under way goes on on the platform anyway): the
// run fails once all have ended, with the first failed checkpoint's
// reason (failed). cancel reports whether the run has been asked to cancel.
func (r *Runner) doTogether(ctx context.Context, rc *runContext, cps []store.Checkpoint) (failed *stepResult, cancel bool, err error) {
	type outcome struct {
		res    stepResult
		cancel bool
		err    error
	}
	// Release commands found running after a process stopped are asked
	// of the platform first: when one failed, the run fails and no other
	// command of the phase starts.
	var rest []store.Checkpoint
	for _, cp := range cps {
		if resume := steps[cp.Kind].resume; resume != nil && cp.Status == store.CheckpointRunning {
			res, again, err := resume(r, ctx, rc, cp)
			if err != nil {
				return nil, false, err
			}
			if !again {
				c, err := r.record(ctx, rc, cp, res)
				if err != nil {
					return nil, false, err
				}
				cancel = cancel || c
				if failed == nil && res.status == store.CheckpointFailed {
					failed = &res
				}
				continue
			}
		}
		rest = append(rest, cp)
	}
	if failed != nil {
		return failed, cancel, r.settleRunning(ctx, rc, rest, "not run: "+failed.detail.Application+"'s release command failed")
	}
	cps = rest
	outs := make([]outcome, len(cps))
	var wg sync.WaitGroup
	for i, cp := range cps {
		// Each step has its own copy of what steps share: steps of these
		// phases read it and write only their log (rc.out).
		own := *rc
		wg.Go(func() {
			res, c, err := r.do(ctx, &own, cp)
			if err == nil && res.status == store.CheckpointWaiting {
				err = fmt.Errorf("runs: %s waited; no step of its phase may wait", cp.Name)
			}
			outs[i] = outcome{res, c, err}
		})
	}
	wg.Wait()
	for _, o := range outs {
		if o.err != nil {
			return nil, false, o.err
		}
	}
	for i := range outs {
		cancel = cancel || outs[i].cancel
		if failed == nil && outs[i].res.status == store.CheckpointFailed {
			failed = &outs[i].res
		}
	}
	return failed, cancel, nil
}

// cancelAt ends a run asked to cancel at checkpoint cp, its first
// unfinished one; phase is the unfinished checkpoints of cp's phase, cp
// first (steps that ran together). A wait is a safe point: the checkpoint
// ends there. A step left running by an executor that is gone is recorded
// as not finished; the checkpoints after it stay pending and read "not run".
func (r *Runner) cancelAt(ctx context.Context, rc *runContext, cp store.Checkpoint, phase []store.Checkpoint) (Result, error) {
	rc.cancelledAt = &cp
	d := DecodeCheckpointDetail(cp.Detail)
	if cp.Status == store.CheckpointWaiting {
		if _, err := r.record(ctx, rc, cp, stepResult{status: store.CheckpointSkipped, warning: "cancelled while waiting", detail: d}); err != nil {
			return Result{}, err
		}
		return r.finish(ctx, rc, store.RunCancelled, fmt.Sprintf("Cancelled while %s waited.", cp.Name), nil)
	}
	// Steps of the phase left running by an executor that is gone (they
	// ran together, so one may run while the first still waits to start).
	finished := true
	for _, c := range phase {
		if c.Status != store.CheckpointRunning {
			continue
		}
		ok, err := r.settle(ctx, rc, c, "did not finish: the run was cancelled after the Studio process executing it stopped")
		if err != nil {
			return Result{}, err
		}
		if c.Position == cp.Position {
			finished = ok
		}
	}
	if cp.Status == store.CheckpointRunning {
		if finished {
			return r.finish(ctx, rc, store.RunCancelled, fmt.Sprintf("Cancelled after %s.", cp.Name), nil)
		}
		return r.finish(ctx, rc, store.RunCancelled, fmt.Sprintf("Cancelled while %s ran; it did not finish.", cp.Name), nil)
	}
	return r.finish(ctx, rc, store.RunCancelled, fmt.Sprintf("Cancelled before %s.", cp.Name), nil)
}

// settleRunning settles every checkpoint of cps left running by an
// executor that is gone, in a run that ends now (see settle).
func (r *Runner) settleRunning(ctx context.Context, rc *runContext, cps []store.Checkpoint, why string) error {
	for _, cp := range cps {
		if cp.Status == store.CheckpointRunning {
			if _, err := r.settle(ctx, rc, cp, why); err != nil {
				return err
			}
		}
	}
	return nil
}

// settle records what became of checkpoint cp, left running by an
// executor that is gone, in a run that ends now: a release command the
// platform saw end is recorded as it ended (finished reports a success);
// any other step, and a command whose end the platform cannot tell, is
// skipped with warning why, and never run.
func (r *Runner) settle(ctx context.Context, rc *runContext, cp store.Checkpoint, why string) (finished bool, err error) {
	if resume := steps[cp.Kind].resume; resume != nil {
		res, again, err := resume(r, ctx, rc, cp)
		if err != nil {
			return false, err
		}
		if !again && !res.unknown {
			_, err := r.record(ctx, rc, cp, res)
			return err == nil && res.status == store.CheckpointSucceeded, err
		}
	}
	_, err = r.record(ctx, rc, cp, stepResult{status: store.CheckpointSkipped, detail: DecodeCheckpointDetail(cp.Detail), warning: why})
	return false, err
}

// apply writes a change of the run under the execution's lease, retried
// while the database is out of reach (and after the execution's context
// ends: what a step finished is recorded). A retry whose earlier attempt
// committed finds the checkpoint changed already: that counts as applied.
func (r *Runner) apply(ctx context.Context, c store.RunChange) (cancel, applied bool, err error) {
	err = store.WithRetry(ctx, func(ctx context.Context, attempt int) (err error) {
		cancel, applied, err = r.DB.ApplyRunChangeCancel(ctx, c)
		if err != nil || applied || attempt == 0 {
			return err
		}
		run, err := r.DB.RunByID(ctx, c.RunID)
		if err != nil {
			return err
		}
		cancel = run.CancelRequested
		if c.Checkpoint == nil {
			applied = c.Status != "" && run.Status == c.Status
			return nil
		}
		cps, err := r.DB.Checkpoints(ctx, c.RunID)
		if err != nil {
			return err
		}
		for _, cp := range cps {
			if cp.Position == c.Checkpoint.Position {
				applied = cp.Status == c.Checkpoint.Status
			}
		}
		return nil
	})
	return cancel, applied, err
}

// record stores a finished checkpoint and reports whether the run has
// been asked to cancel.
func (r *Runner) record(ctx context.Context, rc *runContext, cp store.Checkpoint, res stepResult) (bool, error) {
	cancel, ok, err := r.apply(ctx, store.RunChange{RunID: rc.run.ID, Detail: rc.dirtyDetail(), Lease: rc.lease,
		Checkpoint: &store.CheckpointChange{Position: cp.Position, Status: res.status, Warning: res.warning, Detail: res.detail,
			From: []string{store.CheckpointRunning, store.CheckpointWaiting}},
		Certificate: res.cert, ServiceState: res.service, Activate: res.activate, ActiveDomains: res.activeDomains,
		ActiveHostnames: res.activeHostnames, EnvironmentState: res.state})
	if err != nil {
		return false, err
	}
	if !ok {
		return false, ErrTakenOver
	}
	if res.activate != nil && r.Activated != nil {
		r.Activated(platform.Env{ID: rc.env.ID, Project: rc.env.Project, Name: rc.env.Name})
	}
	return cancel, nil
}

// dirtyDetail returns the run's detail when a step changed it (the TLS
// deadline), so it is stored with the step's own change.
func (rc *runContext) dirtyDetail() any {
	if !rc.detDirty {
		return nil
	}
	rc.detDirty = false
	return rc.det
}
