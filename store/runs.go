package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/events/payload"
)

// Run statuses (the event format's: see package payload).
const (
	RunPending               = payload.RunPending
	RunRunning               = payload.RunRunning
	RunWaiting               = payload.RunWaiting
	RunSucceeded             = payload.RunSucceeded
	RunSucceededWithWarnings = payload.RunSucceededWithWarnings
	RunFailed                = payload.RunFailed
	RunCancelled             = payload.RunCancelled
	RunRejected              = payload.RunRejected
)

// Checkpoint statuses (the event format's).
const (
	CheckpointPending   = payload.CheckpointPending
	CheckpointRunning   = payload.CheckpointRunning
	CheckpointWaiting   = payload.CheckpointWaiting
	CheckpointSucceeded = payload.CheckpointSucceeded
	CheckpointFailed    = payload.CheckpointFailed
	CheckpointSkipped   = payload.CheckpointSkipped
	CheckpointNotRun    = payload.CheckpointNotRun
)

// RunFinished reports whether status ends a run.
func RunFinished(status string) bool {
	switch status {
	case RunSucceeded, RunSucceededWithWarnings, RunFailed, RunCancelled, RunRejected:
		return true
	}
	return false
}

// CheckpointDone reports whether a checkpoint with status is finished.
func CheckpointDone(status string) bool {
	return status == CheckpointSucceeded || status == CheckpointFailed || status == CheckpointSkipped || status == CheckpointNotRun
}

// RunKind is what a run does.
type RunKind string

// The kinds of runs (the runs table's kind).
const (
	RunDeploy    RunKind = "deploy"
	RunReconcile RunKind = "reconcile"
	RunBackup    RunKind = "backup"
	RunRestore   RunKind = "restore"
	// RunDrill restores the newest good snapshot into a scratch place
	// and checks it, without touching the environment.
	RunDrill RunKind = "drill"
	// RunDelete deletes an environment.
	RunDelete RunKind = "delete"
)

// Run is a deploy, reconcile, backup or restore of one environment.
type Run struct {
	ID int64
	// Number counts the runs of its environment (1, 2, …): what people
	// see ("#12 of production"); ID stays in URLs and the API.
	Number        int
	EnvironmentID int64
	Kind          RunKind
	Status        string
	// Reason says why the run failed or was cancelled.
	Reason          string
	CancelRequested bool
	RevisionID      *int64
	FromRevisionID  *int64
	// Revision and FromRevision are the revision numbers (0 when none).
	Revision     int
	FromRevision int
	CreatedBy    string
	CreatedAt    time.Time
	StartedAt    *time.Time
	FinishedAt   *time.Time
	JobID        *int64
	// Detail is the runs package's JSON (summary, deadline, counts).
	Detail json.RawMessage
	// LastSeq is the sequence number of the run's newest event: a page
	// rendered from this row follows the run's stream after it.
	LastSeq int64
	// ExecutorLostAt is when the run's lease was found expired: the process
	// executing it stopped renewing it (killed, or cut off from the
	// database). It is cleared when a live process takes the run over.
	ExecutorLostAt *time.Time
	// ReleaseOf is the earlier deploy whose release this rollback deploys
	// again (its revision and value versions).
	ReleaseOf *int64
	// PlanDigest is the digest of the plan a deploy of a protected
	// environment asks approval for ("" when it needs none).
	PlanDigest string
}

// scanTargets are the destinations of runColumns, in order.
func (r *Run) scanTargets() []any {
	return []any{&r.ID, &r.EnvironmentID, &r.Kind, &r.Status, &r.Reason, &r.CancelRequested, &r.RevisionID, &r.FromRevisionID,
		&r.Revision, &r.FromRevision, &r.CreatedBy, &r.CreatedAt, &r.StartedAt, &r.FinishedAt, &r.JobID, &r.Detail, &r.LastSeq,
		&r.ExecutorLostAt, &r.ReleaseOf, &r.PlanDigest, &r.Number}
}

