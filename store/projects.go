package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/humanize"
)

// Project is a deployable project: a name matching its manifest's name and
// the manifest's revisions.
type Project struct {
	ID          int64
	Name        string
	Description string
	CreatedAt   time.Time
}

// Revision is one stored manifest of a project: its source text, compiled
// definition and hash, who added it and when.
type Revision struct {
	ID        int64
	ProjectID int64
	Number    int
	Source    string
	Hash      string
	// Summary says in one line what changed against the previous revision.
	Summary   string
	CreatedBy string
	CreatedAt time.Time
	// Definition is the compiled definition stored with the revision (its
	// canonical JSON decoded); pages and runs read it, never a recompile
	// of Source, so a later compiler cannot change what was deployed.
	Definition *compiler.Definition
}

// NewRevision is a compiled manifest to store. The caller compiles; the
// store never parses manifests.
type NewRevision struct {
	// Name and Description come from the manifest.
	Name        string
	Description string
	Source      string
	// Canonical is the compiled definition's canonical JSON.
	Canonical []byte
	Hash      string
	Summary   string
}

// ProjectSummary is a project with the environments a user may see.
type ProjectSummary struct {
	Project
	Environments []string
	// EnvironmentCount counts them (VisibleProjectsPage fills only it).
	EnvironmentCount int
}

// CreateProject stores a new project and its manifest as revision 1, with
// its audit record, in one transaction.
func (db *DB) CreateProject(ctx context.Context, a Actor, nr NewRevision) (*Project, *Revision, error) {
	var p Project
	var rev *Revision
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			INSERT INTO projects (name, description, created_by) VALUES ($1, $2, $3)
			RETURNING id, name, description, created_at`, nr.Name, nr.Description, a.userID()).
			Scan(&p.ID, &p.Name, &p.Description, &p.CreatedAt)
		if isUniqueViolation(err) {
			return apperr.Errorf(apperr.Conflict, "A project named %q already exists. Open it and add this manifest as a new revision.", nr.Name)
		}
		if err != nil {
			return err
		}
		if rev, err = insertRevision(ctx, tx, a, p.ID, 1, nr); err != nil {
			return err
		}
		e := a.event("project.created")
		e.Project, e.Target = p.Name, p.Name
		e.Detail = map[string]any{"revision": 1, "hash": nr.Hash}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: create project: %w", err)
	}
	return &p, rev, nil
}

// AddRevision stores nr as the project's next revision. When its hash equals
// the latest revision's, nothing is stored and unchanged is true.
func (db *DB) AddRevision(ctx context.Context, a Actor, projectID int64, nr NewRevision) (rev *Revision, unchanged bool, err error) {
	err = db.InTx(ctx, func(tx pgx.Tx) error {
		var name string
		if err := tx.QueryRow(ctx, `SELECT name FROM projects WHERE id = $1 FOR UPDATE`, projectID).Scan(&name); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return apperr.Errorf(apperr.NotFound, "No such project.")
			}
			return err
		}
		if nr.Name != name {
			return apperr.Errorf(apperr.Invalid, "This manifest is named %q, but the project is %q. The manifest's name must match its project.", nr.Name, name)
		}
		var latestNumber int
		var latestHash string
		err := tx.QueryRow(ctx, `SELECT number, hash FROM revisions WHERE project_id = $1 ORDER BY number DESC LIMIT 1`, projectID).
			Scan(&latestNumber, &latestHash)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if latestHash == nr.Hash {
			unchanged = true
			rev, err = scanRevision(tx.QueryRow(ctx, `SELECT `+revisionColumns+` FROM revisions r WHERE project_id = $1 AND number = $2`, projectID, latestNumber))
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE projects SET description = $2 WHERE id = $1`, projectID, nr.Description); err != nil {
			return err
		}
		if rev, err = insertRevision(ctx, tx, a, projectID, latestNumber+1, nr); err != nil {
			return err
		}
		e := a.event("revision.added")
		e.Project, e.Target = name, fmt.Sprintf("revision %d", rev.Number)
		e.Detail = map[string]any{"revision": rev.Number, "hash": nr.Hash}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: add revision: %w", err)
	}
	return rev, unchanged, nil
}

