package runs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// Checkpoint kinds of backup and restore runs.
const (
	KindSnapshot  = "snapshot"
	KindRetention = "retention"
	// KindVerify reads every file of the snapshot a restore replays and
	// checks its size and SHA-256, before anything is stopped.
	KindVerify  = "verify"
	KindStop    = "stop"
	KindRestore = "restore"
	KindStart   = "start"
)

// SnapshotDetail is a snapshot or restore checkpoint's service and file.
type SnapshotDetail struct {
	Service platform.SnapshotService `json:"service"`
	platform.SnapshotFile
}

// installationKey is the installation setting naming this installation in
// its backup targets' markers.
const installationKey = "installation_id"

// installationID returns this installation's id, generated at first use.
func installationID(ctx context.Context, db *store.DB) (string, error) {
	return db.InstallationSetting(ctx, installationKey, func() (string, error) {
		return "studio-" + strings.ToLower(rand.Text()), nil
	})
}

// snapshotDir is a snapshot's folder under its target:
// <project>/<environment>/<snapshot>.
func snapshotDir(b *store.Backup, env *store.Environment) string {
	return path.Join(env.Project, env.Name, b.Name)
}

// errRunCancelled ends a step's context when its run is asked to cancel.
var errRunCancelled = errors.New("runs: the run was asked to cancel")

// watchCancel returns a context that ends when the run is asked to cancel,
// for the steps that read whole files: a cancel stops them within a chunk
// instead of waiting for the next checkpoint. stop releases it.
func (r *Runner) watchCancel(ctx context.Context, runID int64) (cctx context.Context, cancelled func() bool, stop func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-cctx.Done():
				return
			case <-t.C:
				if run, err := r.DB.RunByID(cctx, runID); err == nil && run.CancelRequested {
					cancel(errRunCancelled)
					return
				}
			}
		}
	}()
	var stopped bool
	return cctx, func() bool { return errors.Is(context.Cause(cctx), errRunCancelled) }, func() {
		if !stopped {
			stopped = true
			close(done)
		}
		cancel(nil)
	}
}

// restoreFiles returns the files the restore checkpoints of run replay.
func (r *Runner) restoreFiles(ctx context.Context, runID int64) ([]platform.SnapshotFile, error) {
	cps, err := r.DB.Checkpoints(ctx, runID)
	if err != nil {
		return nil, err
	}
	var files []platform.SnapshotFile
	for _, cp := range cps {
		if d := DecodeCheckpointDetail(cp.Detail); cp.Kind == KindRestore && d.Snapshot != nil {
			files = append(files, d.Snapshot.SnapshotFile)
		}
	}
	return files, nil
}

// discardSnapshot removes what a snapshot that did not complete wrote, so
// that no partial directory is left looking like a snapshot. When the
// target refuses the removal (a disk remounted read-only, say), the folder
// is logged with its path and recorded with the snapshot as left over, so
// the backups page shows it until a later attempt removes it; discard then
// returns its path and why it stays. A target that is gone takes its
// files with it: nothing is recorded.
func (r *Runner) discardSnapshot(ctx context.Context, b *store.Backup, env *store.Environment) (leftover string, why error) {
	ctx = context.WithoutCancel(ctx)
	if _, err := platform.Backups(r.Platform); err != nil {
		return "", nil // nothing was written
	}
	loc, err := r.location(ctx, b, env)
	if err == nil {
		err = loc.Target.Remove(ctx, loc.Installation, loc.Dir)
	}
	var te *platform.TargetError
	switch {
	case errors.As(err, &te) && te.Gone:
		return "", nil
	case err == nil:
		if b.Leftover != "" {
			if err := r.DB.SetBackupLeftover(ctx, b.ID, ""); err != nil {
				r.warn("record that a snapshot's leftover folder was removed", "snapshot", b.Name, "err", err)
			}
		}
		return "", nil
	}
	leftover = leftoverPath(b.Target, snapshotDir(b, env))
	if b.Leftover == leftover {
		return leftover, err // recorded and logged already
	}
	r.warn("a snapshot that did not complete is left over on the backup target: its folder could not be removed",
		"snapshot", b.Name, "path", leftover, "err", err)
	if rerr := r.DB.SetBackupLeftover(ctx, b.ID, leftover); rerr != nil {
		r.warn("record a snapshot's leftover folder", "snapshot", b.Name, "path", leftover, "err", rerr)
	}
	b.Leftover = leftover
	return leftover, err
}

// leftoverPath is where a snapshot's folder is on its target, for
// people: a directory's path, or the S3 URL of its prefix.
func leftoverPath(target, dir string) string {
	if strings.HasPrefix(target, "s3://") {
		return strings.TrimSuffix(target, "/") + "/" + dir + "/"
	}
	return filepath.Join(target, filepath.FromSlash(dir))
}

// warn logs, when the runner has a logger.
func (r *Runner) warn(msg string, args ...any) {
	if r.Logger != nil {
		r.Logger.Warn(msg, args...)
	}
}