// Checkpoint is one step of a run.
type Checkpoint struct {
	RunID      int64
	Position   int
	Kind       string
	Name       string
	Status     string
	StartedAt  *time.Time
	FinishedAt *time.Time
	Warning    string
	// Detail is the runs package's typed details as JSON.
	Detail json.RawMessage
}

// NewCheckpoint is a checkpoint of a run to create.
type NewCheckpoint struct {
	Kind, Name string
	Detail     any
}

// NewRun is a run to create with its checkpoints.
type NewRun struct {
	EnvironmentID  int64
	Kind           RunKind
	RevisionID     *int64
	FromRevisionID *int64
	Checkpoints    []NewCheckpoint
	Detail         any
	// AuditAction and AuditDetail record who started the run; no record when empty.
	AuditAction string
	AuditDetail map[string]any
	// ExclusiveDeploy refuses the run while a deploy or a restore of the
	// environment is unfinished.
	ExclusiveDeploy bool
	// ReleaseOf and Release make the run a rollback: the release of that
	// earlier deploy (its value versions) is fixed as this run's own.
	ReleaseOf *int64
	Release   []NameVersion
	// ClaimHostnames are the deploy's resolved hostnames, claimed for the
	// environment in the run's creation transaction: one another
	// environment holds, or one a concurrent transaction claims first,
	// fails the creation with a *ClaimConflict and no run is created.
	ClaimHostnames []string
	// WaitForApproval creates the run 'waiting' for approval of the plan
	// whose digest is PlanDigest: Enqueue is not called (ApproveRun
	// inserts the job once the environment's rule is met); AfterCreate
	// (the expiry job) is.
	WaitForApproval bool
	PlanDigest      string
	AfterCreate     func(ctx context.Context, tx pgx.Tx, runID int64) error
	// Frozen creates the run 'waiting' with this reason ("Frozen until
	// Mon 06:00 UTC"): its job (Enqueue) is scheduled at the freeze
	// window's end, in this transaction.
	Frozen string
	// Publish are the value versions an admin publishes in a hostname
	// with this deploy (recorded with the run: Publications).
	Publish []NameVersion
	// Enqueue inserts the job that executes the run inside the same
	// transaction and returns its id; nil for a run recorded whole.
	Enqueue func(ctx context.Context, tx pgx.Tx, runID int64) (int64, error)
}

// CreateRun stores a run, its checkpoints, its first event and its audit
// record, and enqueues its job, in one transaction.
func (db *DB) CreateRun(ctx context.Context, a Actor, env *Environment, nr NewRun) (*Run, error) {
	var id int64
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		id, err = db.createRunTx(ctx, tx, a, env, nr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: create run: %w", err)
	}
	return db.RunByID(ctx, id)
}

