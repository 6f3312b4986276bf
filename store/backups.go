package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/skali-dev/studio/humanize"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/events/payload"
)

// Environment states besides active.
const (
	EnvironmentActive        = "active"
	EnvironmentRestoring     = "restoring"
	EnvironmentRestoreFailed = "down: restore failed"
)

// backupTargetKey is the installation setting holding the backup target.
const backupTargetKey = "backup_target"

// BackupSchedule is an environment's automatic backups: a five-field cron
// expression in UTC and a retention.
type BackupSchedule struct {
	EnvironmentID int64
	Cron          string
	Keep          time.Duration
	// KeepText is the retention as the admin wrote it (7d, 2w).
	KeepText string
	// Interval is the longest gap between fires.
	Interval time.Duration
	// ConsideredUntil is the newest fire time already handled.
	ConsideredUntil time.Time
	UpdatedAt       time.Time
}

// Backup is a snapshot (manual or scheduled) or a skipped scheduled fire.
type Backup struct {
	ID int64
	// Number counts the snapshots of its environment (0 for a skipped
	// fire): what people see; ID stays in URLs.
	Number        int
	EnvironmentID int64
	Origin        string
	ScheduledAt   *time.Time
	RunID         *int64
	// Skipped says why a fire took no snapshot; "" for a snapshot.
	Skipped   string
	Name      string
	Target    string
	Keep      time.Duration
	CreatedAt time.Time
	// RunStatus and RunFinishedAt are the backup run's.
	RunStatus     string
	RunFinishedAt *time.Time
	// Size is the bytes of every file the snapshot wrote.
	Size int64
	// Leftover is the path of the folder a snapshot that did not complete
	// left on its target because it could not be removed; "" when none.
	Leftover string
}

// At is when the snapshot was taken or the fire was due.
func (b Backup) At() time.Time {
	if b.ScheduledAt != nil {
		return *b.ScheduledAt
	}
	return b.CreatedAt
}

// ExpiresAt is when retention deletes a scheduled snapshot (nil for a
// manual one, which never expires).
func (b Backup) ExpiresAt() *time.Time {
	if b.Origin != "scheduled" || b.Keep <= 0 || b.Skipped != "" {
		return nil
	}
	t := b.At().Add(b.Keep)
	return &t
}

// Succeeded reports whether the snapshot completed.
func (b Backup) Succeeded() bool {
	return b.RunStatus == RunSucceeded || b.RunStatus == RunSucceededWithWarnings
}

// BackupTarget returns the installation's backup target, "" when none is set.
func (db *DB) BackupTarget(ctx context.Context) (string, error) {
	var v string
	err := db.Pool.QueryRow(ctx, `SELECT value FROM installation_settings WHERE key = $1`, backupTargetKey).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: backup target: %w", err)
	}
	return v, nil
}

// SetBackupTarget stores the installation's backup target, with its audit record.
func (db *DB) SetBackupTarget(ctx context.Context, a Actor, target string) error {
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO installation_settings (key, value, updated_at) VALUES ($1, $2, $3)
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
			backupTargetKey, target, db.Now()); err != nil {
			return err
		}
		if err := forgetS3Target(ctx, tx); err != nil {
			return err
		}
		e := a.event("backup.target-set")
		e.Target = target
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return fmt.Errorf("store: set backup target: %w", err)
	}
	return nil
}

const scheduleColumns = `environment_id, cron, keep_ms, keep_text, interval_ms, considered_until, updated_at`

func scanSchedule(row pgx.Row) (*BackupSchedule, error) {
	var s BackupSchedule
	var keepMS, intervalMS int64
	err := row.Scan(&s.EnvironmentID, &s.Cron, &keepMS, &s.KeepText, &intervalMS, &s.ConsideredUntil, &s.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "This environment has no backup schedule.")
	}
	if err != nil {
		return nil, err
	}
	s.Keep = time.Duration(keepMS) * time.Millisecond
	s.Interval = time.Duration(intervalMS) * time.Millisecond
	return &s, nil
}