func insertRevision(ctx context.Context, tx pgx.Tx, a Actor, projectID int64, number int, nr NewRevision) (*Revision, error) {
	var id int64
	if err := tx.QueryRow(ctx, `
		INSERT INTO revisions (project_id, number, source, definition, hash, summary, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
		projectID, number, nr.Source, string(nr.Canonical), nr.Hash, nr.Summary, a.userID()).Scan(&id); err != nil {
		return nil, err
	}
	return scanRevision(tx.QueryRow(ctx, `SELECT `+revisionColumns+` FROM revisions r WHERE id = $1`, id))
}

var revisionColumns = `r.id, r.project_id, r.number, r.source, r.hash, r.summary, ` + displayNameOf("r.created_by") + `, r.created_at, r.definition`

func scanRevision(row pgx.Row) (*Revision, error) {
	var r Revision
	var def []byte
	err := row.Scan(&r.ID, &r.ProjectID, &r.Number, &r.Source, &r.Hash, &r.Summary, &r.CreatedBy, &r.CreatedAt, &def)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "No such revision.")
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(def, &r.Definition); err != nil {
		return nil, fmt.Errorf("store: revision %d: decode definition: %w", r.ID, err)
	}
	return &r, nil
}

// ProjectByName returns the project, or a apperr.NotFound error.
func (db *DB) ProjectByName(ctx context.Context, name string) (*Project, error) {
	var p Project
	err := db.Pool.QueryRow(ctx, `SELECT id, name, description, created_at FROM projects WHERE name = $1`, name).
		Scan(&p.ID, &p.Name, &p.Description, &p.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "There is no project named %q.", name)
	}
	if err != nil {
		return nil, fmt.Errorf("store: project by name: %w", err)
	}
	return &p, nil
}

// Revisions returns the project's revisions, newest first.
func (db *DB) Revisions(ctx context.Context, projectID int64) ([]Revision, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+revisionColumns+` FROM revisions r WHERE project_id = $1 ORDER BY number DESC`, projectID)
	revs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Revision, error) {
		r, err := scanRevision(row)
		if err != nil {
			return Revision{}, err
		}
		return *r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: revisions: %w", err)
	}
	return revs, nil
}

// LatestRevision returns the project's newest revision.
func (db *DB) LatestRevision(ctx context.Context, projectID int64) (*Revision, error) {
	r, err := scanRevision(db.Pool.QueryRow(ctx, `SELECT `+revisionColumns+` FROM revisions r WHERE project_id = $1 ORDER BY number DESC LIMIT 1`, projectID))
	if err != nil {
		return nil, fmt.Errorf("store: latest revision: %w", err)
	}
	return r, nil
}

// RevisionByID returns one revision.
func (db *DB) RevisionByID(ctx context.Context, id int64) (*Revision, error) {
	r, err := scanRevision(db.Pool.QueryRow(ctx, `SELECT `+revisionColumns+` FROM revisions r WHERE id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("store: revision: %w", err)
	}
	return r, nil
}

