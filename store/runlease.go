package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/events/payload"
)

// A run being executed holds a lease: its executor (one Studio process,
// named by a lease owner unique to that process) renews it every few
// seconds. The lease's clock is the database's, the one clock every
// replica shares. An expired lease means the executor is gone: the run is
// marked at once (TakeOverLostRuns) and handed to any live process.

// ClaimRunLease makes owner the executor of an unfinished run for ttl. It
// succeeds when the run has no lease, when owner holds it already, or when
// the lease has expired (its executor is gone); it fails, changing
// nothing, while another live executor holds it, and returns then when
// that lease expires. A claim that ends an "executor lost" state appends
// the run's event, so the pages that show the state change with it.
func (db *DB) ClaimRunLease(ctx context.Context, runID int64, owner string, ttl time.Duration) (ok bool, heldUntil time.Time, err error) {
	err = db.InTx(ctx, func(tx pgx.Tx) error {
		var lost bool
		var until *time.Time
		err := tx.QueryRow(ctx, `
			WITH old AS (SELECT id, executor_lost_at IS NOT NULL AS lost FROM runs WHERE id = $1 FOR UPDATE)
			UPDATE runs r SET lease_owner = $2, lease_expires_at = clock_timestamp() + $3 * interval '1 millisecond', executor_lost_at = NULL
			FROM old
			WHERE r.id = old.id AND r.finished_at IS NULL
			  AND (r.lease_owner IS NULL OR r.lease_owner = $2 OR r.lease_expires_at < clock_timestamp())
			RETURNING old.lost, r.lease_expires_at`, runID, owner, ttl.Milliseconds()).Scan(&lost, &until)
		if errors.Is(err, pgx.ErrNoRows) {
			err = tx.QueryRow(ctx, `SELECT lease_expires_at FROM runs WHERE id = $1`, runID).Scan(&until)
			if errors.Is(err, pgx.ErrNoRows) {
				return apperr.Errorf(apperr.NotFound, "No such run.")
			}
			if until != nil {
				heldUntil = *until
			}
			return err
		}
		if err != nil {
			return err
		}
		ok = true
		if until != nil {
			heldUntil = *until
		}
		if lost {
			return appendRunStateEvent(ctx, tx, runID)
		}
		return nil
	})
	if err != nil {
		return false, time.Time{}, fmt.Errorf("store: claim run %d: %w", runID, err)
	}
	return ok, heldUntil, nil
}