// createRunTx is CreateRun inside tx (a backup fire creates its run in the
// transaction that claims the fire).
func (db *DB) createRunTx(ctx context.Context, tx pgx.Tx, a Actor, env *Environment, nr NewRun) (int64, error) {
	var id int64
	err := func() error {
		var state string
		if err := tx.QueryRow(ctx, `SELECT state FROM environments WHERE id = $1 FOR UPDATE`, env.ID).Scan(&state); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return apperr.Errorf(apperr.NotFound, "Project %q has no environment named %q.", env.Project, env.Name)
			}
			return err
		}
		// A deleting environment starts no run but its delete runs.
		if state == EnvironmentDeleting && nr.Kind != RunDelete {
			return apperr.Errorf(apperr.Conflict, "%s/%s is being deleted: no run of it starts.", env.Project, env.Name)
		}
		if nr.ExclusiveDeploy {
			// Under the environment's lock: a deploy or restore created
			// before this one commits is seen here, whatever the state the
			// caller read (a restore stops the environment only once its
			// job runs).
			var other int
			var kind RunKind
			err := tx.QueryRow(ctx, `SELECT number, kind FROM runs WHERE environment_id = $1 AND kind IN ('deploy', 'restore') AND finished_at IS NULL ORDER BY id LIMIT 1`, env.ID).Scan(&other, &kind)
			switch {
			case err == nil && kind == RunRestore:
				return apperr.Errorf(apperr.Conflict, "Restore run #%d of %s is still in progress. Wait for it to finish.", other, env.Name)
			case err == nil:
				return apperr.Errorf(apperr.Conflict, "Deploy run #%d of %s is still in progress. Wait for it to finish or cancel it first.", other, env.Name)
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
		}
		detail, err := json.Marshal(orEmpty(nr.Detail))
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `
			INSERT INTO runs (environment_id, kind, revision_id, from_revision_id, created_by, created_at, detail)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
			env.ID, nr.Kind, nr.RevisionID, nr.FromRevisionID, a.userID(), db.Now(), detail).Scan(&id); err != nil {
			return err
		}
		if err := claimHostnamesTx(ctx, tx, env.ID, id, nr.ClaimHostnames, db.Now()); err != nil {
			return err
		}
		if err := publishTx(ctx, tx, env.ID, id, a.userID(), nr.Publish, db.Now()); err != nil {
			return err
		}
		if nr.ReleaseOf != nil {
			if _, err := tx.Exec(ctx, `UPDATE runs SET release_of = $2 WHERE id = $1`, id, *nr.ReleaseOf); err != nil {
				return err
			}
			if err := pinRelease(ctx, tx, id, nr.Release); err != nil {
				return err
			}
		}
		rows := make([][]any, len(nr.Checkpoints))
		for i, c := range nr.Checkpoints {
			d, err := json.Marshal(orEmpty(c.Detail))
			if err != nil {
				return err
			}
			rows[i] = []any{id, i + 1, c.Kind, c.Name, d}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"run_checkpoints"}, []string{"run_id", "position", "kind", "name", "detail"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		if _, err := appendRunEvent(ctx, tx, id, nil, runPayload(RunPending, "", "")); err != nil {
			return err
		}
		if nr.WaitForApproval {
			if _, err := tx.Exec(ctx, `UPDATE runs SET status = 'waiting', plan_digest = $2 WHERE id = $1`, id, nr.PlanDigest); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE run_checkpoints SET status = 'waiting' WHERE run_id = $1 AND position = 1`, id); err != nil {
				return err
			}
			if err := db.recordApprovalWebhook(ctx, tx, env.ID, id, WebhookApprovalRequested, 0, 0); err != nil {
				return err
			}
			if _, err := appendRunEvent(ctx, tx, id, nil, runPayload(RunWaiting, "", "Waiting for approval")); err != nil {
				return err
			}
			if nr.AfterCreate != nil {
				if err := nr.AfterCreate(ctx, tx, id); err != nil {
					return err
				}
			}
		} else if nr.Enqueue != nil {
			jobID, err := nr.Enqueue(ctx, tx, id)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE runs SET job_id = $2 WHERE id = $1`, id, jobID); err != nil {
				return err
			}
		}
		if nr.Frozen != "" && !nr.WaitForApproval {
			if _, err := tx.Exec(ctx, `UPDATE runs SET status = 'waiting', reason = $2 WHERE id = $1`, id, nr.Frozen); err != nil {
				return err
			}
			if _, err := appendRunEvent(ctx, tx, id, nil, runPayload(RunWaiting, nr.Frozen, nr.Frozen)); err != nil {
				return err
			}
		}
		if nr.AuditAction != "" {
			e := a.event(nr.AuditAction)
			e.Project, e.Environment, e.EnvironmentID = env.Project, env.Name, &env.ID
			e.Target = fmt.Sprintf("run %d", id)
			e.Detail = nr.AuditDetail
			if err := auditTx(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	}()
	return id, err
}

func orEmpty(v any) any {
	if v == nil {
		return map[string]any{}
	}
	return v
}

// runPayload is a run-level event of a run's stream.
func runPayload(status, reason, summary string) payload.RunChanged {
	return payload.RunChanged{Run: payload.RunState{Status: status, Reason: reason, Summary: summary}}
}

var runColumns = `r.id, r.environment_id, r.kind, r.status, r.reason, r.cancel_requested, r.revision_id, r.from_revision_id,
	COALESCE((SELECT number FROM revisions WHERE id = r.revision_id), 0),
	COALESCE((SELECT number FROM revisions WHERE id = r.from_revision_id), 0),
	` + displayNameOf("r.created_by") + `,
	r.created_at, r.started_at, r.finished_at, r.job_id, r.detail, r.last_seq, r.executor_lost_at, r.release_of, r.plan_digest, r.number`

func scanRun(row pgx.Row) (*Run, error) {
	var r Run
	err := row.Scan(r.scanTargets()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "No such run.")
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// RunByID returns one run.
func (db *DB) RunByID(ctx context.Context, id int64) (*Run, error) {
	r, err := scanRun(db.Pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("store: run: %w", err)
	}
	return r, nil
}

// RunsByID returns the runs of ids that exist, by id, in one statement
// (a list page's runs, not a statement per row).
func (db *DB) RunsByID(ctx context.Context, ids []int64) (map[int64]*Run, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = ANY($1)`, append([]int64{}, ids...))
	out := map[int64]*Run{}
	_, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
		r, err := scanRun(row)
		if err == nil {
			out[r.ID] = r
		}
		return struct{}{}, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: runs: %w", err)
	}
	return out, nil
}

