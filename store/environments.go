package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/humanize"
)

// Environment is one deployment target of a project (production, staging ...).
type Environment struct {
	ID        int64
	ProjectID int64
	Project   string
	Name      string
	// State is active, restoring or down.
	State            string
	ActiveRevisionID *int64
	CreatedAt        time.Time
	// LastEventSeq is the sequence number of the environment's newest
	// event (run started or finished, service state): its page follows the
	// environment's stream after it.
	LastEventSeq int64
}

// ValidEnvironmentName reports whether name may name an environment: the
// manifest's rule for stable keys.
func ValidEnvironmentName(name string) bool { return compiler.IsKey(name) }

const environmentColumns = `e.id, e.project_id, p.name, e.name, e.state, e.active_revision_id, e.created_at, e.last_event_seq`

func scanEnvironment(row pgx.Row) (*Environment, error) {
	var e Environment
	err := row.Scan(&e.ID, &e.ProjectID, &e.Project, &e.Name, &e.State, &e.ActiveRevisionID, &e.CreatedAt, &e.LastEventSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "No such environment.")
	}
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// collectEnvironment is a pgx.RowToFunc for queries selecting environmentColumns.
func collectEnvironment(row pgx.CollectableRow) (Environment, error) {
	e, err := scanEnvironment(row)
	if err != nil {
		return Environment{}, err
	}
	return *e, nil
}

// CreateEnvironment adds an environment named name to the project, with its
// audit record.
func (db *DB) CreateEnvironment(ctx context.Context, a Actor, projectID int64, name string) (*Environment, error) {
	if len(name) > 63 {
		return nil, apperr.Errorf(apperr.Invalid, "This name has %s.", humanize.TooLong(len(name), 63))
	}
	if !ValidEnvironmentName(name) {
		return nil, apperr.Errorf(apperr.Invalid, "Use lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (at most 63), like production or staging-eu.")
	}
	var env *Environment
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO environments (project_id, name, created_by) VALUES ($1, $2, $3) RETURNING id`,
			projectID, name, a.userID()).Scan(&id)
		if isUniqueViolation(err) {
			return apperr.Errorf(apperr.Conflict, "This project already has an environment named %q.", name)
		}
		if err != nil {
			return err
		}
		if env, err = scanEnvironment(tx.QueryRow(ctx, `SELECT `+environmentColumns+` FROM environments e JOIN projects p ON p.id = e.project_id WHERE e.id = $1`, id)); err != nil {
			return err
		}
		e := a.event("environment.created")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, env.Name
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return nil, fmt.Errorf("store: create environment: %w", err)
	}
	return env, nil
}

// EnvironmentByName returns the environment of the project, or apperr.NotFound.
func (db *DB) EnvironmentByName(ctx context.Context, project, name string) (*Environment, error) {
	env, err := scanEnvironment(db.Pool.QueryRow(ctx, `
		SELECT `+environmentColumns+` FROM environments e JOIN projects p ON p.id = e.project_id
		WHERE p.name = $1 AND e.name = $2`, project, name))
	if err != nil {
		if apperr.CodeOf(err) == apperr.NotFound {
			return nil, apperr.Errorf(apperr.NotFound, "Project %q has no environment named %q.", project, name)
		}
		return nil, fmt.Errorf("store: environment by name: %w", err)
	}
	return env, nil
}

// EnvironmentByID returns one environment.
func (db *DB) EnvironmentByID(ctx context.Context, id int64) (*Environment, error) {
	env, err := scanEnvironment(db.Pool.QueryRow(ctx, `
		SELECT `+environmentColumns+` FROM environments e JOIN projects p ON p.id = e.project_id WHERE e.id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("store: environment by id: %w", err)
	}
	return env, nil
}

// VisibleEnvironments lists the project's environments that u may see, by name.
func (db *DB) VisibleEnvironments(ctx context.Context, u *User, projectID int64) ([]Environment, error) {
	return db.visibleEnvironments(ctx, u, projectID, 0, nil)
}