// RenewRunLease extends owner's lease of the run by ttl. It reports false
// when owner no longer holds it (another process took the run over, or
// the run finished): the executor stops then.
func (db *DB) RenewRunLease(ctx context.Context, runID int64, owner string, ttl time.Duration) (bool, error) {
	tag, err := db.Pool.Exec(ctx, `
		UPDATE runs SET lease_expires_at = clock_timestamp() + $3 * interval '1 millisecond'
		WHERE id = $1 AND lease_owner = $2 AND finished_at IS NULL`, runID, owner, ttl.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("store: renew run %d: %w", runID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseRunLease gives owner's lease of the run up: the run waits in the
// database (its job is scheduled) or is finished, and no process executes
// it until its job runs again.
func (db *DB) ReleaseRunLease(ctx context.Context, runID int64, owner string) error {
	if _, err := db.Pool.Exec(ctx, `UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE id = $1 AND lease_owner = $2`,
		runID, owner); err != nil {
		return fmt.Errorf("store: release run %d: %w", runID, err)
	}
	return nil
}

// RunLease is an unfinished run's lease that has not expired.
type RunLease struct {
	RunID int64
	Owner string
}

// LiveRunLeases returns the leases of unfinished runs that have not
// expired yet.
func (db *DB) LiveRunLeases(ctx context.Context) ([]RunLease, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT id, lease_owner FROM runs
		WHERE finished_at IS NULL AND lease_owner IS NOT NULL AND lease_expires_at >= clock_timestamp()`)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RunLease, error) {
		var l RunLease
		err := row.Scan(&l.RunID, &l.Owner)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: run leases: %w", err)
	}
	return out, nil
}

// ExpireRunLease ends owner's lease of the run now: its executor is known
// to be gone, so the run need not wait for the lease to run out before it
// is taken over.
func (db *DB) ExpireRunLease(ctx context.Context, runID int64, owner string) error {
	if _, err := db.Pool.Exec(ctx, `UPDATE runs SET lease_expires_at = clock_timestamp() - interval '1 millisecond'
		WHERE id = $1 AND lease_owner = $2`, runID, owner); err != nil {
		return fmt.Errorf("store: expire run %d lease: %w", runID, err)
	}
	return nil
}

// LostRun is a run whose executor is gone, as TakeOverLostRuns hands it to
// its caller.
type LostRun struct {
	ID            int64
	EnvironmentID int64
	Kind          RunKind
	// JobID is the job the lost executor worked on, nil when none.
	JobID *int64
}

// TakeOverLostRuns finds the unfinished runs whose lease has expired and
// are not marked yet, marks each "executor lost" with its events (the run
// page, the runs list and the environment page show it at once), and
// calls requeue inside the same transaction to hand the run's work to a
// new job, whose id it records. Rows are claimed with SKIP LOCKED, so any
// number of processes may call it at once and each run is taken over
// once. It returns the ids of the runs it took over.
func (db *DB) TakeOverLostRuns(ctx context.Context, requeue func(ctx context.Context, tx pgx.Tx, run LostRun) (int64, error)) ([]int64, error) {
	var ids []int64
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `
			SELECT id, environment_id, kind, job_id FROM runs
			WHERE finished_at IS NULL AND lease_owner IS NOT NULL AND lease_expires_at < clock_timestamp() AND executor_lost_at IS NULL
			ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED`)
		lost, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (LostRun, error) {
			var l LostRun
			err := row.Scan(&l.ID, &l.EnvironmentID, &l.Kind, &l.JobID)
			return l, err
		})
		if err != nil {
			return err
		}
		for _, l := range lost {
			if _, err := tx.Exec(ctx, `UPDATE runs SET executor_lost_at = $2, orphaned = true WHERE id = $1`, l.ID, db.Now()); err != nil {
				return err
			}
			if err := appendRunStateEvent(ctx, tx, l.ID); err != nil {
				return err
			}
			if requeue != nil {
				jobID, err := requeue(ctx, tx, l)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `UPDATE runs SET job_id = $2 WHERE id = $1`, l.ID, jobID); err != nil {
					return err
				}
			}
			ids = append(ids, l.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: take over lost runs: %w", err)
	}
	return ids, nil
}

// appendRunStateEvent appends a run-level event that carries the run's
// status as it stands, and the same to its environment's stream, for a
// change the pages show beside the status (its executor lost, or back).
func appendRunStateEvent(ctx context.Context, tx pgx.Tx, runID int64) error {
	var envID int64
	var kind, status, reason, summary string
	var lost bool
	if err := tx.QueryRow(ctx, `SELECT environment_id, kind, status, reason, COALESCE(detail->>'summary', ''), executor_lost_at IS NOT NULL
		FROM runs WHERE id = $1`, runID).Scan(&envID, &kind, &status, &reason, &summary, &lost); err != nil {
		return err
	}
	p := runPayload(status, reason, summary)
	p.Run.ExecutorLost = payload.Bool(lost)
	if _, err := appendRunEvent(ctx, tx, runID, nil, p); err != nil {
		return err
	}
	_, err := appendEnvironmentEvent(ctx, tx, envID, &runID, payload.EnvironmentChanged{Type: payload.KindRunExecutor,
		Run: &payload.RunRef{ID: runID, Kind: kind, Status: status, ExecutorLost: payload.Bool(lost)}})
	return err
}

// ExecutorLost reports whether the unfinished run's executor is gone and
// no live process has taken it over yet.
func (r *Run) ExecutorLost() bool {
	return r.ExecutorLostAt != nil && !RunFinished(r.Status)
}

// LocalReleaseOutcome is what the local platform recorded of a release
// command: started, and once it ended, finished with its error ("" when it
// succeeded).
type LocalReleaseOutcome struct {
	Started  bool
	Finished bool
	Error    string
}

// StartLocalRelease records that the local platform starts the release
// command of a run's checkpoint.
func (db *DB) StartLocalRelease(ctx context.Context, runID int64, position int) error {
	if _, err := db.Pool.Exec(ctx, `
		INSERT INTO local_release_outcomes (run_id, position, started_at) VALUES ($1, $2, $3)
		ON CONFLICT (run_id, position) DO UPDATE SET started_at = $3, finished_at = NULL, error = NULL`,
		runID, position, db.Now()); err != nil {
		return fmt.Errorf("store: start local release: %w", err)
	}
	return nil
}

// FinishLocalRelease records what the release command came to.
func (db *DB) FinishLocalRelease(ctx context.Context, runID int64, position int, errText string) error {
	if _, err := db.Pool.Exec(ctx, `UPDATE local_release_outcomes SET finished_at = $3, error = $4 WHERE run_id = $1 AND position = $2`,
		runID, position, db.Now(), errText); err != nil {
		return fmt.Errorf("store: finish local release: %w", err)
	}
	return nil
}

// LocalRelease returns what the local platform recorded of a release
// command (the zero outcome when it never started).
func (db *DB) LocalRelease(ctx context.Context, runID int64, position int) (LocalReleaseOutcome, error) {
	var o LocalReleaseOutcome
	var errText *string
	err := db.Pool.QueryRow(ctx, `SELECT finished_at IS NOT NULL, error FROM local_release_outcomes WHERE run_id = $1 AND position = $2`,
		runID, position).Scan(&o.Finished, &errText)
	if errors.Is(err, pgx.ErrNoRows) {
		return LocalReleaseOutcome{}, nil
	}
	if err != nil {
		return o, fmt.Errorf("store: local release: %w", err)
	}
	o.Started = true
	if errText != nil {
		o.Error = *errText
	}
	return o, nil
}