// Runs returns the environment's newest runs first, at most limit.
func (db *DB) Runs(ctx context.Context, envID int64, limit int) ([]Run, error) {
	return db.RunsBefore(ctx, envID, 0, limit)
}

// RunsBefore is Runs from the run before run number before on (older than
// it; 0: from the newest), so a long list is read page by page.
func (db *DB) RunsBefore(ctx context.Context, envID, before int64, limit int) ([]Run, error) {
	return db.RunsWhere(ctx, envID, RunFilter{Before: before}, limit)
}

// RunFilter narrows a runs list: Before as in RunsBefore, Kind one kind
// ("" any), Statuses any of these statuses (none: any).
type RunFilter struct {
	Before   int64
	Kind     RunKind
	Statuses []string
}

// RunsWhere returns up to limit of the environment's runs that f lets
// through, newest first.
func (db *DB) RunsWhere(ctx context.Context, envID int64, f RunFilter, limit int) ([]Run, error) {
	// The statement names only the filters in use, so that each is an
	// index condition in every plan, generic ones included (a generic plan
	// of "$2 = 0 OR id < $2" can use neither). With several statuses, each
	// is read from the top of its own index range and the pages merged.
	args := []any{envID, limit}
	var cond string
	if f.Before > 0 {
		args = append(args, f.Before)
		cond += fmt.Sprintf(` AND r.id < $%d`, len(args))
	}
	if f.Kind != "" {
		args = append(args, f.Kind)
		cond += fmt.Sprintf(` AND r.kind = $%d`, len(args))
	}
	query := `SELECT ` + runColumns + ` FROM (` + newestRunsOf(cond) + `) r`
	if len(f.Statuses) > 0 {
		parts := make([]string, 0, len(f.Statuses))
		for _, st := range f.Statuses {
			args = append(args, st)
			parts = append(parts, `(`+newestRunsOf(cond+fmt.Sprintf(` AND r.status = $%d`, len(args)))+`)`)
		}
		query = `SELECT ` + runColumns + ` FROM (` + strings.Join(parts, ` UNION ALL `) + `) r ORDER BY r.id DESC LIMIT $2`
	} else {
		query += ` ORDER BY r.id DESC`
	}
	rows, _ := db.Pool.Query(ctx, query, args...)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Run, error) {
		r, err := scanRun(row)
		if err != nil {
			return Run{}, err
		}
		return *r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: runs: %w", err)
	}
	return out, nil
}

