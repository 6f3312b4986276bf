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
// the caller: runs.CheckFreezeWindows), with their audit record.
func (db *DB) PutFreezeWindows(ctx context.Context, a Actor, env *Environment, windows []FreezeWindow) error {
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
		e := a.event("freeze.changed")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, env.Name
		e.Detail = map[string]any{"windows": detail}
		return auditTx(ctx, tx, e)
	})
}