// VisibleEnvironmentsPage returns the environments of the project u may
// see, by name, limit of them from offset, and whether more follow.
func (db *DB) VisibleEnvironmentsPage(ctx context.Context, u *User, projectID int64, offset, limit int) ([]Environment, bool, error) {
	read := limit + 1
	out, err := db.visibleEnvironments(ctx, u, projectID, offset, &read)
	if err != nil {
		return nil, false, err
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// visibleEnvironments is the project's environments u may see, by name,
// from offset, at most limit of them (nil: all).
func (db *DB) visibleEnvironments(ctx context.Context, u *User, projectID int64, offset int, limit *int) ([]Environment, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT `+environmentColumns+` FROM environments e JOIN projects p ON p.id = e.project_id
		WHERE e.project_id = $1
		  AND ($3 OR EXISTS (SELECT 1 FROM memberships m WHERE m.environment_id = e.id AND m.user_id = $2))
		ORDER BY e.name LIMIT $5 OFFSET $4`, projectID, u.ID, u.IsAdmin, offset, limit)
	out, err := pgx.CollectRows(rows, collectEnvironment)
	if err != nil {
		return nil, fmt.Errorf("store: visible environments: %w", err)
	}
	return out, nil
}

// DeleteEnvironment deletes the environment with its values, memberships and
// finished runs, keeping its audit records (their environment_id becomes
// NULL; they keep the project and environment names), and records the
// deletion. It refuses with apperr.Conflict while a run of the environment is in
// progress: the row lock taken here makes a run started meanwhile wait, and
// a run that is not finished must not lose the environment under it.
func (db *DB) DeleteEnvironment(ctx context.Context, a Actor, env *Environment) error {
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		if err := lockForDeletion(ctx, tx, env, 0); err != nil {
			return err
		}
		return deleteEnvironmentTx(ctx, tx, a, env, nil)
	})
	if err != nil {
		return fmt.Errorf("store: delete environment: %w", err)
	}
	return nil
}

// EnvironmentDeleting is the state of an environment whose delete run has
// not finished, or failed: what it runs on the platform goes first, its
// rows only after. No other run of it starts.
const EnvironmentDeleting = "deleting"

// lockForDeletion locks the environment's row and refuses while a run of
// it other than exceptRun is unfinished.
func lockForDeletion(ctx context.Context, tx pgx.Tx, env *Environment, exceptRun int64) error {
	var id int64
	err := tx.QueryRow(ctx, `SELECT id FROM environments WHERE id = $1 FOR UPDATE`, env.ID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return apperr.Errorf(apperr.NotFound, "Project %q has no environment named %q.", env.Project, env.Name)
	}
	if err != nil {
		return err
	}
	var kind RunKind
	err = tx.QueryRow(ctx, `SELECT kind FROM runs WHERE environment_id = $1 AND finished_at IS NULL AND id <> $2 ORDER BY id LIMIT 1`,
		env.ID, exceptRun).Scan(&kind)
	switch {
	case err == nil && kind == RunDelete:
		return apperr.Errorf(apperr.Conflict, "%s/%s is being deleted already. Its delete run is in progress.", env.Project, env.Name)
	case err == nil:
		return apperr.Errorf(apperr.Conflict, "%s/%s cannot be deleted while a run of it is in progress. Wait for it to finish, or cancel it, then delete the environment.", env.Project, env.Name)
	case !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	return nil
}

// deleteEnvironmentTx deletes the environment's rows (its values,
// memberships, runs and what cascades from them), with the audit record
// environment.deleted; run, when set, is the delete run that got there.
func deleteEnvironmentTx(ctx context.Context, tx pgx.Tx, a Actor, env *Environment, run *int64) error {
	var values int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM environment_values WHERE environment_id = $1 AND ciphertext IS NOT NULL`,
		env.ID).Scan(&values); err != nil {
		return err
	}
	// The record goes in first: its environment_id is set to NULL by
	// the delete below, and the names stay readable in the log.
	e := a.event("environment.deleted")
	e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, env.Name
	e.Detail = map[string]any{"values_destroyed": values}
	if run != nil {
		e.Detail["run"] = *run
	}
	if err := auditTx(ctx, tx, e); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM environments WHERE id = $1`, env.ID)
	return err
}

// StartEnvironmentDeletion marks the environment deleting and creates its
// delete run nr (kind "delete"), in one transaction, with the audit record
// environment.deletion_started: refused while another run of it is
// unfinished (its delete run too). After a delete run failed, a second
// call retries with a new run.
func (db *DB) StartEnvironmentDeletion(ctx context.Context, a Actor, env *Environment, nr NewRun) (*Run, error) {
	var id int64
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		if err := lockForDeletion(ctx, tx, env, 0); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE environments SET state = $2 WHERE id = $1`, env.ID, EnvironmentDeleting); err != nil {
			return err
		}
		nr.Kind = "delete"
		nr.AuditAction = "environment.deletion_started"
		var err error
		id, err = db.createRunTx(ctx, tx, a, env, nr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: start environment deletion: %w", err)
	}
	return db.RunByID(ctx, id)
}

// FinishEnvironmentDeletion deletes the rows of the environment of the
// delete run runID once the platform no longer holds anything of it, with
// the run itself (it cascades), in one transaction; the audit record
// environment.deleted names the run's creator. Only the lease's holder
// may (false otherwise: another process took the run over).
func (db *DB) FinishEnvironmentDeletion(ctx context.Context, runID int64, lease string) (bool, error) {
	ok := false
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var env Environment
		var creator *int64
		err := tx.QueryRow(ctx, `
			SELECT e.id, e.name, p.name, r.created_by FROM runs r
			JOIN environments e ON e.id = r.environment_id JOIN projects p ON p.id = e.project_id
			WHERE r.id = $1 AND r.kind = 'delete' AND r.finished_at IS NULL AND r.lease_owner = $2
			FOR UPDATE OF e, r`, runID, lease).Scan(&env.ID, &env.Name, &env.Project, &creator)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := lockForDeletion(ctx, tx, &env, runID); err != nil {
			return err
		}
		var a Actor
		if creator != nil {
			if a.User, err = scanUser(tx.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, *creator)); err != nil {
				return err
			}
		}
		ok = true
		return deleteEnvironmentTx(ctx, tx, a, &env, &runID)
	})
	if err != nil {
		return false, fmt.Errorf("store: finish environment deletion: %w", err)
	}
	return ok, nil
}

// RunInProgress reports whether a run of the environment has not finished.
func (db *DB) RunInProgress(ctx context.Context, environmentID int64) (bool, error) {
	var busy bool
	err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE environment_id = $1 AND finished_at IS NULL)`, environmentID).Scan(&busy)
	if err != nil {
		return false, fmt.Errorf("store: run in progress: %w", err)
	}
	return busy, nil
}
