package runs

import (
	"context"
	"errors"
	"fmt"

	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// stepProvisionDatabase provisions a database the definition declares.
func (r *Runner) stepProvisionDatabase(ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
	if db := st.def.Databases[st.d.Service]; db != nil {
		if err := r.Platform.ProvisionDatabase(ctx, platformEnv(rc.env), st.d.Service, db, rc.output()); err != nil {
			return r.platformFailure(ctx, err, st.fail)
		}
	}
	return st.ok(), nil
}

// stepProvisionBucket provisions a bucket the definition declares.
func (r *Runner) stepProvisionBucket(ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
	if b := st.def.Buckets[st.d.Service]; b != nil {
		if err := r.Platform.ProvisionBucket(ctx, platformEnv(rc.env), st.d.Service, b, rc.output()); err != nil {
			return r.platformFailure(ctx, err, st.fail)
		}
	}
	return st.ok(), nil
}

// stepBuild builds (or imports) an application's image.
func (r *Runner) stepBuild(ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
	a := st.def.Applications[st.d.Application]
	if a == nil {
		return st.ok(), nil
	}
	img, err := r.Platform.Build(ctx, platformEnv(rc.env), st.d.Application, a, rc.output())
	if err != nil {
		return r.platformFailure(ctx, err, func(s string) stepResult {
			return st.fail(fmt.Sprintf("%s of %s failed: %s", map[bool]string{true: "Import", false: "Build"}[st.cp.Kind == KindImport], st.d.Application, s))
		})
	}
	st.d.Image = img
	return st.ok(), nil
}

// stepRelease runs an application's release command, once: not stopped by a cancel or a shutdown, only by its own timeout.
func (r *Runner) stepRelease(ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
	a := st.def.Applications[st.d.Application]
	if a == nil || a.Deployment.ReleaseCommand == nil {
		return st.ok(), nil
	}
	rcmd := a.Deployment.ReleaseCommand
	// Not the run's context: a cancel or shutdown lets the command
	// finish or reach its timeout instead of stopping it halfway.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rcmd.Timeout)
	err := r.Platform.Release(cctx, platformEnv(rc.env), st.d.Application, a, rcmd, platform.ReleaseKey{RunID: rc.run.ID, Position: st.cp.Position}, rc.output())
	timedOut := cctx.Err() != nil
	cancel()
	if err != nil {
		if timedOut {
			return st.fail(fmt.Sprintf("The release command of %s timed out after %s.", st.d.Application, humanize.ManifestDuration(rcmd.Timeout))), nil
		}
		return st.fail(fmt.Sprintf("The release command of %s failed: %s", st.d.Application, err)), nil
	}
	return st.ok(), nil
}

// stepRollout rolls an application out within its rollout timeout, after checking the environment holds the hostnames its routes serve.
func (r *Runner) stepRollout(ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
	a := st.def.Applications[st.d.Application]
	if a == nil {
		return st.ok(), nil
	}
	if len(a.Routes) > 0 && rc.run.Kind == store.RunDeploy {
		// The platform writes the application's routes: only for
		// hostnames the environment holds.
		names, why, err := r.releaseHostnames(ctx, rc, []string{st.d.Application})
		if err == nil && why == "" {
			why, err = r.holdsHostnames(ctx, rc, names)
		}
		if err != nil {
			return stepResult{}, err
		}
		if why != "" {
			return st.fail(why), nil
		}
	}
	rctx, cancel := context.WithTimeout(ctx, a.Deployment.Rollout.Timeout)
	err := r.Platform.Rollout(rctx, platformEnv(rc.env), st.d.Application, a, rc.output())
	timedOut := rctx.Err() != nil && ctx.Err() == nil
	cancel()
	if err != nil {
		if timedOut {
			reason := fmt.Sprintf("%s did not become ready within its rollout timeout of %s", st.d.Application, humanize.ManifestDuration(a.Deployment.Rollout.Timeout))
			var stalled *platform.StalledError
			if !errors.As(err, &stalled) {
				return st.fail(reason + "; the previous revision stays active."), nil
			}
			// What the pods showed quotes the platform: masked.
			return quotingPlatform(st.fail)(reason + ": " + stalled.Why + "; the previous revision stays active."), nil
		}
		return r.platformFailure(ctx, err, func(s string) stepResult {
			return st.fail(fmt.Sprintf("Rollout of %s failed: %s; the previous revision stays active.", st.d.Application, s))
		})
	}
	return st.ok(), nil
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
