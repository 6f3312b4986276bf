package runs

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/store"
)

// Checkpoint kinds of backup and restore runs.
const (
	KindSnapshot  = "snapshot"
	KindRetention = "retention"
	KindStop      = "stop"
	KindRestore   = "restore"
	KindStart     = "start"
)

// SnapshotDetail is a snapshot or restore checkpoint's service and file.
type SnapshotDetail struct {
	Service SnapshotService `json:"service"`
	SnapshotFile
}

// snapshotDir is where a snapshot's files live:
// <target>/<project>/<environment>/<snapshot>.
func snapshotDir(b *store.Backup, env *store.Environment) string {
	return filepath.Join(b.Target, env.Project, env.Name, b.Name)
}

// backupStep does the work of a backup or restore checkpoint.
func (r *Runner) backupStep(ctx context.Context, rc *runContext, cp store.Checkpoint, d CheckpointDetail, fail func(string) stepResult) (stepResult, error) {
	ok := func() stepResult { return stepResult{status: store.CheckpointSucceeded, detail: d} }
	switch cp.Kind {
	case KindSnapshot:
		b, err := r.DB.BackupByRun(ctx, rc.run.ID)
		if err != nil {
			return stepResult{}, err
		}
		if d.Snapshot == nil {
			return fail("The checkpoint names no service."), nil
		}
		file, err := r.Platform.Snapshot(ctx, rc.env.ID, d.Snapshot.Service, snapshotDir(b, rc.env))
		if err != nil {
			return r.platformFailure(ctx, err, func(s string) stepResult {
				return fail(fmt.Sprintf("The snapshot of %s failed: %s", d.Snapshot.Service, s))
			})
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
				if err := r.Platform.RemoveSnapshot(ctx, snapshotDir(b, rc.env)); err != nil {
					return fail(fmt.Sprintf("Retention could not delete snapshot %s: %s", b.Name, err)), nil
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
	case KindStop:
		if err := r.Platform.StopEnvironment(ctx, rc.env.ID); err != nil {
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
		if err := r.Platform.Restore(ctx, rc.env.ID, d.Snapshot.Service, snapshotDir(b, rc.env), d.Snapshot.SnapshotFile); err != nil {
			return r.platformFailure(ctx, err, func(s string) stepResult {
				return fail(fmt.Sprintf("Restoring %s failed: %s. The environment stays down until a restore completes or an admin accepts the data as it is.", d.Snapshot.Service, s))
			})
		}
		return ok(), nil
	case KindStart:
		if err := r.Platform.StartEnvironment(ctx, rc.env.ID); err != nil {
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
	if run.Kind != "restore" || status == store.RunSucceeded || status == store.RunSucceededWithWarnings {
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