// BackupSchedule returns the environment's schedule, or apperr.NotFound.
func (db *DB) BackupSchedule(ctx context.Context, envID int64) (*BackupSchedule, error) {
	s, err := scanSchedule(db.Pool.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM backup_schedules WHERE environment_id = $1`, envID))
	if err != nil {
		return nil, fmt.Errorf("store: backup schedule: %w", err)
	}
	return s, nil
}

// BackupSchedules returns every schedule, for the scheduler.
func (db *DB) BackupSchedules(ctx context.Context) ([]BackupSchedule, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+scheduleColumns+` FROM backup_schedules ORDER BY environment_id`)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (BackupSchedule, error) {
		s, err := scanSchedule(row)
		if err != nil {
			return BackupSchedule{}, err
		}
		return *s, nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: backup schedules: %w", err)
	}
	return out, nil
}

// SetBackupSchedule sets (or changes) the environment's schedule, with its
// audit record. Fires before now are never taken: a new or changed schedule
// starts counting from the moment it is saved.
func (db *DB) SetBackupSchedule(ctx context.Context, a Actor, env *Environment, cron, keepText string, keep, interval time.Duration) error {
	now := db.Now()
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO backup_schedules (environment_id, cron, keep_ms, keep_text, interval_ms, considered_until, updated_by, updated_at)
			VALUES ($1, $2, $3, $4, $7, $5, $6, $5)
			ON CONFLICT (environment_id) DO UPDATE SET cron = EXCLUDED.cron, keep_ms = EXCLUDED.keep_ms, keep_text = EXCLUDED.keep_text,
			    interval_ms = EXCLUDED.interval_ms,
			    considered_until = GREATEST(backup_schedules.considered_until, EXCLUDED.considered_until),
			    updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at`,
			env.ID, cron, keep.Milliseconds(), keepText, now, a.userID(), interval.Milliseconds()); err != nil {
			return err
		}
		e := a.event("backup.schedule-set")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, env.Name
		e.Detail = map[string]any{"cron": cron, "keep": keepText}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return fmt.Errorf("store: set backup schedule: %w", err)
	}
	return nil
}

