package runs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// Checkpoint kinds of restore drills.
const (
	// KindDrillRestore restores one service of the snapshot into the
	// drill's scratch directory and checks it against the snapshot.
	KindDrillRestore = "drill-restore"
	// KindDrillCleanup removes the scratch directory (the run's end
	// removes it too, when the drill failed or was cancelled).
	KindDrillCleanup = "drill-cleanup"
)

// StartDrill starts a restore drill of env: its newest successful
// snapshot is restored into a scratch place of the drill's own and
// checked, then the scratch place is removed. A drill never stops or
// changes the environment. a is nil for a scheduled drill.
func (s *Service) StartDrill(ctx context.Context, a store.Actor, env *store.Environment) (*store.Run, error) {
	nr, refusal, err := s.drillRun(ctx, env)
	if err != nil {
		return nil, err
	}
	if refusal != "" {
		return nil, &BackupRefusal{Message: refusal}
	}
	nr.AuditAction = "backup.drill-started"
	nr.AuditDetail["origin"] = "manual"
	return s.DB.CreateRun(ctx, a, env, *nr)
}

// drillRun builds the drill run of env's newest good snapshot, or says
// why no drill can run now.
func (s *Service) drillRun(ctx context.Context, env *store.Environment) (*store.NewRun, string, error) {
	if _, err := platform.Drills(s.Platform); err != nil {
		return nil, sentence(err.Error()), nil
	}
	b, err := s.DB.NewestGoodBackup(ctx, env.ID)
	if err != nil {
		return nil, "", err
	}
	if b == nil {
		return nil, env.Name + " has no completed snapshot yet: there is nothing to drill.", nil
	}
	if busy, err := s.DB.HasUnfinishedRunOf(ctx, env.ID, store.RunDrill); err != nil {
		return nil, "", err
	} else if busy {
		return nil, fmt.Sprintf("A restore drill of %s is still running. Wait for it to finish.", env.Name), nil
	}
	files, err := s.snapshotFiles(ctx, b)
	if err != nil {
		return nil, "", err
	}
	if len(files) == 0 {
		return nil, "Snapshot " + b.Name + " recorded no files: there is nothing to drill.", nil
	}
	var cps []store.NewCheckpoint
	for _, d := range files {
		cps = append(cps, store.NewCheckpoint{Kind: KindDrillRestore, Name: "Restore " + d.Service.String() + " into scratch",
			Detail: CheckpointDetail{Service: d.Service.Name, Snapshot: &d}})
	}
	cps = append(cps, store.NewCheckpoint{Kind: KindDrillCleanup, Name: "Remove the scratch place"})
	return &store.NewRun{EnvironmentID: env.ID, Kind: store.RunDrill, RevisionID: env.ActiveRevisionID,
		Checkpoints: cps, Detail: RunDetail{BackupID: b.ID}, AuditDetail: map[string]any{"snapshot": b.Name},
		Enqueue: s.enqueue()}, "", nil
}

// SetDrillSchedule validates and stores env's drill schedule (admins): a
// five-field cron expression in UTC, or "" to turn drills off. Nothing
// changes when it is wrong.
func (s *Service) SetDrillSchedule(ctx context.Context, a store.Actor, env *store.Environment, cronText string) error {
	if strings.TrimSpace(cronText) == "" {
		return s.DB.SetDrillSchedule(ctx, a, env, "", 0)
	}
	c, err := ParseCron(cronText)
	if err != nil {
		return &BackupRefusal{Field: "drill-cron", Message: err.Error()}
	}
	if c.Next(s.Now()).IsZero() {
		return &BackupRefusal{Field: "drill-cron", Message: fmt.Sprintf("%q never fires (no such date).", c.Expr)}
	}
	if _, err := platform.Drills(s.Platform); err != nil {
		return &BackupRefusal{Message: sentence(err.Error())}
	}
	return s.DB.SetDrillSchedule(ctx, a, env, c.Expr, c.Interval(s.Now()))
}

