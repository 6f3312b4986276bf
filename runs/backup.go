package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// BackupRefusal is a backup action that cannot happen as asked, with the
// form field it concerns ("target", "cron", "keep", "confirm" or ""), and
// whether the cure is an installation admin setting the backup target.
type BackupRefusal struct {
	Field     string
	Message   string
	NoTarget  bool
	ErrorCode apperr.Code
	// Also is a refusal of another field of the same form (a schedule with
	// a bad cron and a bad retention), so both show at once.
	Also *BackupRefusal
}

func (e *BackupRefusal) Error() string { return e.Message }

// NoTargetMessage says that backups wait for an installation admin.
const NoTargetMessage = "Backups are off: this installation has no backup target. An installation admin must set one first."

// SnapshotServices lists what a snapshot of def covers: every database,
// bucket and volume, in that order.
func SnapshotServices(def *compiler.Definition) []platform.SnapshotService {
	if def == nil {
		return nil
	}
	var out []platform.SnapshotService
	for _, n := range slices.Sorted(maps.Keys(def.Databases)) {
		out = append(out, platform.SnapshotService{Kind: "database", Name: n})
	}
	for _, n := range slices.Sorted(maps.Keys(def.Buckets)) {
		out = append(out, platform.SnapshotService{Kind: "bucket", Name: n})
	}
	for _, app := range slices.Sorted(maps.Keys(def.Applications)) {
		for _, v := range slices.Sorted(maps.Keys(def.Applications[app].Volumes)) {
			out = append(out, platform.SnapshotService{Kind: "volume", Name: app + "/" + v})
		}
	}
	return out
}

// CannotSnapshot says which services of def platform p cannot snapshot,
// and why, as one sentence; "" when it can take them all.
func CannotSnapshot(p platform.Platform, def *compiler.Definition) string {
	l, ok := platform.As[platform.SnapshotLimiter](p)
	if !ok {
		return ""
	}
	var whys []string
	names := map[string][]string{}
	for _, svc := range SnapshotServices(def) {
		why := l.CannotSnapshot(svc)
		if why == "" {
			continue
		}
		if names[why] == nil {
			whys = append(whys, why)
		}
		names[why] = append(names[why], svc.Name)
	}
	var parts []string
	for _, why := range whys {
		parts = append(parts, why+" ("+strings.Join(names[why], ", ")+")")
	}
	if parts == nil {
		return ""
	}
	return sentence(strings.Join(parts, "; ") + ": backups are not turned on, so that no snapshot leaves them out")
}

const nothingToSnapshot = "The latest revision declares no database, bucket or volume: there is nothing to snapshot."

// TargetProblem says why snapshots cannot be written to the installation's
// backup target now (gone, unmounted, another installation's, read-only),
// or "" when they can or no target is set.
func (s *Service) TargetProblem(ctx context.Context) (string, error) {
	target, err := s.DB.BackupTarget(ctx)
	if err != nil || target == "" {
		return "", err
	}
	inst, err := installationID(ctx, s.DB)
	if err != nil {
		return "", err
	}
	if _, err := platform.Backups(s.Platform); err != nil {
		return err.Error(), nil
	}
	// Pages ask: a target that does not answer soon reads as unreachable.
	ctx, cancel := context.WithTimeout(ctx, targetCheckTimeout)
	defer cancel()
	t, err := s.Runner.openTarget(ctx, target)
	if err == nil {
		err = t.Check(ctx, inst, true)
	}
	var te *platform.TargetError
	if errors.As(err, &te) {
		return sentence(err.Error()), nil
	}
	return "", err
}

// targetCheckTimeout bounds the checks of a target that pages make.
const targetCheckTimeout = 10 * time.Second

// Sentence starts text with a capital and ends it with a full stop.
func Sentence(text string) string { return sentence(text) }

// sentence starts text with a capital and ends it with a full stop.
func sentence(text string) string {
	if text == "" {
		return ""
	}
	text = strings.ToUpper(text[:1]) + text[1:]
	if !strings.HasSuffix(text, ".") {
		text += "."
	}
	return text
}