// RemoveBackupSchedule turns automatic backups off, with its audit record.
// Snapshots already taken stay.
func (db *DB) RemoveBackupSchedule(ctx context.Context, a Actor, env *Environment) error {
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM backup_schedules WHERE environment_id = $1`, env.ID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return apperr.Errorf(apperr.NotFound, "This environment has no backup schedule.")
		}
		e := a.event("backup.schedule-removed")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, env.Name
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return fmt.Errorf("store: remove backup schedule: %w", err)
	}
	return nil
}

// Snapshot is what a new snapshot's run and files are: the run to create,
// the snapshot's directory name and the target it is written to.
type Snapshot struct {
	Run    NewRun
	Name   string
	Target string
}

// BackupFire is how a scheduler claims the due fires of one schedule.
type BackupFire struct {
	EnvironmentID int64
	// Fires returns the schedule's fire times after `after` up to now, in
	// order (the newest few when there are very many).
	Fires func(cron string, after time.Time) []time.Time
	// Snapshot builds the snapshot of env for the fire at, or says why
	// the fire takes none (nothing to snapshot, no target).
	Snapshot func(env *Environment, sched *BackupSchedule, at time.Time) (*Snapshot, string, error)
}

// BackupFireResult is what claiming the fires came to.
type BackupFireResult struct {
	// RunID is the snapshot's run, 0 when the fire took none.
	RunID int64
	// Skipped are the fire times recorded as skipped.
	Skipped []time.Time
}

// FireBackupSchedule claims the schedule's due fires in one transaction:
// every fire but the newest is recorded as skipped (with the snapshot or
// restore that was running at its time, or else as missed while no Studio
// ran), the newest takes a snapshot, or is recorded as skipped when nothing
// is deployed yet, a snapshot still runs (named), or f.Snapshot says so. The
// schedule's row lock and the unique key (environment_id, scheduled_at)
// make each fire count once across every Studio process.
func (db *DB) FireBackupSchedule(ctx context.Context, f BackupFire) (BackupFireResult, error) {
	var res BackupFireResult
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		sched, err := scanSchedule(tx.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM backup_schedules WHERE environment_id = $1 FOR UPDATE`, f.EnvironmentID))
		if apperr.CodeOf(err) == apperr.NotFound {
			return nil
		}
		if err != nil {
			return err
		}
		fires := f.Fires(sched.Cron, sched.ConsideredUntil)
		if len(fires) == 0 {
			return nil
		}
		// A snapshot or restore whose executor was lost holds the
		// environment until a live process takes it over and it ends, or
		// someone cancels it: the fires wait for it (nothing is recorded
		// and considered_until stays), then one catch-up is taken.
		var held bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE environment_id = $1 AND kind IN ('backup', 'restore')
			AND finished_at IS NULL AND orphaned)`, f.EnvironmentID).Scan(&held); err != nil || held {
			return err
		}
		env, err := scanEnvironment(tx.QueryRow(ctx, `SELECT `+environmentColumns+` FROM environments e JOIN projects p ON p.id = e.project_id WHERE e.id = $1`, f.EnvironmentID))
		if err != nil {
			return err
		}
		skip := func(at time.Time, reason string) error {
			tag, err := tx.Exec(ctx, `
				INSERT INTO backups (environment_id, origin, scheduled_at, skipped, keep_ms, created_at)
				VALUES ($1, 'scheduled', $2, $3, $4, $5) ON CONFLICT (environment_id, scheduled_at) DO NOTHING`,
				env.ID, at, reason, sched.Keep.Milliseconds(), db.Now())
			if err == nil && tag.RowsAffected() == 1 {
				res.Skipped = append(res.Skipped, at)
			}
			return err
		}
		last := fires[len(fires)-1]
		if _, err := tx.Exec(ctx, `UPDATE backup_schedules SET considered_until = GREATEST(considered_until, $2) WHERE environment_id = $1`,
			env.ID, last); err != nil {
			return err
		}
		reason, err := fireSkipReason(ctx, tx, env)
		if err != nil {
			return err
		}
		var snap *Snapshot
		if reason == "" {
			if snap, reason, err = f.Snapshot(env, sched, last); err != nil {
				return err
			}
		}
		// Each earlier fire says why it was not taken: the snapshot or
		// restore that was running at its time, or else that no Studio
		// was running then.
		for _, at := range fires[:len(fires)-1] {
			why, err := runningBackupRun(ctx, tx, env.ID, &at)
			if err != nil {
				return err
			}
			if why == "" {
				why = "missed: no Studio was running at this time"
				if reason == "" {
					why += " (one catch-up snapshot was taken instead)"
				}
			}
			if err := skip(at, why); err != nil {
				return err
			}
		}
		if reason != "" {
			return skip(last, reason)
		}
		var backupID int64
		err = tx.QueryRow(ctx, `
			INSERT INTO backups (environment_id, origin, scheduled_at, name, target, keep_ms, created_at)
			VALUES ($1, 'scheduled', $2, $3, $4, $5, $6) ON CONFLICT (environment_id, scheduled_at) DO NOTHING RETURNING id`,
			env.ID, last, snap.Name, snap.Target, sched.Keep.Milliseconds(), db.Now()).Scan(&backupID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // another process took this fire
		}
		if err != nil {
			return err
		}
		if res.RunID, err = db.createRunTx(ctx, tx, Actor{}, env, snap.Run); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE backups SET run_id = $2 WHERE id = $1`, backupID, res.RunID)
		return err
	})
	if err != nil {
		return BackupFireResult{}, fmt.Errorf("store: fire backup schedule: %w", err)
	}
	return res, nil
}

// fireSkipReason says why the environment takes no snapshot now, or "".
func fireSkipReason(ctx context.Context, tx pgx.Tx, env *Environment) (string, error) {
	if env.ActiveRevisionID == nil {
		return "nothing deployed yet", nil
	}
	if env.State != EnvironmentActive {
		return "the environment is " + env.State, nil
	}
	return runningBackupRun(ctx, tx, env.ID, nil)
}

// runningBackupRun says which snapshot or restore of the environment was
// running at `at` (created by then and not finished by then; nil: now),
// such as "the previous snapshot (backup run 12) was still running", or
// "" when none was.
func runningBackupRun(ctx context.Context, tx pgx.Tx, envID int64, at *time.Time) (string, error) {
	var id int64
	var kind RunKind
	err := tx.QueryRow(ctx, `SELECT id, kind FROM runs WHERE environment_id = $1 AND kind IN ('backup', 'restore')
		AND CASE WHEN $2::timestamptz IS NULL THEN finished_at IS NULL
		         ELSE created_at <= $2 AND (finished_at IS NULL OR finished_at > $2) END
		ORDER BY created_at DESC, id DESC LIMIT 1`, envID, at).Scan(&id, &kind)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", nil
	case err != nil:
		return "", err
	case kind == RunRestore:
		return fmt.Sprintf("a restore (restore run %d) was still running", id), nil
	}
	return fmt.Sprintf("the previous snapshot (backup run %d) was still running", id), nil
}

