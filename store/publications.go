package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Publication is an admin's consent to publish a version of a value in a
// hostname: given once per version (the deploy that asked for it records
// it, NewRun.Publish), it is not asked again for that version.
type Publication struct {
	NameVersion
	At time.Time
	// By names who published it ("" once the user is gone).
	By string
}

// Publications returns the publications of the environment's value
// versions nvs, by name and version (a version never published is absent).
func (db *DB) Publications(ctx context.Context, envID int64, nvs []NameVersion) (map[NameVersion]Publication, error) {
	out := map[NameVersion]Publication{}
	if len(nvs) == 0 {
		return out, nil
	}
	names := make([]string, len(nvs))
	versions := make([]int, len(nvs))
	for i, nv := range nvs {
		names[i], versions[i] = nv.Name, nv.Version
	}
	rows, _ := db.Pool.Query(ctx, `
		SELECT p.name, p.version, p.published_at, COALESCE(NULLIF(u.name, ''), u.email, '')
		FROM value_publications p JOIN unnest($2::text[], $3::int[]) AS w(name, version) ON w.name = p.name AND w.version = p.version
		LEFT JOIN users u ON u.id = p.published_by
		WHERE p.environment_id = $1`, envID, names, versions)
	defer rows.Close()
	for rows.Next() {
		var p Publication
		if err := rows.Scan(&p.Name, &p.Version, &p.At, &p.By); err != nil {
			return nil, fmt.Errorf("store: value publications: %w", err)
		}
		out[p.NameVersion] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: value publications: %w", err)
	}
	return out, nil
}

// publishTx records the publication of nvs by the actor, for run runID.
func publishTx(ctx context.Context, tx pgx.Tx, envID, runID int64, by *int64, nvs []NameVersion, at time.Time) error {
	for _, nv := range nvs {
		if _, err := tx.Exec(ctx, `
			INSERT INTO value_publications (environment_id, name, version, published_at, published_by, run_id)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`, envID, nv.Name, nv.Version, at, by, runID); err != nil {
			return fmt.Errorf("store: publish %s v%d: %w", nv.Name, nv.Version, err)
		}
	}
	return nil
}
