package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultDrillCron is the drill schedule an environment gets with its
// first good snapshot: Sunday 04:00 UTC, weekly.
const (
	DefaultDrillCron     = "0 4 * * 0"
	defaultDrillInterval = 7 * 24 * time.Hour
)

// DrillSchedule is an environment's restore drill schedule; Cron "" is
// off.
type DrillSchedule struct {
	EnvironmentID   int64
	Cron            string
	Interval        time.Duration
	ConsideredUntil time.Time
	UpdatedAt       time.Time
}

const drillScheduleColumns = `environment_id, cron, interval_ms, considered_until, updated_at`

func scanDrillSchedule(row pgx.Row) (*DrillSchedule, error) {
	var s DrillSchedule
	var ms int64
	if err := row.Scan(&s.EnvironmentID, &s.Cron, &ms, &s.ConsideredUntil, &s.UpdatedAt); err != nil {
		return nil, err
	}
	s.Interval = time.Duration(ms) * time.Millisecond
	return &s, nil
}

// DrillScheduleOf returns the environment's drill schedule, nil when it
// has none (no good snapshot yet and none set).
func (db *DB) DrillScheduleOf(ctx context.Context, envID int64) (*DrillSchedule, error) {
	s, err := scanDrillSchedule(db.Pool.QueryRow(ctx, `SELECT `+drillScheduleColumns+` FROM drill_schedules WHERE environment_id = $1`, envID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: drill schedule: %w", err)
	}
	return s, nil
}

// SetDrillSchedule sets the environment's drill schedule (cron "" turns
// drills off), with its audit record. Fires before now are never taken,
// and the no-success alarm counts from now.
func (db *DB) SetDrillSchedule(ctx context.Context, a Actor, env *Environment, cron string, interval time.Duration) error {
	now := db.Now()
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO drill_schedules (environment_id, cron, interval_ms, considered_until, updated_by, updated_at, alarm_from)
			VALUES ($1, $2, $3::bigint, $4::timestamptz, $5, $4, $4::timestamptz + 2 * $3::bigint * interval '1 millisecond')
			ON CONFLICT (environment_id) DO UPDATE SET cron = EXCLUDED.cron, interval_ms = EXCLUDED.interval_ms,
			    considered_until = GREATEST(drill_schedules.considered_until, EXCLUDED.considered_until),
			    updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at,
			    alarm_from = GREATEST(drill_schedules.alarm_from, EXCLUDED.alarm_from), last_failed_run = NULL`,
			env.ID, cron, interval.Milliseconds(), now, a.userID()); err != nil {
			return err
		}
		e := a.event("backup.drill-schedule-set")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, env.Name
		e.Detail = map[string]any{"cron": cron}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return fmt.Errorf("store: set drill schedule: %w", err)
	}
	return nil
}

// EnsureDrillSchedule gives the environment the default weekly drill
// schedule unless it has one (its first good snapshot exists now).
func (db *DB) EnsureDrillSchedule(ctx context.Context, envID int64) error {
	now := db.Now()
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO drill_schedules (environment_id, cron, interval_ms, considered_until, updated_at, alarm_from)
		VALUES ($1, $2, $3::bigint, $4::timestamptz, $4, $4::timestamptz + 2 * $3::bigint * interval '1 millisecond') ON CONFLICT (environment_id) DO NOTHING`,
		envID, DefaultDrillCron, defaultDrillInterval.Milliseconds(), now)
	if err != nil {
		return fmt.Errorf("store: default drill schedule: %w", err)
	}
	return nil
}