// CreateManualBackup records a snapshot taken by hand and creates its run,
// in one transaction. It is refused while a snapshot or restore of the
// environment runs.
func (db *DB) CreateManualBackup(ctx context.Context, a Actor, env *Environment, snap Snapshot) (*Run, error) {
	var runID int64
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM environments WHERE id = $1 FOR UPDATE`, env.ID); err != nil {
			return err
		}
		var busy bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE environment_id = $1 AND kind IN ('backup', 'restore') AND finished_at IS NULL)`,
			env.ID).Scan(&busy); err != nil {
			return err
		}
		if busy {
			return apperr.Errorf(apperr.Conflict, "A snapshot or restore of %s is still running. Wait for it to finish.", env.Name)
		}
		var backupID int64
		if err := tx.QueryRow(ctx, `INSERT INTO backups (environment_id, origin, name, target, created_at) VALUES ($1, 'manual', $2, $3, $4) RETURNING id`,
			env.ID, snap.Name, snap.Target, db.Now()).Scan(&backupID); err != nil {
			return err
		}
		var err error
		if runID, err = db.createRunTx(ctx, tx, a, env, snap.Run); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE backups SET run_id = $2 WHERE id = $1`, backupID, runID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: manual backup: %w", err)
	}
	return db.RunByID(ctx, runID)
}

const backupColumns = `b.id, b.environment_id, b.origin, b.scheduled_at, b.run_id, b.skipped, b.name, b.target, COALESCE(b.keep_ms, 0), b.created_at,
	COALESCE(r.status, ''), r.finished_at, b.leftover, COALESCE(b.number, 0),
	COALESCE((SELECT SUM((c.detail->'snapshot'->>'size')::bigint) FROM run_checkpoints c WHERE c.run_id = b.run_id), 0)`

func collectBackup(row pgx.CollectableRow) (Backup, error) {
	var b Backup
	var keepMS int64
	err := row.Scan(&b.ID, &b.EnvironmentID, &b.Origin, &b.ScheduledAt, &b.RunID, &b.Skipped, &b.Name, &b.Target, &keepMS, &b.CreatedAt,
		&b.RunStatus, &b.RunFinishedAt, &b.Leftover, &b.Number, &b.Size)
	b.Keep = time.Duration(keepMS) * time.Millisecond
	return b, err
}

// Backups returns the environment's snapshots and skipped fires that are
// not deleted, newest first, at most limit.
func (db *DB) Backups(ctx context.Context, envID int64, limit int) ([]Backup, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+backupColumns+` FROM backups b LEFT JOIN runs r ON r.id = b.run_id
		WHERE b.environment_id = $1 AND b.deleted_at IS NULL
		ORDER BY COALESCE(b.scheduled_at, b.created_at) DESC, b.id DESC LIMIT $2`, envID, limit)
	out, err := pgx.CollectRows(rows, collectBackup)
	if err != nil {
		return nil, fmt.Errorf("store: backups: %w", err)
	}
	return out, nil
}

// BackupsBefore returns a page of the environment's snapshots and skipped
// fires that are not deleted, newest first, older than the one of id
// before (0: from the newest), at most limit. It reads one more to say
// whether older ones follow (more). The order (when, id) is the one of
// backups_environment_at_idx, so a deep page reads only its rows.
func (db *DB) BackupsBefore(ctx context.Context, envID, before int64, limit int) (list []Backup, more bool, err error) {
	// Two statements, not "$2 = 0 OR ...": under a generic plan the OR
	// would be a filter instead of the index condition.
	older := ""
	args := []any{envID, limit + 1}
	if before > 0 {
		older = `AND (COALESCE(b.scheduled_at, b.created_at), b.id) <
		      (SELECT COALESCE(o.scheduled_at, o.created_at), o.id FROM backups o WHERE o.id = $3 AND o.environment_id = $1)`
		args = append(args, before)
	}
	rows, _ := db.Pool.Query(ctx, `SELECT `+backupColumns+` FROM backups b LEFT JOIN runs r ON r.id = b.run_id
		WHERE b.environment_id = $1 AND b.deleted_at IS NULL `+older+`
		ORDER BY COALESCE(b.scheduled_at, b.created_at) DESC, b.id DESC LIMIT $2`, args...)
	list, err = pgx.CollectRows(rows, collectBackup)
	if err != nil {
		return nil, false, fmt.Errorf("store: backups: %w", err)
	}
	if len(list) > limit {
		return list[:limit], true, nil
	}
	return list, false, nil
}

// LastGoodBackupAt returns when the environment's newest kept snapshot
// that succeeded was taken, nil when none did.
func (db *DB) LastGoodBackupAt(ctx context.Context, envID int64) (*time.Time, error) {
	var at *time.Time
	err := db.Pool.QueryRow(ctx, `SELECT COALESCE(b.scheduled_at, b.created_at) FROM backups b JOIN runs r ON r.id = b.run_id
		WHERE b.environment_id = $1 AND b.deleted_at IS NULL AND r.status IN ('succeeded', 'succeeded-with-warnings')
		ORDER BY COALESCE(b.scheduled_at, b.created_at) DESC, b.id DESC LIMIT 1`, envID).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: last good backup: %w", err)
	}
	return at, nil
}

// BackupByID returns one snapshot of the environment that is not deleted.
func (db *DB) BackupByID(ctx context.Context, envID, id int64) (*Backup, error) {
	return db.backupWhere(ctx, `b.environment_id = $1 AND b.id = $2 AND b.deleted_at IS NULL`, envID, id)
}

// BackupByRun returns the snapshot a backup run takes.
func (db *DB) BackupByRun(ctx context.Context, runID int64) (*Backup, error) {
	return db.backupWhere(ctx, `b.run_id = $1`, runID)
}

func (db *DB) backupWhere(ctx context.Context, where string, args ...any) (*Backup, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+backupColumns+` FROM backups b LEFT JOIN runs r ON r.id = b.run_id WHERE `+where, args...)
	out, err := pgx.CollectRows(rows, collectBackup)
	if err != nil {
		return nil, fmt.Errorf("store: backup: %w", err)
	}
	if len(out) == 0 {
		return nil, apperr.Errorf(apperr.NotFound, "No such snapshot.")
	}
	return &out[0], nil
}

// SetBackupLeftover records the folder a snapshot that did not complete
// left on its target (path), or that nothing is left any more ("").
func (db *DB) SetBackupLeftover(ctx context.Context, id int64, path string) error {
	if _, err := db.Pool.Exec(ctx, `UPDATE backups SET leftover = $2 WHERE id = $1`, id, path); err != nil {
		return fmt.Errorf("store: backup leftover: %w", err)
	}
	return nil
}

// BackupLeftovers returns the environment's snapshots, not deleted, that
// left a folder on their target, oldest first.
func (db *DB) BackupLeftovers(ctx context.Context, envID int64) ([]Backup, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+backupColumns+` FROM backups b LEFT JOIN runs r ON r.id = b.run_id
		WHERE b.environment_id = $1 AND b.deleted_at IS NULL AND b.leftover <> '' ORDER BY b.id`, envID)
	out, err := pgx.CollectRows(rows, collectBackup)
	if err != nil {
		return nil, fmt.Errorf("store: backup leftovers: %w", err)
	}
	return out, nil
}

// ExpiredBackups returns the environment's scheduled snapshots and skipped
// fires older than their retention at now, except the newest successful
// scheduled snapshot, which is always kept. Unfinished snapshots are never
// expired.
func (db *DB) ExpiredBackups(ctx context.Context, envID int64, now time.Time) ([]Backup, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+backupColumns+` FROM backups b LEFT JOIN runs r ON r.id = b.run_id
		WHERE b.environment_id = $1 AND b.origin = 'scheduled' AND b.deleted_at IS NULL
		  AND b.scheduled_at + make_interval(secs => b.keep_ms / 1000.0) < $2
		  AND (b.run_id IS NULL OR r.finished_at IS NOT NULL)
		  AND b.id IS DISTINCT FROM (
		      SELECT k.id FROM backups k JOIN runs kr ON kr.id = k.run_id
		      WHERE k.environment_id = $1 AND k.origin = 'scheduled' AND k.deleted_at IS NULL
		        AND kr.status IN ('succeeded', 'succeeded-with-warnings')
		      ORDER BY k.scheduled_at DESC LIMIT 1)
		ORDER BY b.scheduled_at`, envID, now)
	out, err := pgx.CollectRows(rows, collectBackup)
	if err != nil {
		return nil, fmt.Errorf("store: expired backups: %w", err)
	}
	return out, nil
}

// DeleteBackup marks a snapshot deleted (its files are gone); a removal by
// a person (a != nil) is audited, retention's is not.
func (db *DB) DeleteBackup(ctx context.Context, a *Actor, env *Environment, b *Backup) error {
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE backups SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL`, b.ID, db.Now()); err != nil {
			return err
		}
		if a == nil {
			return nil
		}
		e := a.event("backup.removed")
		e.Project, e.Environment, e.EnvironmentID = env.Project, env.Name, &env.ID
		e.Target = "snapshot " + b.Name
		e.Detail = map[string]any{"origin": b.Origin}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return fmt.Errorf("store: delete backup: %w", err)
	}
	return nil
}