// FireDueDrills claims every drill schedule's due fires (see
// store.FireDrillSchedule): any number of Studio processes may call it at
// once; each fire starts at most one drill. The backup scheduler's River
// job calls it after the backup fires.
func (s *Service) FireDueDrills(ctx context.Context) error {
	now := s.Now()
	ids, err := s.DB.DueDrillSchedules(ctx, now)
	if err != nil {
		return err
	}
	for _, id := range ids {
		_, err := s.DB.FireDrillSchedule(ctx, store.DrillFire{
			EnvironmentID: id,
			Fires: func(expr string, after time.Time) []time.Time {
				c, err := ParseCron(expr)
				if err != nil {
					return nil
				}
				return c.Between(after, now)
			},
			Drill: func(env *store.Environment) (*store.NewRun, string, error) {
				nr, why, err := s.drillRun(ctx, env)
				if nr != nil {
					nr.AuditDetail["origin"] = "scheduled"
				}
				return nr, why, err
			},
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// drillScratch is the scratch directory of drill run runID: of the drill
// alone, never a place of the environment.
func (r *Runner) drillScratch(runID int64) string {
	dir := r.ScratchDir
	if dir == "" {
		dir = os.TempDir()
	}
	return filepath.Join(dir, fmt.Sprintf("skali-drill-run-%d", runID))
}

// stepDrillRestore restores one service of the drilled snapshot into
// the scratch directory and checks every object it restored.
func (r *Runner) stepDrillRestore(ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
	fail := quotingPlatform(st.fail)
	dp, err := platform.Drills(r.Platform)
	if err != nil {
		return fail(sentence(err.Error())), nil
	}
	b, err := r.DB.BackupByID(ctx, rc.env.ID, rc.det.BackupID)
	if err != nil {
		if apperr.CodeOf(err) == apperr.NotFound {
			return fail("The snapshot was removed before the drill restored it."), nil
		}
		return stepResult{}, err
	}
	if st.d.Snapshot == nil {
		return fail("The checkpoint names no service."), nil
	}
	svc := st.d.Snapshot.Service
	loc, err := r.location(ctx, b, rc.env)
	if err != nil {
		return fail(fmt.Sprintf("The drill of snapshot %s could not read %s: %s. %s was not touched.", b.Name, svc, err, rc.env.Name)), nil
	}
	scratch := r.drillScratch(rc.run.ID)
	// A checkpoint done again after a restart starts from a clean place.
	dir := filepath.Join(scratch, st.cp.Name)
	if err := os.RemoveAll(dir); err != nil {
		return stepResult{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(fmt.Sprintf("The drill's scratch directory cannot be made: %s.", pathErr(err))), nil
	}
	cctx, cancelled, stop := r.watchCancel(ctx, rc.run.ID)
	check, err := dp.RestoreScratch(cctx, platformEnv(rc.env), svc, loc, st.d.Snapshot.SnapshotFile, dir)
	wasCancelled := cancelled()
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return stepResult{}, ctx.Err()
		}
		if wasCancelled {
			return stepResult{status: store.CheckpointSkipped, detail: st.d,
				warning: fmt.Sprintf("Cancelled while %s was being restored into scratch; %s was not touched.", svc, rc.env.Name)}, nil
		}
		var fe *platform.SnapshotFileError
		if errors.As(err, &fe) {
			return fail(fmt.Sprintf("The drill of snapshot %s failed: its file %s (%s). %s was not touched.", b.Name, fe, svc, rc.env.Name)), nil
		}
		return fail(fmt.Sprintf("The drill of snapshot %s failed restoring %s: %s. %s was not touched.", b.Name, svc, err, rc.env.Name)), nil
	}
	st.d.Drill = &check
	return st.ok(), nil
}

// pathErr is an OS error's words.
func pathErr(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// stepDrillCleanup removes the drill's scratch directory.
func (r *Runner) stepDrillCleanup(ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
	if err := os.RemoveAll(r.drillScratch(rc.run.ID)); err != nil {
		return st.fail(fmt.Sprintf("The drill's scratch directory %s could not be removed: %s.", r.drillScratch(rc.run.ID), pathErr(err))), nil
	}
	return st.ok(), nil
}

// finishDrillRun removes a drill's scratch directory whatever its end
// (a failed or cancelled drill never reaches its cleanup checkpoint).
func (r *Runner) finishDrillRun(run *store.Run) {
	if run.Kind != store.RunDrill {
		return
	}
	if err := os.RemoveAll(r.drillScratch(run.ID)); err != nil {
		r.warn("remove a restore drill's scratch directory", "run", run.ID, "path", r.drillScratch(run.ID), "err", err)
	}
}

// DrillSummary is what a succeeded drill proved: the objects and bytes
// restored and checked, the tables and rows when the platform counts them.
type DrillSummary struct {
	Objects int
	Bytes   int64
	Counted bool
	Tables  int
	Rows    int64
}

// SummarizeDrill adds up the checks of a drill run's checkpoints.
func SummarizeDrill(cps []store.Checkpoint) DrillSummary {
	var s DrillSummary
	for _, cp := range cps {
		d := DecodeCheckpointDetail(cp.Detail)
		if cp.Kind != KindDrillRestore || d.Drill == nil {
			continue
		}
		s.Objects += d.Drill.Objects
		s.Bytes += d.Drill.Bytes
		if d.Drill.Counted {
			s.Counted = true
			s.Tables += d.Drill.Tables
			s.Rows += d.Drill.Rows
		}
	}
	return s
}
