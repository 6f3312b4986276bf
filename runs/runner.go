package runs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/humanize"
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
	DB       *store.DB
	Vault    *store.Vault
	Platform platform.Platform
	// Now is the clock of every decision (deadlines, backoff); tests
	// replace it.
	Now    func() time.Time
	Logger *slog.Logger
	// Replan plans a deploy run again as it would start now, for its
	// Approval checkpoint (NewService sets it).
	Replan func(ctx context.Context, env *store.Environment, run *store.Run) (ApprovalPlan, error)
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

// DefaultLease is how long a run's lease lasts unless renewed.
const DefaultLease = 20 * time.Second

func (r *Runner) lease() time.Duration { return cmp.Or(r.Lease, DefaultLease) }

// Stop makes every execution of this runner give its run back at its next
// safe point (between checkpoints, or once the step in flight is recorded),
// for another process, or this one restarted, to resume.
// A step that only waits (see yielding) stops waiting at once: it is
// recorded nowhere, and the next execution takes it up again.
func (r *Runner) Stop() {
	if !r.stopping.Swap(true) {
		close(r.stopChan())
	}
}

// stopChan is the channel Stop closes.
func (r *Runner) stopChan() chan struct{} {
	r.stopOnce.Do(func() { r.stopped = make(chan struct{}) })
	return r.stopped
}

// errYielded means a step that waited was stopped by Stop: its checkpoint
// stays as it was, for the next execution to take up again.
var errYielded = errors.New("runs: the step stopped waiting: the process is shutting down")

// yielding reports whether a step of kind only waits for others (the
// cluster, cert-manager, a rollout, DNS) rather than does work in flight:
// on a shutdown it stops waiting at once and its run is given back (it is
// a wait in the database, not a goroutine's). A release command, a build
// and the steps of a backup or restore are work in flight: they finish
// (or reach their timeout) first.
func yielding(kind string) bool {
	switch kind {
	case KindCheckValues, KindProvisionDatabase, KindProvisionBucket, KindIssueTLS, KindRollout, KindProbe, KindDeletePlatform:
		return true
	}
	return false
}

// stepContext is the context of a step of kind: for a step that only
// waits, one that ends when Stop is called (with errYielded as its cause).
func (r *Runner) stepContext(ctx context.Context, kind string) (context.Context, context.CancelFunc) {
	if !yielding(kind) {
		return ctx, func() {}
	}
	sctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-r.stopChan():
			cancel(errYielded)
		case <-done:
		}
	}()
	return sctx, func() { close(done); cancel(nil) }
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

// processName names this process in lease owners: its machine (host name
// and pid namespace) and pid, so that an operator reading the runs table
// sees who executes what, and a process on the same machine can tell an
// executor that died (see deadHere).
var processName = machineName() + ":" + strconv.Itoa(os.Getpid())

// machineName is host@pid-namespace: processes with the same machine name
// see the same process ids.
func machineName() string {
	host, _ := os.Hostname()
	ns, err := os.Readlink("/proc/self/ns/pid") // "pid:[4026531836]"
	if err != nil {
		return host
	}
	return host + "@" + strings.Trim(strings.TrimPrefix(ns, "pid:"), "[]")
}

// deadHere reports whether the lease owner names a process of this
// machine that no longer exists: its lease need not run out before the run
// is taken over. A process id reused since only delays that (the lease
// still expires); it never makes a live executor look dead.
func deadHere(owner string) bool {
	machine, rest, ok := strings.Cut(owner, ":")
	if !ok || !strings.Contains(machine, "@") || machine != machineName() {
		return false
	}
	pidText, _, _ := strings.Cut(rest, ":")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
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
	if cause := context.Cause(ctx); cause == ErrTakenOver || cause == errLeaseExpired {
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

// renew renews the execution's lease until done is closed. When another
// process holds the lease now, or it could not be renewed before it
// expired, it cancels the execution with that cause.
func (r *Runner) renew(ctx context.Context, runID int64, owner string, lost context.CancelCauseFunc, done <-chan struct{}) {
	every := r.lease() / 4
	t := time.NewTicker(every)
	defer t.Stop()
	expires := time.Now().Add(r.lease())
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), every)
		ok, err := r.DB.RenewRunLease(rctx, runID, owner, r.lease())
		cancel()
		switch {
		case err == nil && ok:
			expires = sent.Add(r.lease())
		case err == nil:
			lost(ErrTakenOver)
			return
		case time.Now().After(expires):
			lost(errLeaseExpired)
			return
		}
	}
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