// setEnvironmentState changes the environment's state and announces it on
// the environment page.
func setEnvironmentState(ctx context.Context, tx pgx.Tx, envID int64, runID *int64, state string) error {
	if _, err := tx.Exec(ctx, `UPDATE environments SET state = $2 WHERE id = $1`, envID, state); err != nil {
		return err
	}
	_, err := appendEnvironmentEvent(ctx, tx, envID, runID, payload.EnvironmentChanged{Type: payload.KindEnvironmentState, State: state})
	return err
}

// AcceptEnvironmentData accepts an environment's data as it is after a
// failed restore: the environment is active again and deploys are allowed.
// Audited.
func (db *DB) AcceptEnvironmentData(ctx context.Context, a Actor, env *Environment) error {
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var state string
		if err := tx.QueryRow(ctx, `SELECT state FROM environments WHERE id = $1 FOR UPDATE`, env.ID).Scan(&state); err != nil {
			return err
		}
		if state != EnvironmentRestoreFailed {
			return apperr.Errorf(apperr.Conflict, "%s is %s; there is nothing to accept.", env.Name, state)
		}
		if err := setEnvironmentState(ctx, tx, env.ID, nil, EnvironmentActive); err != nil {
			return err
		}
		e := a.event("backup.accepted")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, env.Name
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return fmt.Errorf("store: accept data: %w", err)
	}
	return nil
}