// newestRunsOf is the statement of environment $1's newest $2 runs that
// cond (" AND …" over runs r, or "") lets through, newest first. The
// runs are read through a lateral join on the environment's row, so that
// the planner estimates them as an average environment's: an index range
// of (environment_id, id DESC) read from its top, in every plan. Given
// the environment as a constant, it would estimate a busy environment's
// runs as a share of all and may walk the primary key backwards,
// filtering out every other environment's newer runs: fast while the
// environment's runs are the newest, a scan of the table when they are
// old.
func newestRunsOf(cond string) string {
	return `SELECT r.* FROM environments e CROSS JOIN LATERAL (
		SELECT r.* FROM runs r WHERE r.environment_id = e.id` + cond + ` ORDER BY r.id DESC LIMIT $2) r
		WHERE e.id = $1`
}

// Checkpoints returns the run's checkpoints in order.
func (db *DB) Checkpoints(ctx context.Context, runID int64) ([]Checkpoint, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT run_id, position, kind, name, status, started_at, finished_at, warning, detail
		FROM run_checkpoints WHERE run_id = $1 ORDER BY position`, runID)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Checkpoint, error) {
		var c Checkpoint
		err := row.Scan(&c.RunID, &c.Position, &c.Kind, &c.Name, &c.Status, &c.StartedAt, &c.FinishedAt, &c.Warning, &c.Detail)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: checkpoints: %w", err)
	}
	return out, nil
}

// RunChange is one change of a run, applied with its events in one
// transaction: the run's status, a checkpoint, a certificate, the service
// state and the environment's active revision, each optional.
type RunChange struct {
	RunID int64
	// Status is the run's new status; "" keeps it. Reason goes with it.
	Status string
	Reason string
	// Detail replaces the run's detail when not nil; its "summary" field is
	// the run's plain-text summary.
	Detail any
	// Checkpoint changes one checkpoint.
	Checkpoint *CheckpointChange
	// Certificate is stored (by environment and domain) when not nil.
	Certificate *Certificate
	// ServiceState, with Certificate, is announced as the domain's new state
	// on the environment page ("DNS pending", "issued", "cert failed · ...").
	ServiceState string
	// Activate sets the environment's active revision; the deferred and
	// failed certificates of domains other than ActiveDomains are dropped
	// then (the reconciler stops probing hostnames nothing uses).
	Activate      *int64
	ActiveDomains []string
	// ActiveHostnames, with Activate, become the environment's hostname
	// claims exactly: the hostnames of what it now runs. Claims of names
	// it no longer uses are released. (A deploy that fails or is cancelled
	// never activates: it keeps what it claimed, since the platform may
	// already serve those hostnames.)
	ActiveHostnames []string
	// Converging sets (or with ClearConverging clears) the revision a failed
	// first deploy keeps converging to.
	Converging      *int64
	ClearConverging bool
	// EnvironmentState sets the environment's state (a restore: restoring,
	// active, down: restore failed) when not "".
	EnvironmentState string
	// Lease, when set, applies the change only while this lease owner
	// holds the run's lease: an executor that lost its run to another
	// process (see ClaimRunLease) changes nothing any more. A change that
	// finishes the run gives the lease up.
	Lease string
}

// CheckpointChange is a checkpoint's new state.
type CheckpointChange struct {
	Position int
	Status   string
	Warning  string
	// Detail replaces the checkpoint's detail when not nil.
	Detail any
	// From, when set, applies the change only while the checkpoint has one
	// of these statuses: a resumed run never redoes a recorded step.
	From []string
}

// ApplyRunChange applies c and appends its run event (and, when the run
// starts or finishes or a service's state changes, its environment event)
// in one transaction. It reports false, changing nothing, when the
// checkpoint is no longer in one of c.Checkpoint.From, and whether the run
// was asked to cancel (so executors need no query of their own for it).
func (db *DB) ApplyRunChange(ctx context.Context, c RunChange) (applied bool, err error) {
	_, applied, err = db.applyRunChange(ctx, c)
	return applied, err
}

// ApplyRunChangeCancel is ApplyRunChange that also reports whether the run
// has been asked to cancel.
func (db *DB) ApplyRunChangeCancel(ctx context.Context, c RunChange) (cancel, applied bool, err error) {
	return db.applyRunChange(ctx, c)
}

func (db *DB) applyRunChange(ctx context.Context, c RunChange) (cancel, applied bool, err error) {
	now := db.Now()
	var cpDetail, runDetail []byte
	position := 0
	var cpStatus, cpWarning string
	var from []string
	if cc := c.Checkpoint; cc != nil {
		position, cpStatus, cpWarning, from = cc.Position, cc.Status, cc.Warning, cc.From
		if cc.Detail != nil {
			if cpDetail, err = json.Marshal(cc.Detail); err != nil {
				return false, false, err
			}
		}
	}
	if c.Detail != nil {
		if runDetail, err = json.Marshal(c.Detail); err != nil {
			return false, false, err
		}
	}
	var envID int64
	var kind RunKind
	var status string
	var wasStarted, wasFinished bool
	err = db.InTx(ctx, func(tx pgx.Tx) error {
		// One statement changes the checkpoint (when it still has a status
		// of From) and the run, and returns what the run's event says; the
		// event is then appended by the one append statement, in the same
		// transaction (the run's row lock, taken here, keeps its sequence
		// numbers without gaps).
		var reason, summary string
		var cpKind, cpName *string
		err := tx.QueryRow(ctx, `
			WITH cp AS (
			    UPDATE run_checkpoints SET status = $6, warning = $7, detail = COALESCE($8::jsonb, detail),
			           started_at = CASE WHEN started_at IS NULL AND $6 NOT IN ('pending', 'not-run') THEN $5 ELSE started_at END,
			           finished_at = CASE WHEN $6 IN ('succeeded', 'failed', 'skipped') THEN $5 END
			    WHERE $2 > 0 AND run_id = $1 AND position = $2 AND ($9::text[] IS NULL OR status = ANY($9))
			      AND ($11::text = '' OR EXISTS (SELECT 1 FROM runs WHERE id = $1 AND lease_owner = $11))
			    RETURNING kind, name),
			r AS (
			    UPDATE runs r SET
			        status = CASE WHEN $3 = '' THEN r.status ELSE $3 END,
			        reason = CASE WHEN $3 = '' THEN r.reason ELSE $4 END,
			        detail = COALESCE($10::jsonb, r.detail),
			        started_at = CASE WHEN r.started_at IS NULL AND $3 IN ('running', 'waiting', 'succeeded', 'succeeded-with-warnings', 'failed') THEN $5 ELSE r.started_at END,
			        finished_at = CASE WHEN $3 IN ('succeeded', 'succeeded-with-warnings', 'failed', 'cancelled') THEN $5 ELSE r.finished_at END,
			        lease_owner = CASE WHEN $3 IN ('succeeded', 'succeeded-with-warnings', 'failed', 'cancelled') THEN NULL ELSE r.lease_owner END,
			        lease_expires_at = CASE WHEN $3 IN ('succeeded', 'succeeded-with-warnings', 'failed', 'cancelled') THEN NULL ELSE r.lease_expires_at END,
			        executor_lost_at = CASE WHEN $3 IN ('succeeded', 'succeeded-with-warnings', 'failed', 'cancelled') THEN NULL ELSE r.executor_lost_at END
			    FROM (SELECT started_at IS NOT NULL AS started, finished_at IS NOT NULL AS finished FROM runs WHERE id = $1) old
			    WHERE r.id = $1 AND ($2 = 0 OR EXISTS (SELECT 1 FROM cp))
			      AND ($11::text = '' OR r.lease_owner = $11)
			      -- A run finishes once: a change that would finish it again
			      -- (retried after its commit's answer was lost) is not applied.
			      AND NOT (old.finished AND $3 IN ('succeeded', 'succeeded-with-warnings', 'failed', 'cancelled'))
			    RETURNING r.id, r.environment_id, r.kind, r.status, r.reason, COALESCE(r.detail->>'summary', '') AS summary,
			        r.cancel_requested, old.started, old.finished)
			SELECT r.environment_id, r.kind, r.status, r.reason, r.summary, r.cancel_requested, r.started, r.finished, cp.kind, cp.name
			FROM r LEFT JOIN cp ON true`,
			c.RunID, position, c.Status, c.Reason, now, cpStatus, cpWarning, cpDetail, from, runDetail, c.Lease).
			Scan(&envID, &kind, &status, &reason, &summary, &cancel, &wasStarted, &wasFinished, &cpKind, &cpName)
		if errors.Is(err, pgx.ErrNoRows) {
			return errNotApplied
		}
		if err != nil {
			return err
		}
		ev := runPayload(status, reason, summary)
		var ref *int
		if cpKind != nil {
			ref = &position
			ev.Checkpoint = &payload.CheckpointState{Position: position, Kind: *cpKind, Name: *cpName, Status: cpStatus, Warning: cpWarning}
		}
		if _, err := appendRunEvent(ctx, tx, c.RunID, ref, ev); err != nil {
			return err
		}
		if c.Status == "" && c.Certificate == nil && c.Activate == nil && c.EnvironmentState == "" && c.Converging == nil && !c.ClearConverging {
			return nil // a change of a checkpoint alone
		}
		return db.runChangeEffects(ctx, tx, c, envID, kind, status, wasStarted, wasFinished, now)
	})
	if errors.Is(err, errNotApplied) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("store: run %d change: %w", c.RunID, err)
	}
	return cancel, true, nil
}

// runChangeEffects writes what a change implies beyond its checkpoint, run
// and run event, inside its transaction: the environment's events (run
// started or finished, service state), the certificate, activation and
// the environment's state.
func (db *DB) runChangeEffects(ctx context.Context, tx pgx.Tx, c RunChange, envID int64, kind RunKind, status string, wasStarted, wasFinished bool, now time.Time) error {
	runRef := &payload.RunRef{ID: c.RunID, Kind: string(kind), Status: status}
	if !wasStarted && c.Status != "" && c.Status != RunPending && c.Status != RunCancelled {
		if _, err := appendEnvironmentEvent(ctx, tx, envID, &c.RunID, payload.EnvironmentChanged{Type: payload.KindRunStarted, Run: runRef}); err != nil {
			return err
		}
	}
	if !wasFinished && RunFinished(c.Status) {
		if _, err := appendEnvironmentEvent(ctx, tx, envID, &c.RunID, payload.EnvironmentChanged{Type: payload.KindRunFinished, Run: runRef}); err != nil {
			return err
		}
	}
	if kind == RunDrill && !wasFinished && RunFinished(c.Status) {
		if err := drillFinishedTx(ctx, tx, envID, c.RunID, c.Status, now); err != nil {
			return err
		}
	}
	// Webhooks (store/webhooks.go) hear of it in the same transaction.
	if err := db.recordRunWebhooks(ctx, tx, c, envID, kind, status, wasStarted, wasFinished); err != nil {
		return err
	}
	if cert := c.Certificate; cert != nil {
		cert.EnvironmentID = envID
		if err := db.recordCertificateWebhook(ctx, tx, envID, cert); err != nil {
			return err
		}
		if err := upsertCertificate(ctx, tx, cert, now); err != nil {
			return err
		}
		if c.ServiceState != "" {
			if _, err := appendEnvironmentEvent(ctx, tx, envID, &c.RunID, payload.EnvironmentChanged{Type: payload.KindServiceState, Run: runRef,
				Service: &payload.ServiceState{Domain: cert.Domain, State: c.ServiceState}}); err != nil {
				return err
			}
		}
	}
	if c.Activate != nil {
		if _, err := tx.Exec(ctx, `UPDATE environments SET active_revision_id = $2, converging_revision_id = NULL WHERE id = $1`, envID, *c.Activate); err != nil {
			return err
		}
		if c.ActiveDomains != nil {
			if _, err := tx.Exec(ctx, `DELETE FROM certificates WHERE environment_id = $1 AND state <> 'issued' AND NOT (domain = ANY($2))`,
				envID, c.ActiveDomains); err != nil {
				return err
			}
		}
		if c.ActiveHostnames != nil {
			if err := releaseHostnamesTx(ctx, tx, envID, c.RunID, c.ActiveHostnames, now); err != nil {
				return err
			}
		}
	}
	if c.EnvironmentState != "" {
		if err := setEnvironmentState(ctx, tx, envID, &c.RunID, c.EnvironmentState); err != nil {
			return err
		}
	}
	if c.Converging != nil || c.ClearConverging {
		if _, err := tx.Exec(ctx, `UPDATE environments SET converging_revision_id = $2 WHERE id = $1`, envID, c.Converging); err != nil {
			return err
		}
	}
	return nil
}

var errNotApplied = errors.New("store: change not applied")

// RequestCancel asks the run to stop at its next safe point, with its audit
// record. A finished run cannot be cancelled.
func (db *DB) RequestCancel(ctx context.Context, a Actor, env *Environment, runID int64) (*Run, error) {
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var finished bool
		err := tx.QueryRow(ctx, `
			UPDATE runs SET cancel_requested = true WHERE id = $1 AND environment_id = $2
			RETURNING finished_at IS NOT NULL`, runID, env.ID).Scan(&finished)
		if errors.Is(err, pgx.ErrNoRows) {
			return apperr.Errorf(apperr.NotFound, "No such run.")
		}
		if err != nil {
			return err
		}
		if finished {
			return apperr.Errorf(apperr.Conflict, "Run %d has already finished.", runID)
		}
		e := a.event("run.cancel_requested")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, fmt.Sprintf("run %d", runID)
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return nil, fmt.Errorf("store: cancel run: %w", err)
	}
	return db.RunByID(ctx, runID)
}

// ConvergingRevision returns the revision a failed first deploy of the
// environment still converges to, or nil.
func (db *DB) ConvergingRevision(ctx context.Context, envID int64) (*int64, error) {
	var id *int64
	if err := db.Pool.QueryRow(ctx, `SELECT converging_revision_id FROM environments WHERE id = $1`, envID).Scan(&id); err != nil {
		return nil, fmt.Errorf("store: converging revision: %w", err)
	}
	return id, nil
}

// UnfinishedRuns returns the ids of runs not finished, oldest first.
func (db *DB) UnfinishedRuns(ctx context.Context) ([]int64, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT id FROM runs WHERE finished_at IS NULL ORDER BY id`)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("store: unfinished runs: %w", err)
	}
	return ids, nil
}

