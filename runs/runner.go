package runs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/store"
)

// Runner executes runs checkpoint by checkpoint. The checkpoint rows are
// the truth: a finished checkpoint is never done again, so a run that a
// killed process left behind resumes where it stopped.
type Runner struct {
	DB       *store.DB
	Vault    *store.Vault
	Platform Platform
	// Now is the clock of every decision (deadlines, backoff); tests
	// replace it.
	Now    func() time.Time
	Logger *slog.Logger
	// YieldAfter is how long one execution works before it gives its job
	// back (default a minute), so River never takes a live execution for
	// the job of a killed process.
	YieldAfter time.Duration
}

// Result is where Execute left a run: finished, or waiting until a time.
type Result struct {
	Finished  bool
	WaitUntil time.Time
}

// ErrTakenOver means another executor changed the run while this one
// worked on it; this one stops.
var ErrTakenOver = errors.New("runs: the run was changed by another executor")

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
	// state is the environment's new state (a restore stops and starts it).
	state string
}

// runContext is what the steps of one Execute share.
type runContext struct {
	run *store.Run
	det RunDetail
	env *store.Environment
	def *compiler.Definition
	// detDirty: det changed and is not stored yet.
	detDirty bool
}

// Execute works on the run until it finishes or has to wait.
func (r *Runner) Execute(ctx context.Context, runID int64) (Result, error) {
	run, err := r.DB.RunByID(ctx, runID)
	if err != nil {
		return Result{}, err
	}
	if store.RunFinished(run.Status) {
		return Result{Finished: true}, nil
	}
	rc := &runContext{run: run, det: DecodeRunDetail(run.Detail)}
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
		if cancel, _, err = r.DB.ApplyRunChangeCancel(ctx, store.RunChange{RunID: runID, Status: store.RunRunning}); err != nil {
			return Result{}, err
		}
	}
	began := time.Now()
	for _, cp := range cps {
		if store.CheckpointDone(cp.Status) {
			continue
		}
		// A long run gives its job back now and then, so River never
		// takes a live execution for the job of a killed process.
		if time.Since(began) > cmp.Or(r.YieldAfter, time.Minute) {
			return Result{WaitUntil: r.Now()}, nil
		}
		// A safe point: between checkpoints (a release command that runs
		// is never stopped halfway; it is inside one step).
		if cancel {
			if cp.Status == store.CheckpointWaiting {
				// A wait is a safe point too: the checkpoint ends there.
				d := DecodeCheckpointDetail(cp.Detail)
				if _, err := r.record(ctx, rc, cp, stepResult{status: store.CheckpointSkipped, warning: "cancelled while waiting", detail: d}); err != nil {
					return Result{}, err
				}
				return r.finish(ctx, rc, store.RunCancelled, fmt.Sprintf("Cancelled while %s waited.", cp.Name), nil)
			}
			return r.finish(ctx, rc, store.RunCancelled, fmt.Sprintf("Cancelled before %s.", cp.Name), nil)
		}
		if cp.Kind == KindRelease && cp.Status == store.CheckpointRunning {
			// The process that ran it stopped; a release command runs once
			// per deployment and is never retried on its own.
			res := stepResult{status: store.CheckpointFailed, detail: DecodeCheckpointDetail(cp.Detail),
				reason: "The Studio stopped while the release command of " + DecodeCheckpointDetail(cp.Detail).Application + " ran; it is not run again by itself. Deploy again."}
			res.detail.Error = res.reason
			if _, err := r.record(ctx, rc, cp, res); err != nil {
				return Result{}, err
			}
			return r.finish(ctx, rc, store.RunFailed, res.reason, &res)
		}
		if cp.Status == store.CheckpointPending || cp.Kind == KindRelease {
			var ok bool
			if cancel, ok, err = r.DB.ApplyRunChangeCancel(ctx, store.RunChange{RunID: runID, Checkpoint: &store.CheckpointChange{
				Position: cp.Position, Status: store.CheckpointRunning, From: []string{store.CheckpointPending}}}); err != nil {
				return Result{}, err
			} else if !ok {
				return Result{}, ErrTakenOver
			}
		}
		res, err := r.step(ctx, rc, cp)
		if err != nil {
			return Result{}, err
		}
		if res.status == store.CheckpointWaiting {
			if _, err := r.DB.ApplyRunChange(ctx, store.RunChange{RunID: runID, Status: store.RunWaiting, Detail: rc.dirtyDetail(),
				Checkpoint: &store.CheckpointChange{Position: cp.Position, Status: store.CheckpointWaiting, Warning: res.warning, Detail: res.detail,
					From: []string{store.CheckpointRunning, store.CheckpointWaiting}},
				Certificate: res.cert, ServiceState: res.service}); err != nil {
				return Result{}, err
			}
			return Result{WaitUntil: res.until}, nil
		}
		if cancel, err = r.record(ctx, rc, cp, res); err != nil {
			return Result{}, err
		}
		if res.status == store.CheckpointFailed {
			return r.finish(ctx, rc, store.RunFailed, res.reason, &res)
		}
	}
	return r.finish(ctx, rc, "", "", nil)
}

