package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/apperr"
)

// EnvironmentOverview is what the home and project pages say of an
// environment's state: the revision it runs, the project's latest, its
// newest deploy and whether one is under way.
type EnvironmentOverview struct {
	ID      int64
	Project string
	Name    string
	// State is active, restoring or down: restore failed.
	State string
	// Active is the revision number it runs (0: none); Latest the project's newest.
	Active, Latest int
	// LastDeploy is the newest deploy run (ID 0: none), with its revision
	// number; Deploying is true while it is unfinished.
	LastDeployID int64
	// LastDeployNumber is its number among the environment's runs.
	LastDeployNumber   int
	LastDeployStatus   string
	LastDeployReason   string
	LastDeployRevision int
	Deploying          bool
	// AwaitsApproval: the unfinished deploy waits for approval.
	AwaitsApproval bool
}

// FirstEnvironmentOverviewsOfProjects returns the overviews of the
// environments of projectIDs that u may see, keeping the first perProject
// of each project by name: a page of project cards reads what its chips
// show, not every environment of a project of hundreds.
func (db *DB) FirstEnvironmentOverviewsOfProjects(ctx context.Context, u *User, projectIDs []int64, perProject int) ([]EnvironmentOverview, error) {
	if u == nil {
		return nil, nil
	}
	return db.environmentOverviewsFrom(ctx, `projects p CROSS JOIN LATERAL (
		    SELECT e.* FROM environments e WHERE e.project_id = p.id
		      AND ($2 OR EXISTS (SELECT 1 FROM memberships m WHERE m.environment_id = e.id AND m.user_id = $1))
		    ORDER BY e.name LIMIT $4) e`, `p.id = ANY($3)`, u.ID, u.IsAdmin, append([]int64{}, projectIDs...), perProject)
}

// EnvironmentOverviewsOf returns the overviews of the environments ids.
func (db *DB) EnvironmentOverviewsOf(ctx context.Context, ids []int64) ([]EnvironmentOverview, error) {
	return db.environmentOverviews(ctx, `e.id = ANY($1)`, append([]int64{}, ids...))
}

// EnvironmentOverviewOf returns the overview of one environment.
func (db *DB) EnvironmentOverviewOf(ctx context.Context, envID int64) (*EnvironmentOverview, error) {
	out, err := db.environmentOverviews(ctx, `e.id = $1`, envID)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, apperr.Errorf(apperr.NotFound, "No such environment.")
	}
	return &out[0], nil
}

func (db *DB) environmentOverviews(ctx context.Context, where string, args ...any) ([]EnvironmentOverview, error) {
	return db.environmentOverviewsFrom(ctx, `environments e JOIN projects p ON p.id = e.project_id`, where, args...)
}

func (db *DB) environmentOverviewsFrom(ctx context.Context, from, where string, args ...any) ([]EnvironmentOverview, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT e.id, p.name, e.name, e.state,
		       COALESCE((SELECT number FROM revisions WHERE id = e.active_revision_id), 0),
		       COALESCE((SELECT max(number) FROM revisions WHERE project_id = p.id), 0),
		       COALESCE(d.id, 0), COALESCE(d.number, 0), COALESCE(d.status, ''), COALESCE(d.reason, ''),
		       COALESCE((SELECT number FROM revisions WHERE id = d.revision_id), 0),
		       d.id IS NOT NULL AND d.finished_at IS NULL,
		       d.id IS NOT NULL AND d.finished_at IS NULL AND d.status = 'waiting' AND d.plan_digest <> '' AND d.job_id IS NULL
		FROM `+from+`
		LEFT JOIN LATERAL (SELECT id, number, status, reason, revision_id, finished_at, plan_digest, job_id FROM runs
		    WHERE environment_id = e.id AND kind = 'deploy' ORDER BY id DESC LIMIT 1) d ON true
		WHERE `+where+`
		ORDER BY p.name, e.name`, args...)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[EnvironmentOverview])
	if err != nil {
		return nil, fmt.Errorf("store: environment overviews: %w", err)
	}
	return out, nil
}