// requireSnapshotable refuses backups of env without a target or with
// nothing to snapshot in its latest revision.
func (s *Service) requireSnapshotable(ctx context.Context, env *store.Environment) (string, error) {
	// A platform that cannot snapshot says so when a schedule is saved,
	// not at its first fire.
	if _, err := platform.Backups(s.Platform); err != nil {
		return "", &BackupRefusal{Message: sentence(err.Error())}
	}
	target, err := s.DB.BackupTarget(ctx)
	if err != nil {
		return "", err
	}
	if target == "" {
		return "", &BackupRefusal{Message: NoTargetMessage, NoTarget: true}
	}
	latest, err := s.DB.LatestRevision(ctx, env.ProjectID)
	if err != nil {
		return "", err
	}
	if len(SnapshotServices(latest.Definition)) == 0 {
		return "", &BackupRefusal{Message: nothingToSnapshot}
	}
	if msg := CannotSnapshot(s.Platform, latest.Definition); msg != "" {
		return "", &BackupRefusal{Message: msg}
	}
	return target, nil
}

// SetBackupSchedule validates and stores env's schedule: a five-field cron
// expression in UTC and a retention. Nothing changes when either is wrong.
func (s *Service) SetBackupSchedule(ctx context.Context, a store.Actor, env *store.Environment, cronText, keepText string) error {
	// Both fields are checked, so that two mistakes show at once.
	var keepRefusal *BackupRefusal
	keep, err := ParseRetention(keepText)
	if err != nil {
		keepRefusal = &BackupRefusal{Field: "keep", Message: err.Error()}
	}
	c, err := ParseCron(cronText)
	if err != nil {
		return &BackupRefusal{Field: "cron", Message: err.Error(), Also: keepRefusal}
	}
	if c.Next(s.Now()).IsZero() {
		return &BackupRefusal{Field: "cron", Message: fmt.Sprintf("%q never fires (no such date).", c.Expr), Also: keepRefusal}
	}
	if keepRefusal != nil {
		return keepRefusal
	}
	if _, err := s.requireSnapshotable(ctx, env); err != nil {
		return err
	}
	return s.DB.SetBackupSchedule(ctx, a, env, c.Expr, strings.TrimSpace(keepText), keep, c.Interval(s.Now()))
}

// snapshotName names a snapshot's directory by its time (and origin).
func snapshotName(at time.Time, origin string) string {
	name := at.UTC().Format("20060102T150405Z") + "-" + origin
	if origin == "manual" {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		name += "-" + hex.EncodeToString(b)
	}
	return name
}

// snapshot builds the snapshot of env's active revision.
func (s *Service) snapshot(ctx context.Context, env *store.Environment, target, origin string, at time.Time, keep string) (*store.Snapshot, string, error) {
	if env.ActiveRevisionID == nil {
		return nil, "nothing deployed yet", nil
	}
	rev, err := s.DB.RevisionByID(ctx, *env.ActiveRevisionID)
	if err != nil {
		return nil, "", err
	}
	services := SnapshotServices(rev.Definition)
	if len(services) == 0 {
		return nil, "the deployed revision has nothing to snapshot", nil
	}
	var cps []store.NewCheckpoint
	for _, svc := range services {
		cps = append(cps, store.NewCheckpoint{Kind: KindSnapshot, Name: "Snapshot " + svc.String(),
			Detail: CheckpointDetail{Service: svc.Name, Snapshot: &SnapshotDetail{Service: svc}}})
	}
	if origin == "scheduled" {
		cps = append(cps, store.NewCheckpoint{Kind: KindRetention, Name: "Apply retention (keep " + keep + ")"})
	}
	nr := store.NewRun{EnvironmentID: env.ID, Kind: store.RunBackup, RevisionID: &rev.ID, Checkpoints: cps, Enqueue: s.enqueue()}
	if origin == "manual" {
		nr.AuditAction = "backup.created"
		nr.AuditDetail = map[string]any{"origin": "manual"}
	}
	return &store.Snapshot{Run: nr, Name: snapshotName(at, origin), Target: target}, "", nil
}