// tidyBackupTarget runs before a backup run's finishing write, so that the
// snapshots page read once the run has ended shows what is on the target:
// a backup run that failed or was cancelled before every file was written
// leaves no partial snapshot directory (one whose files were all written
// and whose retention failed keeps them), and every backup run's end tries
// again to remove the folders earlier snapshots of the environment left
// over, so that a target that is writable again is cleaned up. The run's
// own folder is removed only just after the execution renewed its lease:
// no other executor can have taken the run over and be writing it then.
func (r *Runner) tidyBackupTarget(ctx context.Context, rc *runContext, status string) error {
	run, env := rc.run, rc.env
	if run.Kind != store.RunBackup {
		return nil
	}
	if status == store.RunFailed || status == store.RunCancelled {
		cps, err := r.DB.Checkpoints(ctx, run.ID)
		if err == nil && slices.ContainsFunc(cps, func(cp store.Checkpoint) bool {
			return cp.Kind == KindSnapshot && cp.Status != store.CheckpointSucceeded
		}) {
			if b, err := r.DB.BackupByRun(ctx, run.ID); err == nil {
				ok, err := r.DB.RenewRunLease(ctx, run.ID, rc.lease, r.lease())
				if err != nil {
					return err
				}
				if !ok {
					return ErrTakenOver
				}
				r.discardSnapshot(ctx, b, env)
			}
		}
	}
	left, err := r.DB.BackupLeftovers(ctx, env.ID)
	if err != nil {
		r.warn("list the snapshots left over on the backup target", "environment", env.ID, "err", err)
		return nil
	}
	for i := range left {
		if left[i].RunID == nil || *left[i].RunID != run.ID {
			r.discardSnapshot(ctx, &left[i], env)
		}
	}
	return nil
}

// finishBackupRun is the runner's hook once a run ended: with its first
// good snapshot an environment drills weekly.
func (r *Runner) finishBackupRun(ctx context.Context, run *store.Run, env *store.Environment, status string) {
	if run.Kind != store.RunBackup {
		return
	}
	if status == store.RunSucceeded || status == store.RunSucceededWithWarnings {
		if err := r.DB.EnsureDrillSchedule(ctx, env.ID); err != nil {
			r.warn("give an environment its default drill schedule", "environment", env.ID, "err", err)
		}
	}
}