// DueDrillSchedules returns the environments whose drill schedule may
// have a fire due (considered before now), for the scheduler.
func (db *DB) DueDrillSchedules(ctx context.Context, now time.Time) ([]int64, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT environment_id FROM drill_schedules WHERE cron <> '' AND considered_until < $1 ORDER BY environment_id`, now)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("store: due drill schedules: %w", err)
	}
	return ids, nil
}

// DrillFire is how the scheduler claims the due fires of one drill
// schedule.
type DrillFire struct {
	EnvironmentID int64
	// Fires returns the schedule's fire times after `after` up to now.
	Fires func(cron string, after time.Time) []time.Time
	// Drill builds the drill run of env, or says why none runs now.
	Drill func(env *Environment) (*NewRun, string, error)
}

// FireDrillSchedule claims the schedule's due fires in one transaction
// under its row's lock: the newest starts one drill (fires missed while
// no Studio ran are not caught up one by one), and considered_until moves
// past them, so each fire counts once across every Studio process. It
// returns the drill run's id, 0 when none started.
func (db *DB) FireDrillSchedule(ctx context.Context, f DrillFire) (int64, error) {
	var runID int64
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		sched, err := scanDrillSchedule(tx.QueryRow(ctx, `SELECT `+drillScheduleColumns+` FROM drill_schedules WHERE environment_id = $1 FOR UPDATE`, f.EnvironmentID))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if sched.Cron == "" {
			return nil
		}
		fires := f.Fires(sched.Cron, sched.ConsideredUntil)
		if len(fires) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE drill_schedules SET considered_until = GREATEST(considered_until, $2) WHERE environment_id = $1`,
			f.EnvironmentID, fires[len(fires)-1]); err != nil {
			return err
		}
		env, err := scanEnvironment(tx.QueryRow(ctx, `SELECT `+environmentColumns+` FROM environments e JOIN projects p ON p.id = e.project_id WHERE e.id = $1`, f.EnvironmentID))
		if err != nil {
			return err
		}
		nr, _, err := f.Drill(env)
		if err != nil || nr == nil {
			return err
		}
		runID, err = db.createRunTx(ctx, tx, Actor{}, env, *nr)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: fire drill schedule: %w", err)
	}
	return runID, nil
}

// drillFinishedTx keeps the drill schedule's alarm summary as a drill run
// ends, in the run's own transaction: a failure raises the alarm, a
// success clears it and moves the no-success alarm twice the interval on.
func drillFinishedTx(ctx context.Context, tx pgx.Tx, envID, runID int64, status string, at time.Time) error {
	var err error
	switch status {
	case RunSucceeded, RunSucceededWithWarnings:
		_, err = tx.Exec(ctx, `UPDATE drill_schedules SET last_failed_run = NULL,
			alarm_from = GREATEST(alarm_from, $2::timestamptz + 2 * interval_ms * interval '1 millisecond') WHERE environment_id = $1`, envID, at)
	case RunFailed:
		_, err = tx.Exec(ctx, `UPDATE drill_schedules SET last_failed_run = $2 WHERE environment_id = $1`, envID, runID)
	}
	return err
}

// DrillAlarm is an environment whose restore drills need attention.
type DrillAlarm struct {
	EnvironmentID int64
	Project       string
	Environment   string
	Reason        string
	RunID         *int64
}

// DrillAlarms returns the environments whose drills are in alarm (envID 0:
// every one), read through the schedules' alarm indexes: the cost grows
// with the alarms, not with the environments.
func (db *DB) DrillAlarms(ctx context.Context, envID int64) ([]DrillAlarm, error) {
	where, arg := `d.cron <> '' AND (d.last_failed_run IS NOT NULL OR d.alarm_from < $1::timestamptz)`, any(db.Now())
	if envID != 0 {
		where, arg = `d.cron <> '' AND d.environment_id = $1::bigint`, envID
	}
	rows, _ := db.Pool.Query(ctx, `SELECT d.environment_id, p.name, e.name, d.last_failed_run, COALESCE(r.reason, ''), d.alarm_from, d.interval_ms
		FROM drill_schedules d JOIN environments e ON e.id = d.environment_id JOIN projects p ON p.id = e.project_id
		LEFT JOIN runs r ON r.id = d.last_failed_run
		WHERE `+where+` ORDER BY p.name, e.name`, arg)
	now := db.Now()
	var out []DrillAlarm
	var a DrillAlarm
	var reason string
	var from *time.Time
	var ms int64
	_, err := pgx.ForEachRow(rows, []any{&a.EnvironmentID, &a.Project, &a.Environment, &a.RunID, &reason, &from, &ms}, func() error {
		x := a
		switch {
		case a.RunID != nil:
			x.Reason = "The last restore drill failed: " + reason
			if reason == "" {
				x.Reason = "The last restore drill failed."
			}
		case from != nil && from.Before(now):
			x.Reason = fmt.Sprintf("No restore drill has succeeded in the last %s (twice the drill schedule's interval).", windowText(2*time.Duration(ms)*time.Millisecond))
		default:
			return nil
		}
		out = append(out, x)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: drill alarms: %w", err)
	}
	return out, nil
}

// LastGoodDrill returns the environment's newest drill run that
// succeeded, or nil.
func (db *DB) LastGoodDrill(ctx context.Context, envID int64) (*Run, error) {
	var id int64
	err := db.Pool.QueryRow(ctx, `SELECT id FROM runs WHERE environment_id = $1 AND kind = 'drill' AND status IN ('succeeded', 'succeeded-with-warnings')
		ORDER BY id DESC LIMIT 1`, envID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: last good drill: %w", err)
	}
	return db.RunByID(ctx, id)
}