// StartBackup takes a manual snapshot of env (deployers and admins).
func (s *Service) StartBackup(ctx context.Context, a store.Actor, env *store.Environment) (*store.Run, error) {
	target, err := s.requireSnapshotable(ctx, env)
	if err != nil {
		return nil, err
	}
	if env.ActiveRevisionID == nil {
		return nil, &BackupRefusal{Message: env.Name + " has never been deployed: there is nothing to snapshot yet."}
	}
	if env.State != store.EnvironmentActive {
		return nil, &BackupRefusal{Message: fmt.Sprintf("%s is %s; snapshots wait until it is active again.", env.Name, env.State)}
	}
	snap, reason, err := s.snapshot(ctx, env, target, "manual", s.Now(), "")
	if err != nil {
		return nil, err
	}
	if reason != "" {
		return nil, &BackupRefusal{Message: "No snapshot: " + reason + "."}
	}
	if problem, err := s.TargetProblem(ctx); err != nil {
		return nil, err
	} else if problem != "" {
		return nil, &BackupRefusal{Message: "No snapshot: " + problem}
	}
	return s.DB.CreateManualBackup(ctx, a, env, *snap)
}

// FireDueBackups claims every schedule's due fires (see
// store.FireBackupSchedule): any number of Studio processes may call it
// at once; each fire produces exactly one snapshot or one skipped record.
func (s *Service) FireDueBackups(ctx context.Context) error {
	scheds, err := s.DB.BackupSchedules(ctx)
	if err != nil {
		return err
	}
	now := s.Now()
	for _, sc := range scheds {
		if !sc.ConsideredUntil.Before(now) {
			continue // nothing due, or the clock stepped back
		}
		target, err := s.DB.BackupTarget(ctx)
		if err != nil {
			return err
		}
		_, err = s.DB.FireBackupSchedule(ctx, store.BackupFire{
			EnvironmentID: sc.EnvironmentID,
			Fires: func(expr string, after time.Time) []time.Time {
				c, err := ParseCron(expr)
				if err != nil {
					return nil
				}
				return c.Between(after, now)
			},
			Snapshot: func(env *store.Environment, sched *store.BackupSchedule, at time.Time) (*store.Snapshot, string, error) {
				if target == "" {
					return nil, "no backup target is set", nil
				}
				return s.snapshot(ctx, env, target, "scheduled", at, sched.KeepText)
			},
		})
		if err != nil {
			return err
		}
	}
	return s.FireDueDrills(ctx)
}

// StartRestore replays snapshot backupID into env (admins, typed
// confirmation): verify every file of the snapshot (presence, size and
// SHA-256) while the environment still runs, then stop it, restore each
// service from its file, start it again. A snapshot whose files are
// missing is refused at once; one that does not verify fails its run
// before anything is stopped.
func (s *Service) StartRestore(ctx context.Context, a store.Actor, env *store.Environment, backupID int64, confirm string) (*store.Run, error) {
	b, err := s.DB.BackupByID(ctx, env.ID, backupID)
	if err != nil {
		return nil, err
	}
	if confirm != env.Name {
		return nil, &BackupRefusal{Field: "confirm", Message: fmt.Sprintf("A restore replaces the data of %s. Type the environment's name, %s, to confirm.", env.Name, env.Name)}
	}
	if !b.Succeeded() || b.RunID == nil {
		return nil, &BackupRefusal{Message: "Only a completed snapshot can be restored."}
	}
	if env.State == store.EnvironmentRestoring {
		return nil, &BackupRefusal{Message: env.Name + " is being restored already."}
	}
	busy, err := s.DB.HasUnfinishedBackupRun(ctx, env.ID)
	if err != nil {
		return nil, err
	}
	if busy {
		return nil, &BackupRefusal{Message: fmt.Sprintf("A snapshot or restore of %s is still running. Wait for it to finish.", env.Name)}
	}
	files, err := s.snapshotFiles(ctx, b)
	if err != nil {
		return nil, err
	}
	if problem, _, err := s.snapshotProblem(ctx, env, b, files); err != nil {
		return nil, err
	} else if problem != "" {
		return nil, &BackupRefusal{Message: "This snapshot cannot be restored. " + problem + " Nothing was stopped."}
	}
	cps := []store.NewCheckpoint{
		{Kind: KindVerify, Name: "Verify snapshot " + b.Name},
		{Kind: KindStop, Name: "Stop " + env.Name},
	}
	for _, d := range files {
		cps = append(cps, store.NewCheckpoint{Kind: KindRestore, Name: "Restore " + d.Service.String(),
			Detail: CheckpointDetail{Service: d.Service.Name, Snapshot: &d}})
	}
	cps = append(cps, store.NewCheckpoint{Kind: KindStart, Name: "Start " + env.Name})
	return s.DB.CreateRun(ctx, a, env, store.NewRun{EnvironmentID: env.ID, Kind: store.RunRestore, RevisionID: env.ActiveRevisionID,
		Checkpoints: cps, Detail: RunDetail{BackupID: b.ID}, ExclusiveDeploy: true,
		AuditAction: "backup.restore-started", AuditDetail: map[string]any{"snapshot": b.Name, "confirmation": true},
		Enqueue: s.enqueue()})
}