// backupStep does the work of a backup or restore checkpoint.
func (r *Runner) backupStep(ctx context.Context, rc *runContext, cp store.Checkpoint, d CheckpointDetail, fail func(string) stepResult) (stepResult, error) {
	fail = quotingPlatform(fail)
	ok := func() stepResult { return stepResult{status: store.CheckpointSucceeded, detail: d} }
	bp, err := platform.Backups(r.Platform)
	if err != nil {
		return fail(err.Error()), nil
	}
	switch cp.Kind {
	case KindSnapshot:
		b, err := r.DB.BackupByRun(ctx, rc.run.ID)
		if err != nil {
			return stepResult{}, err
		}
		if d.Snapshot == nil {
			return fail("The checkpoint names no service."), nil
		}
		loc, err := r.location(ctx, b, rc.env)
		if err != nil {
			return fail(fmt.Sprintf("The snapshot of %s failed: %s.", d.Snapshot.Service, err)), nil
		}
		// A cancel stops the snapshot while it streams: what it began is
		// aborted and discarded when the run ends.
		cctx, cancelled, stop := r.watchCancel(ctx, rc.run.ID)
		file, err := bp.Snapshot(cctx, platformEnv(rc.env), d.Snapshot.Service, loc)
		wasCancelled := cancelled()
		stop()
		if err != nil {
			if ctx.Err() != nil {
				return stepResult{}, ctx.Err() // a shutdown: the step resumes
			}
			if wasCancelled {
				return stepResult{status: store.CheckpointSkipped, detail: d,
					warning: fmt.Sprintf("Cancelled while %s was being written; nothing of this snapshot is kept.", d.Snapshot.Service)}, nil
			}
			msg := fmt.Sprintf("The snapshot of %s failed: %s.", d.Snapshot.Service, err)
			if leftover, why := r.discardSnapshot(ctx, b, rc.env); leftover != "" {
				msg += fmt.Sprintf(" What it wrote is left over at %s: it could not be removed (%s).", leftover, why)
			}
			return fail(msg), nil
		}
		d.Snapshot.SnapshotFile = file
		return ok(), nil
	case KindRetention:
		expired, err := r.DB.ExpiredBackups(ctx, rc.env.ID, r.Now())
		if err != nil {
			return stepResult{}, err
		}
		for i := range expired {
			b := &expired[i]
			if b.RunID != nil && b.Name != "" {
				var te *platform.TargetError
				// A snapshot on a target that is gone has no files left
				// to delete; it is forgotten like the others.
				loc, err := r.location(ctx, b, rc.env)
				if err == nil {
					err = loc.Target.Remove(ctx, loc.Installation, loc.Dir)
				}
				if err != nil && !(errors.As(err, &te) && te.Gone) {
					return fail(fmt.Sprintf("Retention could not delete snapshot %s: %s.", b.Name, err)), nil
				}
			}
			if err := r.DB.DeleteBackup(ctx, nil, rc.env, b); err != nil {
				return stepResult{}, err
			}
			if b.Name != "" {
				d.Removed = append(d.Removed, b.Name)
			}
		}
		return ok(), nil
	case KindVerify:
		b, err := r.DB.BackupByID(ctx, rc.env.ID, rc.det.BackupID)
		if err != nil {
			if apperr.CodeOf(err) == apperr.NotFound {
				return fail(fmt.Sprintf("The snapshot was removed before it was restored. Nothing was stopped: %s keeps running as it is.", rc.env.Name)), nil
			}
			return stepResult{}, err
		}
		files, err := r.restoreFiles(ctx, rc.run.ID)
		if err != nil {
			return stepResult{}, err
		}
		loc, err := r.location(ctx, b, rc.env)
		if err != nil {
			return fail(fmt.Sprintf("Snapshot %s cannot be restored: %s. Nothing was stopped: %s keeps running as it is.", b.Name, err, rc.env.Name)), nil
		}
		cctx, cancelled, stop := r.watchCancel(ctx, rc.run.ID)
		err = platform.VerifySnapshot(cctx, loc, files)
		wasCancelled := cancelled()
		stop()
		if err != nil {
			if ctx.Err() != nil {
				return stepResult{}, ctx.Err()
			}
			if wasCancelled {
				return stepResult{status: store.CheckpointSkipped, detail: d,
					warning: "Cancelled while the snapshot was being verified; nothing was stopped."}, nil
			}
			return fail(fmt.Sprintf("Snapshot %s cannot be restored: %s. Nothing was stopped: %s keeps running as it is.", b.Name, err, rc.env.Name)), nil
		}
		return ok(), nil
	case KindStop:
		if err := bp.StopEnvironment(ctx, platformEnv(rc.env)); err != nil {
			return r.platformFailure(ctx, err, func(s string) stepResult { return fail("Stopping the environment failed: " + s) })
		}
		res := ok()
		res.state = store.EnvironmentRestoring
		return res, nil
	case KindRestore:
		b, err := r.DB.BackupByID(ctx, rc.env.ID, rc.det.BackupID)
		if err != nil {
			if apperr.CodeOf(err) == apperr.NotFound {
				return fail("The snapshot was removed before it was restored."), nil
			}
			return stepResult{}, err
		}
		if d.Snapshot == nil {
			return fail("The checkpoint names no service."), nil
		}
		loc, err := r.location(ctx, b, rc.env)
		if err != nil {
			return fail(fmt.Sprintf("Restoring %s failed: %s. The environment stays down until a restore completes or an admin accepts the data as it is.", d.Snapshot.Service, err)), nil
		}
		cctx, cancelled, stop := r.watchCancel(ctx, rc.run.ID)
		err = bp.Restore(cctx, platformEnv(rc.env), d.Snapshot.Service, loc, d.Snapshot.SnapshotFile)
		wasCancelled := cancelled()
		stop()
		if err != nil {
			if ctx.Err() != nil {
				return stepResult{}, ctx.Err()
			}
			if wasCancelled {
				return stepResult{status: store.CheckpointSkipped, detail: d,
					warning: fmt.Sprintf("Cancelled while %s was being restored; %s stays down until a restore completes or an admin accepts the data as it is.", d.Snapshot.Service, rc.env.Name)}, nil
			}
			return fail(fmt.Sprintf("Restoring %s failed: %s. The environment stays down until a restore completes or an admin accepts the data as it is.", d.Snapshot.Service, err)), nil
		}
		return ok(), nil
	case KindStart:
		if err := bp.StartEnvironment(ctx, platformEnv(rc.env)); err != nil {
			return r.platformFailure(ctx, err, func(s string) stepResult { return fail("Starting the environment failed: " + s) })
		}
		res := ok()
		res.state = store.EnvironmentActive
		return res, nil
	}
	return fail("unknown checkpoint kind " + cp.Kind), nil
}

// restoreOutcomeState is the environment state a finished run leaves: a
// restore that stopped the environment and did not start it again leaves
// it down.
func restoreOutcomeState(run *store.Run, status string, cps []store.Checkpoint) string {
	if run.Kind != store.RunRestore || status == store.RunSucceeded || status == store.RunSucceededWithWarnings {
		return ""
	}
	stopped, started := false, false
	for _, cp := range cps {
		stopped = stopped || cp.Kind == KindStop && cp.Status == store.CheckpointSucceeded
		started = started || cp.Kind == KindStart && cp.Status == store.CheckpointSucceeded
	}
	if stopped && !started {
		return store.EnvironmentRestoreFailed
	}
	return ""
}