// phases groups the checkpoint kinds whose steps of different services
// may run at the same time: none waits for another of its phase, and
// none of them waits (a wait ends the execution).
var phases = map[string]string{
	KindProvisionDatabase: "provision", KindProvisionBucket: "provision",
	KindBuild: "build", KindImport: "build",
	KindRelease: "release",
	KindRollout: "rollout",
}

// phaseEnd returns the end (exclusive) of the phase that starts with
// cps[i]: it and the checkpoints right after it of the same phase; a
// checkpoint of no phase is alone in its own.
func phaseEnd(cps []store.Checkpoint, i int) int {
	phase := phases[cps[i].Kind]
	j := i + 1
	for phase != "" && j < len(cps) && phases[cps[j].Kind] == phase {
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
	if cp.Kind == KindRelease && cp.Status == store.CheckpointRunning {
		// The process that ran it stopped (or this one could not record
		// it): ask the platform what the command came to before anything
		// else, since a release command runs once per deployment.
		res, again, err := r.releaseOutcome(ctx, rc, cp)
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
		if cp.Kind == KindRelease && cp.Status == store.CheckpointRunning {
			res, again, err := r.releaseOutcome(ctx, rc, cp)
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
	if cp.Kind == KindRelease {
		res, again, err := r.releaseOutcome(ctx, rc, cp)
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

// releaseOutcome decides what becomes of a release command found running
// when an execution starts: the platform says what it came to. again
// reports that it never started, so running it now is safe.
func (r *Runner) releaseOutcome(ctx context.Context, rc *runContext, cp store.Checkpoint) (res stepResult, again bool, err error) {
	d := DecodeCheckpointDetail(cp.Detail)
	var out platform.ReleaseOutcome
	err = store.WithRetry(ctx, func(ctx context.Context, _ int) (err error) {
		out, err = r.Platform.ReleaseOutcome(ctx, platformEnv(rc.env), platform.ReleaseKey{RunID: rc.run.ID, Position: cp.Position})
		return err
	})
	if err != nil {
		return stepResult{}, false, err
	}
	switch out.State {
	case platform.ReleaseNotStarted:
		return stepResult{}, true, nil
	case platform.ReleaseSucceeded:
		return stepResult{status: store.CheckpointSucceeded, detail: d}, false, nil
	case platform.ReleaseFailed:
		reason := fmt.Sprintf("The release command of %s failed: %s", d.Application, out.Error)
		d.Error = reason
		return maskOutcome(r.maskerFor(ctx, rc), stepResult{status: store.CheckpointFailed, detail: d, reason: reason}), false, nil
	}
	reason := "The Studio stopped while the release command of " + d.Application + " ran, and the platform cannot tell whether it finished; it is not run again by itself. Deploy again."
	d.Error = reason
	return stepResult{status: store.CheckpointFailed, detail: d, reason: reason, unknown: true}, false, nil
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

// finish ends the run: status "" means it went through every checkpoint.
func (r *Runner) finish(ctx context.Context, rc *runContext, status, reason string, failed *stepResult) (Result, error) {
	var cps []store.Checkpoint
	err := store.WithRetry(ctx, func(ctx context.Context, _ int) (err error) {
		cps, err = r.DB.Checkpoints(ctx, rc.run.ID)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	det := rc.det
	if status == store.RunFailed || status == store.RunCancelled {
		if cps, err = r.markNotRun(ctx, rc, cps); err != nil {
			return Result{}, err
		}
		det.StoppedAt, det.StoppedName, det.StoppedLine = nil, "", 0
		stopped := rc.cancelledAt
		for i := range cps {
			if stopped == nil && cps[i].Status == store.CheckpointFailed {
				stopped = &cps[i]
			}
		}
		if stopped != nil {
			det.StoppedAt, det.StoppedName = &stopped.Position, stopped.Name
			if err := store.WithRetry(ctx, func(ctx context.Context, _ int) (err error) {
				det.StoppedLine, err = r.DB.LastRunLogLine(ctx, rc.run.ID, stopped.Position)
				return err
			}); err != nil {
				return Result{}, err
			}
		}
	}
	certs, err := r.certificateStates(ctx, rc.env.ID)
	if err != nil {
		return Result{}, err
	}
	det.Deferred, det.Warnings = 0, 0
	for _, cp := range cps {
		if cp.Warning != "" {
			det.Warnings++
		}
		if TLSDeferred(cp, DecodeCheckpointDetail(cp.Detail)) {
			det.Deferred++
		}
	}
	if status == "" {
		status = store.RunSucceeded
		if det.Warnings > 0 {
			status = store.RunSucceededWithWarnings
		}
	}
	if rc.run.Kind == "delete" && status == store.RunSucceeded {
		// The platform holds nothing of the environment any more: its rows
		// go now, this run's with them.
		if ok, err := r.DB.FinishEnvironmentDeletion(ctx, rc.run.ID, rc.lease); err != nil {
			return Result{}, err
		} else if !ok {
			return Result{}, ErrTakenOver
		}
		r.Logger.Info("environment deleted", "environment", rc.env.ID, "run", rc.run.ID)
		return Result{Finished: true}, nil
	}
	det.Summary = summary(rc.run, status, reason, cps, certs)
	change := store.RunChange{RunID: rc.run.ID, Status: status, Reason: reason, Detail: det}
	change.EnvironmentState = restoreOutcomeState(rc.run, status, cps)
	if failed != nil && failed.converge && rc.run.Kind == "deploy" && rc.run.FromRevisionID == nil && rc.env.ActiveRevisionID == nil {
		change.Converging = rc.run.RevisionID
	}
	change.Lease = rc.lease
	if _, ok, err := r.apply(ctx, change); err != nil {
		return Result{}, err
	} else if !ok {
		return Result{}, ErrTakenOver
	}
	r.finishBackupRun(ctx, rc.run, rc.env, status)
	return Result{Finished: true}, nil
}

// markNotRun records every checkpoint a failed or cancelled run never
// reached as not run, each with its event (a watching page turns its
// rows), and returns cps with those statuses.
func (r *Runner) markNotRun(ctx context.Context, rc *runContext, cps []store.Checkpoint) ([]store.Checkpoint, error) {
	for i, cp := range cps {
		if cp.Status != store.CheckpointPending {
			continue
		}
		if _, ok, err := r.apply(ctx, store.RunChange{RunID: rc.run.ID, Lease: rc.lease, Checkpoint: &store.CheckpointChange{
			Position: cp.Position, Status: store.CheckpointNotRun, From: []string{store.CheckpointPending}}}); err != nil {
			return nil, err
		} else if !ok {
			return nil, ErrTakenOver
		}
		cps[i].Status = store.CheckpointNotRun
	}
	return cps, nil
}

// certificateStates is the state of each certificate of the environment
// by domain, as it stands when a run ends: a certificate another run
// issued meanwhile reads issued in this run's summary.
func (r *Runner) certificateStates(ctx context.Context, envID int64) (map[string]string, error) {
	var certs []store.Certificate
	err := store.WithRetry(ctx, func(ctx context.Context, _ int) (err error) {
		certs, err = r.DB.Certificates(ctx, envID)
		return err
	})
	if err != nil {
		return nil, err
	}
	states := make(map[string]string, len(certs))
	for _, c := range certs {
		states[c.Domain] = c.State
	}
	return states, nil
}

// Summary is a run's plain-text summary, like the CLI's ready summary.
func Summary(run *store.Run, status, reason string, cps []store.Checkpoint) string {
	return summary(run, status, reason, cps, nil)
}

// summary is Summary with the environment's certificate states by domain:
// a TLS checkpoint that did not issue its certificate (not run, cancelled
// while waiting) reads as its certificate stands now.
func summary(run *store.Run, status, reason string, cps []store.Checkpoint, certs map[string]string) string {
	var b strings.Builder
	what := run.Kind
	if run.Revision > 0 {
		what += fmt.Sprintf(" of revision %d", run.Revision)
		if run.Kind == "deploy" && (DecodeRunDetail(run.Detail).Rollback || run.ReleaseOf != nil) {
			what = fmt.Sprintf("rollback to revision %d", run.Revision)
		}
	}
	fmt.Fprintf(&b, "%s: %s\n", what, StatusText(status))
	deferred := 0
	var warnings []string
	for _, cp := range cps {
		d := DecodeCheckpointDetail(cp.Detail)
		if cp.Kind == KindIssueTLS && d.TLS != nil {
			state := ""
			switch {
			case cp.Status != store.CheckpointSucceeded && certs[d.TLS.Domain] == "issued":
				// Issued meanwhile (Check now, the reconciler, another run).
				state = "cert issued"
			case TLSDeferred(cp, d):
				deferred++
				state = "cert deferred · domain not pointing here yet"
				if d.TLS.IssuedFor != "" {
					state += " · issued for " + d.TLS.IssuedFor
				}
			case cp.Status == store.CheckpointSucceeded:
				state = "cert issued"
			case cp.Status == store.CheckpointFailed:
				state = "cert failed"
			case cp.Status == store.CheckpointWaiting && d.TLS.NextRetryAt != nil:
				state = "cert waiting · " + RetryText(*d.TLS.NextRetryAt)
			case cp.Status == store.CheckpointNotRun && certs[d.TLS.Domain] != "":
				state = "cert " + certs[d.TLS.Domain] + " · not run"
			case cp.Status == store.CheckpointNotRun:
				state = "cert not run"
			default:
				state = "cert " + cp.Status
			}
			fmt.Fprintf(&b, "  %s  %s  %s\n", d.TLS.Route, d.TLS.Domain, state)
		}
		if cp.Warning != "" {
			warnings = append(warnings, cp.Warning)
		}
	}
	for _, w := range warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	if deferred > 0 {
		fmt.Fprintf(&b, "%d %s deferred\n", deferred, humanize.Plural(deferred, "route", "routes"))
	}
	if reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", reason)
	}
	return strings.TrimRight(b.String(), "\n")
}

// StatusText is how a run status reads.
func StatusText(status string) string {
	if status == store.RunSucceededWithWarnings {
		return "succeeded · with warnings"
	}
	return status
}

// step does one checkpoint's work.
func (r *Runner) step(ctx context.Context, rc *runContext, cp store.Checkpoint) (stepResult, error) {
	d := DecodeCheckpointDetail(cp.Detail)
	ok := func() stepResult { return stepResult{status: store.CheckpointSucceeded, detail: d} }
	fail := func(reason string) stepResult {
		d.Error = reason
		return stepResult{status: store.CheckpointFailed, detail: d, reason: reason}
	}
	def := rc.def
	if def == nil {
		def = &compiler.Definition{}
	}
	switch cp.Kind {
	case KindApproval:
		return r.stepApproval(ctx, rc, cp, d)
	case KindCheckValues:
		contract := def.ValueContract()
		stored, err := r.DB.StoredValues(ctx, rc.env.ID)
		if err != nil {
			return stepResult{}, err
		}
		var missing []string
		for _, n := range contract.Required {
			if rc.run.ReleaseOf != nil {
				// A rollback checks its own release (applyRelease).
				break
			}
			if !slices.ContainsFunc(stored, func(s store.StoredValue) bool { return s.Name == n }) {
				missing = append(missing, n)
			}
		}
		d.Values = append(slices.Clone(contract.Required), sortedKeys(contract.Optional)...)
		if len(missing) > 0 {
			return fail("Required values are missing: " + strings.Join(missing, ", ") + "."), nil
		}
		if r.Vault != nil {
			// Every stored value must decrypt; the plaintext stays here.
			if _, err := r.Vault.ResolveValuesForDeploy(ctx, rc.env.ID); err != nil {
				if errors.Is(err, store.ErrValueDoesNotDecrypt) {
					return fail("A stored value does not decrypt with the configured keys."), nil
				}
				return stepResult{}, err
			}
		}
		if rc.run.Kind == "deploy" {
			return r.applyRelease(ctx, rc, contract, ok, fail)
		}
		return ok(), nil
	case KindProvisionDatabase:
		if db := def.Databases[d.Service]; db != nil {
			if err := r.Platform.ProvisionDatabase(ctx, platformEnv(rc.env), d.Service, db, rc.output()); err != nil {
				return r.platformFailure(ctx, err, fail)
			}
		}
		return ok(), nil
	case KindProvisionBucket:
		if b := def.Buckets[d.Service]; b != nil {
			if err := r.Platform.ProvisionBucket(ctx, platformEnv(rc.env), d.Service, b, rc.output()); err != nil {
				return r.platformFailure(ctx, err, fail)
			}
		}
		return ok(), nil
	case KindBuild, KindImport:
		a := def.Applications[d.Application]
		if a == nil {
			return ok(), nil
		}
		img, err := r.Platform.Build(ctx, platformEnv(rc.env), d.Application, a, rc.output())
		if err != nil {
			return r.platformFailure(ctx, err, func(s string) stepResult {
				return fail(fmt.Sprintf("%s of %s failed: %s", map[bool]string{true: "Import", false: "Build"}[cp.Kind == KindImport], d.Application, s))
			})
		}
		d.Image = img
		return ok(), nil
	case KindRelease:
		a := def.Applications[d.Application]
		if a == nil || a.Deployment.ReleaseCommand == nil {
			return ok(), nil
		}
		rcmd := a.Deployment.ReleaseCommand
		// Not the run's context: a cancel or shutdown lets the command
		// finish or reach its timeout instead of stopping it halfway.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rcmd.Timeout)
		err := r.Platform.Release(cctx, platformEnv(rc.env), d.Application, a, rcmd, platform.ReleaseKey{RunID: rc.run.ID, Position: cp.Position}, rc.output())
		timedOut := cctx.Err() != nil
		cancel()
		if err != nil {
			if timedOut {
				return fail(fmt.Sprintf("The release command of %s timed out after %s.", d.Application, DurationText(rcmd.Timeout))), nil
			}
			return fail(fmt.Sprintf("The release command of %s failed: %s", d.Application, err)), nil
		}
		return ok(), nil
	case KindIssueTLS:
		return r.issueTLS(ctx, rc, cp, d)
	case KindRollout:
		a := def.Applications[d.Application]
		if a == nil {
			return ok(), nil
		}
		if len(a.Routes) > 0 && rc.run.Kind == "deploy" {
			// The platform writes the application's routes: only for
			// hostnames the environment holds.
			names, why, err := r.releaseHostnames(ctx, rc, []string{d.Application})
			if err == nil && why == "" {
				why, err = r.holdsHostnames(ctx, rc, names)
			}
			if err != nil {
				return stepResult{}, err
			}
			if why != "" {
				return fail(why), nil
			}
		}
		rctx, cancel := context.WithTimeout(ctx, a.Deployment.Rollout.Timeout)
		err := r.Platform.Rollout(rctx, platformEnv(rc.env), d.Application, a, rc.output())
		timedOut := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil {
			if timedOut {
				return fail(fmt.Sprintf("%s did not become ready within its rollout timeout of %s; the previous revision stays active.", d.Application, DurationText(a.Deployment.Rollout.Timeout))), nil
			}
			return r.platformFailure(ctx, err, func(s string) stepResult {
				return fail(fmt.Sprintf("Rollout of %s failed: %s; the previous revision stays active.", d.Application, s))
			})
		}
		return ok(), nil
	case KindActivate:
		if err := r.prune(ctx, rc); err != nil {
			return r.platformFailure(ctx, err, func(s string) stepResult {
				return fail("Deleting what the removed services left failed: " + s)
			})
		}
		names, why, err := r.releaseHostnames(ctx, rc, nil)
		if err != nil {
			return stepResult{}, err
		}
		if why != "" {
			return fail(why), nil
		}
		res := ok()
		res.activate = rc.run.RevisionID
		res.activeDomains = []string{}
		res.activeHostnames = names
		cps, err := r.DB.Checkpoints(ctx, rc.run.ID)
		if err != nil {
			return stepResult{}, err
		}
		for _, c := range cps {
			if t := DecodeCheckpointDetail(c.Detail).TLS; t != nil && t.Domain != "" {
				res.activeDomains = append(res.activeDomains, t.Domain)
			}
		}
		res.detail.Revision = rc.run.Revision
		return res, nil
	case KindProbe:
		return ok(), nil
	case KindSnapshot, KindRetention, KindVerify, KindStop, KindRestore, KindStart:
		return r.backupStep(ctx, rc, cp, d, fail)
	case KindDeletePlatform:
		return r.deletePlatform(ctx, rc, ok, fail)
	}
	return fail("unknown checkpoint kind " + cp.Kind), nil
}

// platformFailure turns a platform error into a failed step, unless the
// run's own context ended (a shutdown): then the step is left to resume.
func (r *Runner) platformFailure(ctx context.Context, err error, fail func(string) stepResult) (stepResult, error) {
	if ctx.Err() != nil {
		return stepResult{}, ctx.Err()
	}
	res := fail(err.Error())
	res.platformError = true
	return res, nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