// RemoveBackup deletes a snapshot and its files (admins, typed confirmation).
func (s *Service) RemoveBackup(ctx context.Context, a store.Actor, env *store.Environment, backupID int64, confirm string) error {
	b, err := s.DB.BackupByID(ctx, env.ID, backupID)
	if err != nil {
		return err
	}
	if b.Skipped != "" {
		return apperr.Errorf(apperr.NotFound, "No such snapshot.")
	}
	if confirm != b.Name {
		return &BackupRefusal{Field: "confirm", Message: fmt.Sprintf("Removing deletes the snapshot's files. Type its name, %s, to confirm.", b.Name)}
	}
	if b.RunID != nil && !store.RunFinished(b.RunStatus) {
		return &BackupRefusal{Message: "This snapshot is still running. Wait for it to finish."}
	}
	// A restore that runs may be reading this snapshot's files.
	if busy, err := s.DB.HasUnfinishedBackupRun(ctx, env.ID); err != nil {
		return err
	} else if busy {
		return &BackupRefusal{Message: fmt.Sprintf("A snapshot or restore of %s is running. Remove snapshots once it has finished.", env.Name)}
	}
	// A snapshot whose target is gone has no files left to delete: it is
	// only taken off the list.
	var te *platform.TargetError
	if _, err := platform.Backups(s.Platform); err != nil {
		return &BackupRefusal{Message: err.Error()}
	}
	loc, err := s.Runner.location(ctx, b, env)
	if err == nil {
		err = loc.Target.Remove(ctx, loc.Installation, loc.Dir)
	}
	if err != nil && !(errors.As(err, &te) && te.Gone) {
		return &BackupRefusal{Message: sentence(fmt.Sprintf("The files of snapshot %s cannot be deleted: %s", b.Name, err))}
	}
	return s.DB.DeleteBackup(ctx, &a, env, b)
}

// AcceptData accepts env's data as it is after a failed restore (admins,
// typed confirmation): deploys are allowed again.
func (s *Service) AcceptData(ctx context.Context, a store.Actor, env *store.Environment, confirm string) error {
	if confirm != env.Name {
		return &BackupRefusal{Field: "confirm", Message: fmt.Sprintf("Accepting keeps %s's data as the failed restore left it. Type the environment's name, %s, to confirm.", env.Name, env.Name)}
	}
	return s.DB.AcceptEnvironmentData(ctx, a, env)
}

// snapshotFiles returns the services and files a completed snapshot wrote.
func (s *Service) snapshotFiles(ctx context.Context, b *store.Backup) ([]SnapshotDetail, error) {
	if b.RunID == nil {
		return nil, nil
	}
	cps, err := s.DB.Checkpoints(ctx, *b.RunID)
	if err != nil {
		return nil, err
	}
	var out []SnapshotDetail
	for _, cp := range cps {
		if d := DecodeCheckpointDetail(cp.Detail); cp.Kind == KindSnapshot && d.Snapshot != nil {
			out = append(out, *d.Snapshot)
		}
	}
	return out, nil
}

