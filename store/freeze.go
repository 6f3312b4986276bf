package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// FreezeWindow is a time in which deploys of an environment do not start:
// every fire of Cron (five fields, UTC) for Duration, or the fixed
// interval [From, To). Refuse: a deploy started in it is refused; else it
// waits until the window ends. The runs package evaluates windows (it owns
// the cron parser); the store keeps them.
type FreezeWindow struct {
	Cron     string
	Duration time.Duration
	From, To time.Time
	Refuse   bool
}

// FreezeWindows lists the environment's windows, in the order they were set.
func (db *DB) FreezeWindows(ctx context.Context, envID int64) ([]FreezeWindow, error) {
	return freezeWindows(ctx, db.Pool, envID)
}

func freezeWindows(ctx context.Context, q querier, envID int64) ([]FreezeWindow, error) {
	rows, _ := q.Query(ctx, `SELECT cron, duration_seconds, starts_at, ends_at, refuse FROM freeze_windows
		WHERE environment_id = $1 ORDER BY position`, envID)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (FreezeWindow, error) {
		var w FreezeWindow
		var secs int64
		var from, to *time.Time
		err := row.Scan(&w.Cron, &secs, &from, &to, &w.Refuse)
		w.Duration = time.Duration(secs) * time.Second
		if from != nil && to != nil {
			w.From, w.To = from.UTC(), to.UTC()
		}
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: freeze windows: %w", err)
	}
	return out, nil
}

// PutFreezeWindows replaces the environment's windows (already checked by
// the runs package), audited, moving no run (for tests of the store
// alone); the Studio changes windows with PutFreezeWindowsMoving.
func (db *DB) PutFreezeWindows(ctx context.Context, a Actor, env *Environment, windows []FreezeWindow) error {
	return db.PutFreezeWindowsMoving(ctx, a, env, windows, Starter{})
}

// PutFreezeWindowsMoving replaces the environment's windows, audited, and
// in the same transaction moves the runs scheduled to start later (their
// reason "Frozen until …" or "Approved: starts at …", their job not taken
// by a worker yet, and locked so none takes it meanwhile) to the start the
// new windows give: a window lifted or shortened starts them sooner (at
// once when none is open now), one extended or added holds them longer,
// with their reason and a run event saying so. The rule's wait after
// approval still holds: a run is never moved before the approval that met
// its rule plus that wait.
func (db *DB) PutFreezeWindowsMoving(ctx context.Context, a Actor, env *Environment, windows []FreezeWindow, s Starter) error {
	return db.InTx(ctx, func(tx pgx.Tx) error {
		// Waits for approvals being written that read the windows (their
		// share lock of this row), and makes the next ones wait for this.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM environments WHERE id = $1 FOR NO KEY UPDATE`, env.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM freeze_windows WHERE environment_id = $1`, env.ID); err != nil {
			return err
		}
		detail := make([]map[string]any, 0, len(windows))
		for i, w := range windows {
			var from, to *time.Time
			if w.Cron == "" {
				f, t := w.From.UTC(), w.To.UTC()
				from, to = &f, &t
			}
			if _, err := tx.Exec(ctx, `INSERT INTO freeze_windows (environment_id, position, cron, duration_seconds, starts_at, ends_at, refuse)
				VALUES ($1, $2, $3, $4, $5, $6, $7)`, env.ID, i+1, w.Cron, int64(w.Duration/time.Second), from, to, w.Refuse); err != nil {
				return err
			}
			d := map[string]any{"refuse": w.Refuse}
			if w.Cron != "" {
				d["cron"], d["duration"] = w.Cron, w.Duration.String()
			} else {
				d["from"], d["to"] = w.From.UTC().Format(time.RFC3339), w.To.UTC().Format(time.RFC3339)
			}
			detail = append(detail, d)
		}
		moved, err := db.moveFrozenRunsTx(ctx, tx, env.ID, windows, s)
		if err != nil {
			return err
		}
		e := a.event("freeze.changed")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, env.Name
		e.Detail = map[string]any{"windows": detail}
		if len(moved) > 0 {
			e.Detail["moved_runs"] = moved
		}
		return auditTx(ctx, tx, e)
	})
}

// moveFrozenRunsTx moves the environment's runs scheduled to start later
// to the start windows give (see PutFreezeWindowsMoving) and
// returns what it moved: run number and new start, RFC 3339.
func (db *DB) moveFrozenRunsTx(ctx context.Context, tx pgx.Tx, envID int64, windows []FreezeWindow, s Starter) ([]map[string]any, error) {
	if s.Enqueue == nil || s.Cancel == nil || s.FrozenUntil == nil {
		return nil, nil
	}
	type waiting struct {
		id, number, jobID int64
		reason            string
		scheduled         time.Time
		floor             *time.Time
	}
	// not_before: when the rule met (by an approval, a bypass, a rule
	// asking for fewer), plus its wait, lets the run start; NULL for the
	// runs of an unprotected environment. A protected run approved before
	// not_before was kept (plan_digest set, not_before NULL) is never
	// moved sooner than its job.
	//
	// SKIP LOCKED: a run locked now is being changed by another
	// transaction (cancelled, approved, claimed by a worker because its
	// start is due), which locked it before it waits for this
	// environment's row; waiting for it here would deadlock. Such a run is
	// not moved: it is ending or starting anyway.
	rows, _ := tx.Query(ctx, `SELECT r.id, r.number, r.job_id, r.reason, j.scheduled_at,
		    CASE WHEN r.not_before IS NULL AND r.plan_digest <> '' THEN j.scheduled_at ELSE r.not_before END
		FROM runs r JOIN river_job j ON j.id = r.job_id
		WHERE r.environment_id = $1 AND r.status = 'waiting' AND NOT r.cancel_requested
		  AND (r.reason LIKE 'Frozen until %' OR r.reason LIKE 'Approved: starts at %')
		  AND j.state IN ('scheduled', 'available', 'retryable')
		ORDER BY r.id FOR UPDATE OF r, j SKIP LOCKED`, envID)
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (waiting, error) {
		var w waiting
		err := row.Scan(&w.id, &w.number, &w.jobID, &w.reason, &w.scheduled, &w.floor)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: runs waiting for a freeze: %w", err)
	}
	now := db.Now()
	var moved []map[string]any
	for _, w := range list {
		at := now
		if w.floor != nil && w.floor.After(at) {
			at = *w.floor
		}
		reason := ""
		if until, why := s.FrozenUntil(windows, at); until.After(at) {
			at, reason = until, why
		} else if at.After(now) {
			reason = approvedReason(at, now)
		}
		if at.Equal(w.scheduled) || !at.After(now) && !w.scheduled.After(now) {
			// Unchanged, or due now before and after.
			continue
		}
		if err := s.Cancel(ctx, tx, w.jobID); err != nil {
			return nil, err
		}
		jobID, err := s.Enqueue(ctx, tx, w.id, at)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, `UPDATE runs SET job_id = $2, reason = $3 WHERE id = $1`, w.id, jobID, reason); err != nil {
			return nil, err
		}
		summary := reason
		if summary == "" {
			summary = "The freeze was lifted: the deploy starts now"
		}
		if _, err := appendRunEvent(ctx, tx, w.id, nil, runPayload(RunWaiting, reason, summary)); err != nil {
			return nil, err
		}
		moved = append(moved, map[string]any{"run": w.number, "starts_at": at.UTC().Format(time.RFC3339)})
	}
	return moved, nil
}
