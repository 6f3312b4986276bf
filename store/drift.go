package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/events/payload"
	"github.com/skali-dev/studio/runs/platform"
)

// WebhookDriftDetected is the webhook event of drift newly seen.
const WebhookDriftDetected = "drift.detected"

// maxDriftItems bounds what is stored of an environment's drift: a
// platform that reports more (a namespace edited wholesale) is shown the
// first ones, by object and field.
const maxDriftItems = 200

// maxDriftText bounds each text of a drift (an image reference, a name):
// what a platform reports is shown, not trusted to be short.
const maxDriftText = 300

// clip is s cut to maxDriftText bytes at a rune boundary, marked with "…".
func clip(s string) string {
	if len(s) <= maxDriftText {
		return s
	}
	cut := maxDriftText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// DriftOf returns what differs from what the Studio last applied to the
// environment, as last synced, by object and field; none when nothing
// was ever stored.
func (db *DB) DriftOf(ctx context.Context, envID int64) ([]platform.Drift, error) {
	var items []byte
	err := db.Pool.QueryRow(ctx, `SELECT items FROM environment_drift WHERE environment_id = $1`, envID).Scan(&items)
	if err == pgx.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: drift of environment: %w", err)
	}
	var out []platform.Drift
	if err := json.Unmarshal(items, &out); err != nil {
		return nil, fmt.Errorf("store: decode drift: %w", err)
	}
	return out, nil
}

// SyncDrift stores items as the environment's drift when they differ from
// what is stored, and then, in the same transaction, appends the
// environment's drift event and records one drift.detected webhook event
// for what is new (a field not drifted before, or drifted to another
// value). A drift that stays keeps the since stored with it; a new one
// takes the platform's since, or now when the platform cannot tell.
// Processes syncing the same environment at once take turns on its row;
// the second finds nothing changed. It reports whether anything was
// written.
func (db *DB) SyncDrift(ctx context.Context, envID int64, items []platform.Drift) (bool, error) {
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b platform.Drift) int { return strings.Compare(a.Key(), b.Key()) })
	items = slices.CompactFunc(items, func(a, b platform.Drift) bool { return a.Key() == b.Key() })
	if len(items) > maxDriftItems {
		items = items[:maxDriftItems]
	}
	for i := range items {
		d := &items[i]
		d.App, d.Object, d.Field = clip(d.App), clip(d.Object), clip(d.Field)
		d.Now, d.Applied = clip(d.Now), clip(d.Applied)
	}
	changed := false
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		changed = false
		if _, err := tx.Exec(ctx, `INSERT INTO environment_drift (environment_id) VALUES ($1) ON CONFLICT DO NOTHING`, envID); err != nil {
			return err
		}
		var stored []byte
		if err := tx.QueryRow(ctx, `SELECT items FROM environment_drift WHERE environment_id = $1 FOR UPDATE`, envID).Scan(&stored); err != nil {
			return err
		}
		var old []platform.Drift
		_ = json.Unmarshal(stored, &old)
		var fresh []platform.Drift
		for i := range items {
			d := &items[i]
			if j := slices.IndexFunc(old, func(o platform.Drift) bool { return o.Key() == d.Key() }); j >= 0 && old[j].Now == d.Now && !old[j].Since.IsZero() {
				d.Since = old[j].Since
			} else {
				if d.Since.IsZero() {
					d.Since = db.Now()
				}
				d.Since = d.Since.UTC().Truncate(time.Second)
				fresh = append(fresh, *d)
			}
		}
		if items == nil {
			items = []platform.Drift{}
		}
		body, err := json.Marshal(items)
		if err != nil {
			return err
		}
		// jsonb keeps its own key order: compare the stored items as this
		// code writes them.
		if old == nil {
			old = []platform.Drift{}
		}
		was, _ := json.Marshal(old)
		if bytes.Equal(body, was) {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE environment_drift SET items = $2, updated_at = now() WHERE environment_id = $1`, envID, body); err != nil {
			return err
		}
		if _, err := appendEnvironmentEvent(ctx, tx, envID, nil, payload.EnvironmentChanged{Type: payload.KindDrift}); err != nil {
			return err
		}
		if len(fresh) > 0 {
			if err := db.recordWebhookEvent(ctx, tx, envID, WebhookDriftDetected, WebhookData{Drift: fresh}); err != nil {
				return err
			}
		}
		changed = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: sync drift: %w", err)
	}
	return changed, nil
}