// record stores a finished checkpoint and reports whether the run has
// been asked to cancel.
func (r *Runner) record(ctx context.Context, rc *runContext, cp store.Checkpoint, res stepResult) (bool, error) {
	cancel, ok, err := r.DB.ApplyRunChangeCancel(ctx, store.RunChange{RunID: rc.run.ID, Detail: rc.dirtyDetail(),
		Checkpoint: &store.CheckpointChange{Position: cp.Position, Status: res.status, Warning: res.warning, Detail: res.detail,
			From: []string{store.CheckpointRunning, store.CheckpointWaiting}},
		Certificate: res.cert, ServiceState: res.service, Activate: res.activate, ActiveDomains: res.activeDomains,
		EnvironmentState: res.state})
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
	cps, err := r.DB.Checkpoints(ctx, rc.run.ID)
	if err != nil {
		return Result{}, err
	}
	det := rc.det
	det.Deferred, det.Warnings = 0, 0
	for _, cp := range cps {
		if cp.Warning != "" {
			det.Warnings++
		}
		if cp.Kind == KindIssueTLS && cp.Status == store.CheckpointSkipped && strings.HasPrefix(cp.Warning, "TLS deferred") {
			det.Deferred++
		}
	}
	if status == "" {
		status = store.RunSucceeded
		if det.Warnings > 0 {
			status = store.RunSucceededWithWarnings
		}
	}
	det.Summary = Summary(rc.run, status, reason, cps)
	change := store.RunChange{RunID: rc.run.ID, Status: status, Reason: reason, Detail: det}
	change.EnvironmentState = restoreOutcomeState(rc.run, status, cps)
	if failed != nil && failed.converge && rc.run.Kind == "deploy" && rc.run.FromRevisionID == nil && rc.env.ActiveRevisionID == nil {
		change.Converging = rc.run.RevisionID
	}
	if _, err := r.DB.ApplyRunChange(ctx, change); err != nil {
		return Result{}, err
	}
	r.discardUnfinishedSnapshot(ctx, rc.run, rc.env, status)
	return Result{Finished: true}, nil
}

// Summary is a run's plain-text summary, like the CLI's ready summary.
func Summary(run *store.Run, status, reason string, cps []store.Checkpoint) string {
	var b strings.Builder
	what := run.Kind
	if run.Revision > 0 {
		what += fmt.Sprintf(" of revision %d", run.Revision)
	}
	fmt.Fprintf(&b, "%s: %s\n", what, StatusText(status))
	deferred := 0
	var warnings []string
	for _, cp := range cps {
		d := DecodeCheckpointDetail(cp.Detail)
		if cp.Kind == KindIssueTLS && d.TLS != nil {
			state := ""
			switch {
			case cp.Status == store.CheckpointSkipped && strings.HasPrefix(cp.Warning, "TLS deferred"):
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
	case KindCheckValues:
		contract := def.ValueContract()
		stored, err := r.DB.StoredValues(ctx, rc.env.ID)
		if err != nil {
			return stepResult{}, err
		}
		var missing []string
		for _, n := range contract.Required {
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
		return ok(), nil
	case KindProvisionDatabase:
		if db := def.Databases[d.Service]; db != nil {
			if err := r.Platform.ProvisionDatabase(ctx, rc.env.ID, d.Service, db); err != nil {
				return r.platformFailure(ctx, err, fail)
			}
		}
		return ok(), nil
	case KindProvisionBucket:
		if b := def.Buckets[d.Service]; b != nil {
			if err := r.Platform.ProvisionBucket(ctx, rc.env.ID, d.Service, b); err != nil {
				return r.platformFailure(ctx, err, fail)
			}
		}
		return ok(), nil
	case KindBuild, KindImport:
		a := def.Applications[d.Application]
		if a == nil {
			return ok(), nil
		}
		img, err := r.Platform.Build(ctx, rc.env.ID, d.Application, a)
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
		err := r.Platform.Release(cctx, rc.env.ID, d.Application, rcmd)
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
		rctx, cancel := context.WithTimeout(ctx, a.Deployment.Rollout.Timeout)
		err := r.Platform.Rollout(rctx, rc.env.ID, d.Application, a)
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
		res := ok()
		res.activate = rc.run.RevisionID
		res.activeDomains = []string{}
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
	}
	return fail("unknown checkpoint kind " + cp.Kind), nil
}

// platformFailure turns a platform error into a failed step, unless the
// run's own context ended (a shutdown): then the step is left to resume.
func (r *Runner) platformFailure(ctx context.Context, err error, fail func(string) stepResult) (stepResult, error) {
	if ctx.Err() != nil {
		return stepResult{}, ctx.Err()
	}
	return fail(err.Error()), nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
