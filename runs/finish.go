package runs

// How a run ends: its status, what the environment becomes, and the
// summary people and the CLI read.

import (
	"context"
	"fmt"
	"strings"

	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/store"
)

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
	if rc.run.Kind == store.RunDelete && status == store.RunSucceeded {
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
	if failed != nil && failed.converge && rc.run.Kind == store.RunDeploy && rc.run.FromRevisionID == nil && rc.env.ActiveRevisionID == nil {
		change.Converging = rc.run.RevisionID
	}
	change.Lease = rc.lease
	if err := r.tidyBackupTarget(ctx, rc, status); err != nil {
		return Result{}, err
	}
	if _, ok, err := r.apply(ctx, change); err != nil {
		return Result{}, err
	} else if !ok {
		return Result{}, ErrTakenOver
	}
	r.finishBackupRun(ctx, rc.run, rc.env, status)
	r.finishDrillRun(rc.run)
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
	what := string(run.Kind)
	if run.Revision > 0 {
		what += fmt.Sprintf(" of revision %d", run.Revision)
		if run.Kind == store.RunDeploy && (DecodeRunDetail(run.Detail).Rollback || run.ReleaseOf != nil) {
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