// VisibleProjects lists the projects u may see with the environments u may
// see in each: everything for installation admins, otherwise only what u is
// a member of.
func (db *DB) VisibleProjects(ctx context.Context, u *User) ([]ProjectSummary, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT p.id, p.name, p.description, p.created_at,
		       COALESCE(array_agg(e.name ORDER BY e.name) FILTER (WHERE e.id IS NOT NULL), '{}')
		FROM projects p
		LEFT JOIN environments e ON e.project_id = p.id
		     AND ($2 OR EXISTS (SELECT 1 FROM memberships m WHERE m.environment_id = e.id AND m.user_id = $1))
		GROUP BY p.id
		HAVING $2 OR count(e.id) > 0
		ORDER BY p.name`, u.ID, u.IsAdmin)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ProjectSummary, error) {
		var s ProjectSummary
		err := row.Scan(&s.ID, &s.Name, &s.Description, &s.CreatedAt, &s.Environments)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: visible projects: %w", err)
	}
	return out, nil
}

// VisibleProjectsPage is one page of VisibleProjects: at most limit after
// skipping offset, and whether more follow. Only the page's projects are
// read (each project's visible environments are found through an index),
// so its cost does not grow with the installation.
func (db *DB) VisibleProjectsPage(ctx context.Context, u *User, offset, limit int) ([]ProjectSummary, bool, error) {
	// $1 is the user, unused (but typed) for an installation admin.
	visible := `$1::bigint IS NOT NULL`
	if !u.IsAdmin {
		visible = `EXISTS (SELECT 1 FROM memberships m WHERE m.environment_id = e.id AND m.user_id = $1)`
	}
	having := `true`
	if !u.IsAdmin {
		having = `EXISTS (SELECT 1 FROM environments e JOIN memberships m ON m.environment_id = e.id AND m.user_id = $1 WHERE e.project_id = p.id)`
	}
	rows, _ := db.Pool.Query(ctx, `
		SELECT p.id, p.name, p.description, p.created_at,
		       (SELECT count(*) FROM environments e WHERE e.project_id = p.id AND `+visible+`)
		FROM projects p
		WHERE `+having+`
		ORDER BY p.name OFFSET $2 LIMIT $3`, u.ID, offset, limit+1)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ProjectSummary, error) {
		var s ProjectSummary
		err := row.Scan(&s.ID, &s.Name, &s.Description, &s.CreatedAt, &s.EnvironmentCount)
		return s, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: visible projects: %w", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// ProjectRole returns the highest role u holds on any environment of the
// project: RoleAdmin for installation admins, RoleNone for outsiders. It
// decides who sees the project page (any role) and who adds revisions
// (admin of at least one environment).
func (db *DB) ProjectRole(ctx context.Context, u *User, projectID int64) (Role, error) {
	if u == nil {
		return RoleNone, nil
	}
	if u.IsAdmin {
		return RoleAdmin, nil
	}
	rows, _ := db.Pool.Query(ctx, `
		SELECT m.role FROM memberships m JOIN environments e ON e.id = m.environment_id
		WHERE e.project_id = $1 AND m.user_id = $2`, projectID, u.ID)
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return RoleNone, fmt.Errorf("store: project role: %w", err)
	}
	best := RoleNone
	for _, r := range roles {
		if Role(r).rank() > best.rank() {
			best = Role(r)
		}
	}
	return best, nil
}

// DeleteProject deletes a project that has no environments left, with its
// revisions, and records the deletion. With environments it refuses with
// Conflict: each must be deleted on its own, by someone who sees what it
// holds.
func (db *DB) DeleteProject(ctx context.Context, a Actor, p *Project) error {
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var revisions int
		err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM revisions WHERE project_id = p.id) FROM projects p WHERE p.id = $1 FOR UPDATE`, p.ID).Scan(&revisions)
		if errors.Is(err, pgx.ErrNoRows) {
			return apperr.Errorf(apperr.NotFound, "There is no project named %q.", p.Name)
		}
		if err != nil {
			return err
		}
		var envs []string
		rows, _ := tx.Query(ctx, `SELECT name FROM environments WHERE project_id = $1 ORDER BY name`, p.ID)
		if envs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if len(envs) > 0 {
			return apperr.Errorf(apperr.Conflict, "%s still has %d %s (%s). Delete %s first.", p.Name, len(envs),
				humanize.Plural(len(envs), "environment", "environments"), humanize.JoinAnd(envs),
				humanize.Plural(len(envs), "it", "them"))
		}
		e := a.event("project.deleted")
		e.Project, e.Target = p.Name, p.Name
		e.Detail = map[string]any{"revisions": revisions}
		if err := auditTx(ctx, tx, e); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM projects WHERE id = $1`, p.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: delete project: %w", err)
	}
	return nil
}

// RevisionByNumber returns the project's revision number n, or apperr.NotFound.
func (db *DB) RevisionByNumber(ctx context.Context, projectID int64, n int) (*Revision, error) {
	r, err := scanRevision(db.Pool.QueryRow(ctx, `SELECT `+revisionColumns+` FROM revisions r WHERE project_id = $1 AND number = $2`, projectID, n))
	if err != nil {
		if apperr.CodeOf(err) == apperr.NotFound {
			return nil, apperr.Errorf(apperr.NotFound, "This project has no revision %d.", n)
		}
		return nil, fmt.Errorf("store: revision by number: %w", err)
	}
	return r, nil
}

// RevisionDefinitions returns the stored compiled definitions of the
// revisions with the given ids, by id: what was compiled when each was
// added, never compiled again.
func (db *DB) RevisionDefinitions(ctx context.Context, ids []int64) (map[int64]*compiler.Definition, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT id, definition FROM revisions WHERE id = ANY($1)`, ids)
	out := make(map[int64]*compiler.Definition, len(ids))
	var id int64
	var raw []byte
	_, err := pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
		var d compiler.Definition
		if err := json.Unmarshal(raw, &d); err != nil {
			return fmt.Errorf("revision %d: %w", id, err)
		}
		out[id] = &d
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: revision definitions: %w", err)
	}
	return out, nil
}