// snapshotProblem says, without reading the files, why a completed
// snapshot cannot be restored (its target is gone, a file is missing or
// not the size recorded), or "", and whether the whole target is gone.
func (s *Service) snapshotProblem(ctx context.Context, env *store.Environment, b *store.Backup, files []SnapshotDetail) (problem string, targetGone bool, err error) {
	fs := snapshotFileList(files)
	if len(fs) == 0 {
		return "It recorded no files.", false, nil
	}
	if _, err := platform.Backups(s.Platform); err != nil {
		return err.Error(), false, nil
	}
	loc, err := s.Runner.location(ctx, b, env)
	if err == nil {
		err = platform.CheckSnapshot(ctx, loc, fs)
	}
	var te *platform.TargetError
	return filesProblem(err), errors.As(err, &te) && te.Gone, nil
}

// filesProblem is a snapshot check's error as the sentence pages show, or
// "" for none.
func filesProblem(err error) string {
	var fe *platform.SnapshotFileError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &fe):
		return "Its file " + fe.Error() + "."
	}
	return sentence(err.Error())
}

// snapshotFileList is the files of a snapshot's details.
func snapshotFileList(details []SnapshotDetail) []platform.SnapshotFile {
	out := make([]platform.SnapshotFile, 0, len(details))
	for _, d := range details {
		out = append(out, d.SnapshotFile)
	}
	return out
}

// subMap is the entries of m under prefix, the prefix cut.
func subMap(m map[string]int64, prefix string) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[rest] = v
		}
	}
	return out
}

// listSnapshots lists the sizes of every file under env's folder on b's
// target, when the target lists (S3), or nil.
func (s *Service) listSnapshots(ctx context.Context, b *store.Backup, env *store.Environment) map[string]int64 {
	loc, err := s.Runner.location(ctx, b, env)
	if err != nil {
		return nil
	}
	l, ok := loc.Target.(platform.TargetLister)
	if !ok {
		return nil
	}
	sizes, err := l.Sizes(ctx, loc.Installation, path.Dir(loc.Dir))
	if err != nil {
		return nil
	}
	return sizes
}

// MissingSnapshots says, for each completed snapshot of list whose files
// cannot be restored, why (keyed by backup id): the backups page shows
// them as missing, without a restore button. Each distinct target is
// looked at once when it is gone; nothing is read or written.
func (s *Service) MissingSnapshots(ctx context.Context, env *store.Environment, list []store.Backup) (map[int64]string, error) {
	ctx, cancel := context.WithTimeout(ctx, targetCheckTimeout)
	defer cancel()
	out := map[int64]string{}
	gone := map[string]string{}
	// A target that lists (S3) is listed once, under the environment's
	// folder, once the first snapshot on it checked it.
	listed := map[string]map[string]int64{}
	for i := range list {
		b := &list[i]
		if !b.Succeeded() || b.RunID == nil {
			continue
		}
		if problem, ok := gone[b.Target]; ok {
			out[b.ID] = problem
			continue
		}
		files, err := s.snapshotFiles(ctx, b)
		if err != nil {
			return nil, err
		}
		var problem string
		var targetGone bool
		if sizes, ok := listed[b.Target]; ok && len(files) > 0 {
			problem = filesProblem(platform.CheckSnapshotSizes(snapshotFileList(files), subMap(sizes, b.Name+"/")))
		} else {
			problem, targetGone, err = s.snapshotProblem(ctx, env, b, files)
			if err != nil {
				return nil, err
			}
			if !targetGone {
				if sizes := s.listSnapshots(ctx, b, env); sizes != nil {
					listed[b.Target] = sizes
				}
			}
		}
		if targetGone {
			gone[b.Target] = problem
		}
		if problem != "" {
			out[b.ID] = problem
		}
	}
	return out, nil
}
