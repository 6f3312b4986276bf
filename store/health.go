package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/events/payload"
	"github.com/skali-dev/studio/runs/platform"
)

// Webhook events of an application's health.
const (
	WebhookAppUnhealthy = "app.unhealthy"
	WebhookAppRecovered = "app.recovered"
)

// EnvironmentHealth is the health stored for an environment: what its
// platform last reported, and when the Studio stored it.
type EnvironmentHealth struct {
	Level     platform.HealthLevel
	Report    platform.EnvironmentHealth
	UpdatedAt time.Time
}

// WebhookApp is the application a health event concerns.
type WebhookApp struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Ready   int    `json:"ready"`
	Desired int    `json:"desired"`
}

// HealthOf returns the environment's stored health; a zero Report (not
// Reported) when none was ever stored.
func (db *DB) HealthOf(ctx context.Context, envID int64) (EnvironmentHealth, error) {
	var h EnvironmentHealth
	var report []byte
	err := db.Pool.QueryRow(ctx, `SELECT level, report, updated_at FROM environment_health WHERE environment_id = $1`, envID).
		Scan(&h.Level, &report, &h.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return EnvironmentHealth{Level: platform.HealthUnknown}, nil
	}
	if err != nil {
		return h, fmt.Errorf("store: health of environment: %w", err)
	}
	if err := json.Unmarshal(report, &h.Report); err != nil {
		return h, fmt.Errorf("store: decode health: %w", err)
	}
	return h, nil
}

// HealthLevels returns the stored health level of each environment that
// has one, by environment id.
func (db *DB) HealthLevels(ctx context.Context, envIDs []int64) (map[int64]platform.HealthLevel, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT environment_id, level FROM environment_health WHERE environment_id = ANY($1)`, envIDs)
	out := map[int64]platform.HealthLevel{}
	var id int64
	var level string
	_, err := pgx.ForEachRow(rows, []any{&id, &level}, func() error {
		out[id] = platform.HealthLevel(level)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: health levels: %w", err)
	}
	return out, nil
}

// SyncHealth stores h as the environment's health when it differs from
// what is stored, and then, in the same transaction, appends the
// environment's health event and records app.unhealthy for each
// application that became unhealthy and app.recovered for each that
// recovered. An application that keeps its state keeps the since stored
// with it (a process that restarted knows no better). Processes syncing
// the same environment at once take turns on its row; the second finds
// nothing changed. It reports whether anything was written.
func (db *DB) SyncHealth(ctx context.Context, envID int64, h platform.EnvironmentHealth) (bool, error) {
	changed := false
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		changed = false
		if _, err := tx.Exec(ctx, `INSERT INTO environment_health (environment_id, level, report)
			VALUES ($1, 'unknown', '{"reported":false,"applications":null,"databases":null,"buckets":null}') ON CONFLICT DO NOTHING`, envID); err != nil {
			return err
		}
		var stored []byte
		var alerted []string
		if err := tx.QueryRow(ctx, `SELECT report, alerted FROM environment_health WHERE environment_id = $1 FOR UPDATE`, envID).
			Scan(&stored, &alerted); err != nil {
			return err
		}
		var old platform.EnvironmentHealth
		_ = json.Unmarshal(stored, &old)
		for i := range h.Apps {
			a := &h.Apps[i]
			if j := slices.IndexFunc(old.Apps, func(o platform.AppHealth) bool { return o.Name == a.Name }); j >= 0 &&
				old.Apps[j].State == a.State && !old.Apps[j].Since.IsZero() {
				a.Since = old.Apps[j].Since
			}
			if a.Since.IsZero() {
				a.Since = db.Now() // the platform cannot tell: first seen now
			}
			a.Since = a.Since.UTC().Truncate(time.Second)
		}
		report, err := json.Marshal(h)
		if err != nil {
			return err
		}
		// jsonb keeps its own key order: compare the stored report as this
		// code writes it.
		was, _ := json.Marshal(old)
		if bytes.Equal(report, was) {
			return nil
		}
		var still []string
		var events []struct {
			name string
			app  platform.AppHealth
		}
		for _, a := range h.Apps {
			was := slices.Contains(alerted, a.Name)
			switch {
			case !a.State.Healthy() && !was:
				events = append(events, struct {
					name string
					app  platform.AppHealth
				}{WebhookAppUnhealthy, a})
				still = append(still, a.Name)
			case !a.State.Healthy():
				still = append(still, a.Name)
			case was && a.State == platform.StateRunning:
				events = append(events, struct {
					name string
					app  platform.AppHealth
				}{WebhookAppRecovered, a})
			case was:
				still = append(still, a.Name) // rolling out: not recovered yet
			}
		}
		if still == nil {
			still = []string{}
		}
		if _, err := tx.Exec(ctx, `UPDATE environment_health SET level = $2, report = $3, alerted = $4, updated_at = now() WHERE environment_id = $1`,
			envID, string(h.Level()), report, still); err != nil {
			return err
		}
		if _, err := appendEnvironmentEvent(ctx, tx, envID, nil, payload.EnvironmentChanged{Type: payload.KindHealth}); err != nil {
			return err
		}
		for _, ev := range events {
			wa := &WebhookApp{Name: ev.app.Name, State: string(ev.app.State), Reason: ev.app.Reason, Ready: ev.app.Ready, Desired: ev.app.Desired}
			if err := db.recordWebhookEvent(ctx, tx, envID, ev.name, WebhookData{App: wa}); err != nil {
				return err
			}
		}
		changed = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: sync health: %w", err)
	}
	return changed, nil
}

// DeployedEnvironments returns every environment that runs a revision.
func (db *DB) DeployedEnvironments(ctx context.Context) ([]Environment, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+environmentColumns+` FROM environments e JOIN projects p ON p.id = e.project_id
		WHERE e.active_revision_id IS NOT NULL ORDER BY e.id`)
	if err != nil {
		return nil, fmt.Errorf("store: deployed environments: %w", err)
	}
	defer rows.Close()
	var out []Environment
	for rows.Next() {
		e, err := scanEnvironment(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, rows.Err()
}