// HasUnfinishedBackupRun reports whether a snapshot or restore of the
// environment is still running.
func (db *DB) HasUnfinishedBackupRun(ctx context.Context, envID int64) (bool, error) {
	var busy bool
	if err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE environment_id = $1 AND kind IN ('backup', 'restore') AND finished_at IS NULL)`,
		envID).Scan(&busy); err != nil {
		return false, fmt.Errorf("store: unfinished backup run: %w", err)
	}
	return busy, nil
}

// BackupAlarm is an environment whose backups need attention: its last
// scheduled fire failed or was skipped, or no snapshot succeeded within
// twice its schedule's interval.
type BackupAlarm struct {
	EnvironmentID int64
	Project       string
	Environment   string
	Reason        string
	// RunID is the backup run that failed or was cancelled, when the alarm
	// is about one.
	RunID *int64
}

// BackupAlarms returns every environment whose backups are in alarm (for
// the home page and a metrics gauge).
func (db *DB) BackupAlarms(ctx context.Context) ([]BackupAlarm, error) {
	return db.backupAlarms(ctx, 0)
}

// BackupAlarmOf returns the environment's alarm, or nil.
func (db *DB) BackupAlarmOf(ctx context.Context, envID int64) (*BackupAlarm, error) {
	out, err := db.backupAlarms(ctx, envID)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return &out[0], nil
}

func (db *DB) backupAlarms(ctx context.Context, envID int64) ([]BackupAlarm, error) {
	now := db.Now()
	// The schedules in alarm are read from their kept summary (fire_alarm,
	// alarm_from: migration 140) through its indexes, so the cost grows
	// with the alarms shown, not with the schedules; the reasons are then
	// read for those alone.
	where, arg := `(s.fire_alarm OR s.alarm_from < $1::timestamptz)`, any(now)
	if envID != 0 {
		where, arg = `e.id = $1::bigint`, envID
	}
	rows, _ := db.Pool.Query(ctx, `
		SELECT e.id, p.name, e.name, s.interval_ms, s.updated_at, last.scheduled_at, COALESCE(last.skipped, ''), COALESCE(lr.status, ''), COALESCE(lr.reason, ''), last.run_id,
		       s.alarm_from - 2 * s.interval_ms * interval '1 millisecond'
		FROM backup_schedules s JOIN environments e ON e.id = s.environment_id JOIN projects p ON p.id = e.project_id
		LEFT JOIN LATERAL (SELECT b.scheduled_at, b.skipped, b.run_id FROM backups b
		    WHERE b.environment_id = e.id AND b.origin = 'scheduled' AND b.deleted_at IS NULL
		    ORDER BY b.scheduled_at DESC LIMIT 1) last ON true
		LEFT JOIN runs lr ON lr.id = last.run_id
		WHERE `+where+`
		ORDER BY p.name, e.name`, arg)
	var out []BackupAlarm
	var id, intervalMS int64
	var project, env, skipped, status, reason string
	var since time.Time
	var lastAt, lastOK *time.Time
	var runID *int64
	_, err := pgx.ForEachRow(rows, []any{&id, &project, &env, &intervalMS, &since, &lastAt, &skipped, &status, &reason, &runID, &lastOK}, func() error {
		window := 2 * time.Duration(intervalMS) * time.Millisecond
		a := BackupAlarm{EnvironmentID: id, Project: project, Environment: env}
		switch {
		case lastAt != nil && skipped != "":
			a.Reason = fmt.Sprintf("The scheduled backup of %s was skipped: %s.", humanize.Time(*lastAt), skipped)
		case lastAt != nil && (status == RunFailed || status == RunCancelled):
			// Why it failed (the target is gone, say) is what to act on.
			a.Reason = fmt.Sprintf("The last scheduled fire (%s) %s.", humanize.Time(*lastAt), status)
			if status == RunFailed && reason != "" {
				a.Reason = fmt.Sprintf("The last scheduled fire (%s) failed: %s", humanize.Time(*lastAt), reason)
			}
			if runID != nil {
				a.RunID = new(*runID)
			}
		case now.Sub(since) > window && (lastOK == nil || now.Sub(*lastOK) > window):
			a.Reason = fmt.Sprintf("No backup has succeeded in the last %s (twice the schedule's interval).", windowText(window))
		default:
			return nil
		}
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: backup alarms: %w", err)
	}
	// Restore drills in alarm (store/drills.go) show where backup alarms
	// do, one alarm an environment: a backup alarm comes first.
	drills, err := db.DrillAlarms(ctx, envID)
	if err != nil {
		return nil, err
	}
	for _, d := range drills {
		if !slices.ContainsFunc(out, func(a BackupAlarm) bool { return a.EnvironmentID == d.EnvironmentID }) {
			out = append(out, BackupAlarm(d))
		}
	}
	slices.SortStableFunc(out, func(a, b BackupAlarm) int {
		return cmp.Or(strings.Compare(a.Project, b.Project), strings.Compare(a.Environment, b.Environment))
	})
	return out, nil
}

// windowText reads like "2 days" or "2 hours".
func windowText(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	if d >= time.Hour && d%time.Hour == 0 {
		return fmt.Sprintf("%d hours", d/time.Hour)
	}
	return fmt.Sprintf("%d minutes", d/time.Minute)
}

// NewestGoodBackup returns the environment's newest kept snapshot that
// succeeded, or nil when none did.
func (db *DB) NewestGoodBackup(ctx context.Context, envID int64) (*Backup, error) {
	b, err := db.backupWhere(ctx, `b.environment_id = $1 AND b.deleted_at IS NULL AND r.status IN ('succeeded', 'succeeded-with-warnings')
		ORDER BY COALESCE(b.scheduled_at, b.created_at) DESC, b.id DESC LIMIT 1`, envID)
	if apperr.CodeOf(err) == apperr.NotFound {
		return nil, nil
	}
	return b, err
}

// HasUnfinishedRunOf reports whether a run of kind of the environment is
// still running.
func (db *DB) HasUnfinishedRunOf(ctx context.Context, envID int64, kind RunKind) (bool, error) {
	var busy bool
	if err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE environment_id = $1 AND kind = $2 AND finished_at IS NULL)`,
		envID, kind).Scan(&busy); err != nil {
		return false, fmt.Errorf("store: unfinished %s run: %w", kind, err)
	}
	return busy, nil
}
