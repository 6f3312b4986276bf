package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// EnvironmentPlatform is the identity of the cluster the environment's
// active revision runs on (platform.ClusterOf: the platform's kind and the
// cluster's own identity), "" when none was recorded (never deployed, or
// deployed before the Studio recorded it).
func (db *DB) EnvironmentPlatform(ctx context.Context, envID int64) (string, error) {
	var id string
	err := db.Pool.QueryRow(ctx, `SELECT identity FROM environment_platforms WHERE environment_id = $1`, envID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: environment platform: %w", err)
	}
	return id, nil
}

// SetEnvironmentPlatform records the cluster a deploy of the environment
// activated its revision on.
func (db *DB) SetEnvironmentPlatform(ctx context.Context, envID int64, identity string) error {
	if identity == "" {
		return errors.New("store: set environment platform: an empty identity")
	}
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO environment_platforms (environment_id, identity) VALUES ($1, $2)
		ON CONFLICT (environment_id) DO UPDATE SET identity = EXCLUDED.identity, recorded_at = now()`, envID, identity)
	if err != nil {
		return fmt.Errorf("store: set environment platform: %w", err)
	}
	return nil
}