// UnfinishedReconcile reports whether a reconcile run about domain is
// still unfinished in the environment.
func (db *DB) UnfinishedReconcile(ctx context.Context, envID int64, domain string) (bool, error) {
	var ok bool
	err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE environment_id = $1 AND kind = 'reconcile'
		AND finished_at IS NULL AND detail->>'domain' = $2)`, envID, domain).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("store: unfinished reconcile: %w", err)
	}
	return ok, nil
}

// UnfinishedDeploy returns the id of the environment's unfinished deploy
// run, 0 when there is none.
func (db *DB) UnfinishedDeploy(ctx context.Context, envID int64) (int64, error) {
	var id int64
	err := db.Pool.QueryRow(ctx, `SELECT COALESCE(min(id), 0) FROM runs WHERE environment_id = $1 AND kind = 'deploy' AND finished_at IS NULL`, envID).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("store: unfinished deploy: %w", err)
	}
	return id, nil
}

// HasUnfinishedDeploy reports whether a deploy of the environment is still
// unfinished (it then looks after its certificates itself).
func (db *DB) HasUnfinishedDeploy(ctx context.Context, envID int64) (bool, error) {
	var ok bool
	err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE environment_id = $1 AND kind = 'deploy' AND finished_at IS NULL)`, envID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("store: unfinished deploy: %w", err)
	}
	return ok, nil
}
