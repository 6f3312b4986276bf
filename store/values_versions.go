package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/apperr"
)

// DefaultValueRetention is how long an earlier version of a value is kept
// after a newer one replaced it, unless the installation says otherwise.
const DefaultValueRetention = 30 * 24 * time.Hour

// KeptValueVersions is how many earlier versions of each name are kept
// whatever their age: a rollback to one of the last few releases always
// finds its values.
const KeptValueVersions = 5

// ErrValueVersionGone means an earlier version of a value is no longer
// kept (past the retention): a release that used it cannot come back.
var ErrValueVersionGone = errors.New("the value version is no longer kept")

// ValueVersion is what may be said about an earlier, kept version of a
// value: never the value.
type ValueVersion struct {
	Name         string
	Version      int
	SetBy        string
	SetAt        time.Time
	SupersededAt time.Time
}

// EarlierValueVersions lists the kept earlier versions of the
// environment's values, by name, newest first.
func (db *DB) EarlierValueVersions(ctx context.Context, envID int64) (map[string][]ValueVersion, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT name, version, `+displayNameOf("set_by")+`, set_at, superseded_at
		FROM value_versions WHERE environment_id = $1 ORDER BY name, version DESC`, envID)
	return groupValueVersions(rows)
}

// groupValueVersions reads rows of (name, version, set by, set at,
// superseded at) into versions by name, in the rows' order.
func groupValueVersions(rows pgx.Rows) (map[string][]ValueVersion, error) {
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ValueVersion, error) {
		var v ValueVersion
		err := row.Scan(&v.Name, &v.Version, &v.SetBy, &v.SetAt, &v.SupersededAt)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: earlier value versions: %w", err)
	}
	out := map[string][]ValueVersion{}
	for _, v := range all {
		out[v.Name] = append(out[v.Name], v)
	}
	return out, nil
}

// EarlierValueVersionCounts counts the kept earlier versions of each of
// names in the environment (the names of one page of the values list).
func (db *DB) EarlierValueVersionCounts(ctx context.Context, envID int64, names []string) (map[string]int, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT name, count(*) FROM value_versions WHERE environment_id = $1 AND name = ANY($2) GROUP BY name`,
		envID, append([]string{}, names...))
	out := map[string]int{}
	var name string
	var n int
	_, err := pgx.ForEachRow(rows, []any{&name, &n}, func() error {
		out[name] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: earlier value version counts: %w", err)
	}
	return out, nil
}

// EarlierValueVersionsOf lists the kept earlier versions of names in the
// environment, by name, newest first: at most limit of each name after
// skipping offset (a history page of one name, or the few versions of a
// page's names).
func (db *DB) EarlierValueVersionsOf(ctx context.Context, envID int64, names []string, offset, limit int) (map[string][]ValueVersion, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT v.name, v.version, `+displayNameOf("v.set_by")+`, v.set_at, v.superseded_at
		FROM unnest($2::text[]) n(name)
		CROSS JOIN LATERAL (SELECT * FROM value_versions w WHERE w.environment_id = $1 AND w.name = n.name
		                    ORDER BY w.version DESC OFFSET $3 LIMIT $4) v
		ORDER BY v.name, v.version DESC`, envID, append([]string{}, names...), offset, limit)
	return groupValueVersions(rows)
}

// openVersion decrypts one version of name, current or kept. It returns
// ErrValueVersionGone (wrapped) when that version is neither.
func (v *Vault) openVersion(ctx context.Context, q querier, envID int64, name string, version int) ([]byte, error) {
	var keyID string
	var nonce, ct []byte
	err := q.QueryRow(ctx, `
		SELECT key_id, nonce, ciphertext FROM environment_values
		WHERE environment_id = $1 AND name = $2 AND version = $3 AND ciphertext IS NOT NULL
		UNION ALL
		SELECT key_id, nonce, ciphertext FROM value_versions
		WHERE environment_id = $1 AND name = $2 AND version = $3
		LIMIT 1`, envID, name, version).Scan(&keyID, &nonce, &ct)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: %s v%d: %w", name, version, ErrValueVersionGone)
	}
	if err != nil {
		return nil, err
	}
	return v.keys.open(keyID, envID, name, version, nonce, ct)
}

// RestoreValue stores the plaintext of an earlier version of name as its
// next version (the earlier one stays as it was) and records value.restored
// with the name, the version restored and the new version. It returns the
// new version.
func (v *Vault) RestoreValue(ctx context.Context, a Actor, env *Environment, name string, version int) (int, error) {
	if p := ValueNameProblem(name); p != "" {
		return 0, apperr.Errorf(apperr.Invalid, "%s", p)
	}
	var next int
	err := v.db.InTx(ctx, func(tx pgx.Tx) error {
		keyID, err := activeKey(ctx, tx)
		if err != nil {
			return err
		}
		s, err := lockSlot(ctx, tx, env.ID, name)
		if err != nil {
			return err
		}
		if s.set() && s.version == version {
			return apperr.Errorf(apperr.Conflict, "%s v%d is already the current version.", name, version)
		}
		pt, err := v.openVersion(ctx, tx, env.ID, name, version)
		if errors.Is(err, ErrValueVersionGone) {
			return apperr.Errorf(apperr.NotFound, "%s v%d is no longer kept: earlier versions are kept for the installation's retention.", name, version)
		}
		if err != nil {
			return err
		}
		next, err = v.write(ctx, tx, a, keyID, env.ID, name, string(pt), s)
		clear(pt)
		if err != nil {
			return err
		}
		e := envEvent(a, "value.restored", env)
		e.Target = name
		e.Detail = map[string]any{"name": name, "restored": version, "version": next}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return 0, fmt.Errorf("store: restore value %s: %w", name, err)
	}
	return next, nil
}

// PruneValueVersions deletes the earlier versions that were replaced more
// than retention before now, keeping the KeptValueVersions newest earlier
// versions of each name whatever their age, and every version an unfinished
// run has pinned (its platform holds it and its log lines are masked with
// it). It returns how many it deleted.
func (db *DB) PruneValueVersions(ctx context.Context, retention time.Duration, now time.Time) (int64, error) {
	if retention <= 0 {
		retention = DefaultValueRetention
	}
	tag, err := db.Pool.Exec(ctx, `
		DELETE FROM value_versions d USING (
			SELECT environment_id, name, version,
			       row_number() OVER (PARTITION BY environment_id, name ORDER BY version DESC) AS newer
			FROM value_versions) k
		WHERE d.environment_id = k.environment_id AND d.name = k.name AND d.version = k.version
		  AND k.newer > $1 AND d.superseded_at < $2
		  AND NOT EXISTS (SELECT 1 FROM deploy_values dv JOIN runs r ON r.id = dv.run_id
		      WHERE r.finished_at IS NULL AND r.environment_id = d.environment_id
		        AND dv.name = d.name AND dv.version = d.version)`, KeptValueVersions, now.Add(-retention))
	if err != nil {
		return 0, fmt.Errorf("store: prune value versions: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Release is a successful deploy: its revision and the version of every
// value it handed the platform.
type Release struct {
	RunID      int64
	Revision   int
	FinishedAt time.Time
	// Values are by name; empty for a deploy from before releases were
	// recorded (Recorded false).
	Values   []NameVersion
	Recorded bool
}

// ReleaseOf returns the release of deploy run runID of the environment. It
// is NotFound unless that run is a deploy of envID that succeeded.
func (db *DB) ReleaseOf(ctx context.Context, envID, runID int64) (*Release, error) {
	var r Release
	var pinned *time.Time
	err := db.Pool.QueryRow(ctx, `
		SELECT r.id, COALESCE((SELECT number FROM revisions WHERE id = r.revision_id), 0), r.finished_at, r.values_pinned_at
		FROM runs r WHERE r.id = $1 AND r.environment_id = $2 AND r.kind = 'deploy'
		  AND r.status IN ('succeeded', 'succeeded-with-warnings') AND r.revision_id IS NOT NULL`,
		runID, envID).Scan(&r.RunID, &r.Revision, &r.FinishedAt, &pinned)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "Run %d is not a successful deploy of this environment, so it is no release to roll back to.", runID)
	}
	if err != nil {
		return nil, fmt.Errorf("store: release of run %d: %w", runID, err)
	}
	r.Recorded = pinned != nil
	if r.Values, err = db.deployValues(ctx, runID); err != nil {
		return nil, err
	}
	return &r, nil
}

// ActiveRelease returns the environment's newest successful deploy, or
// nil when it has none.
func (db *DB) ActiveRelease(ctx context.Context, envID int64) (*Release, error) {
	id, err := db.ActiveReleaseRun(ctx, envID)
	if err != nil || id == 0 {
		return nil, err
	}
	return db.ReleaseOf(ctx, envID, id)
}

// ActiveReleaseRun returns the id of the environment's newest successful
// deploy, 0 when it has none: the top of runs_release_idx, whatever the
// environment's history.
func (db *DB) ActiveReleaseRun(ctx context.Context, envID int64) (int64, error) {
	var id int64
	err := db.Pool.QueryRow(ctx, activeReleaseSQL, envID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: active release: %w", err)
	}
	return id, nil
}

const activeReleaseSQL = `
	SELECT id FROM runs WHERE environment_id = $1 AND kind = 'deploy'
	  AND status IN ('succeeded', 'succeeded-with-warnings') AND revision_id IS NOT NULL
	ORDER BY finished_at DESC, id DESC LIMIT 1`

func (db *DB) deployValues(ctx context.Context, runID int64) ([]NameVersion, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT name, version FROM deploy_values WHERE run_id = $1 ORDER BY name`, runID)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[NameVersion])
	if err != nil {
		return nil, fmt.Errorf("store: deploy values: %w", err)
	}
	return out, nil
}

// PinDeployValues fixes the release of deploy run runID, once: the current
// version of each of names that is set. A run whose release is already
// fixed (a resumed run, a rollback) keeps it. It returns the release.
func (db *DB) PinDeployValues(ctx context.Context, runID, envID int64, names []string) ([]NameVersion, error) {
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var pinned *time.Time
		if err := tx.QueryRow(ctx, `SELECT values_pinned_at FROM runs WHERE id = $1 FOR UPDATE`, runID).Scan(&pinned); err != nil {
			return err
		}
		if pinned != nil {
			return nil
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO deploy_values (run_id, name, version)
			SELECT $1, name, version FROM environment_values
			WHERE environment_id = $2 AND ciphertext IS NOT NULL AND name = ANY($3)`, runID, envID, names); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE runs SET values_pinned_at = now() WHERE id = $1`, runID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: pin deploy values: %w", err)
	}
	return db.deployValues(ctx, runID)
}

// pinRelease copies values as the release of a new run inside tx.
func pinRelease(ctx context.Context, tx pgx.Tx, runID int64, values []NameVersion) error {
	names := make([]string, len(values))
	versions := make([]int32, len(values))
	for i, nv := range values {
		names[i], versions[i] = nv.Name, int32(nv.Version)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO deploy_values (run_id, name, version)
		SELECT $1, n, v FROM unnest($2::text[], $3::int[]) AS x (n, v)`, runID, names, versions); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE runs SET values_pinned_at = now() WHERE id = $1`, runID)
	return err
}

// ResolveReleaseValues returns the plaintext of the value versions fixed
// for deploy run runID (PinDeployValues), by name. Like
// ResolveValuesForDeploy, only the deploy path may call it. A version no
// longer kept fails with ErrValueVersionGone naming the name and version.
func (v *Vault) ResolveReleaseValues(ctx context.Context, envID, runID int64) (map[string]string, error) {
	release, err := v.db.deployValues(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(release))
	for _, nv := range release {
		pt, err := v.openVersion(ctx, v.db.Pool, envID, nv.Name, nv.Version)
		if err != nil {
			return nil, err
		}
		out[nv.Name] = string(pt)
	}
	return out, nil
}

// KeptVersions reports which of versions are still kept (current or
// earlier) in the environment.
func (db *DB) KeptVersions(ctx context.Context, envID int64, versions []NameVersion) (map[NameVersion]bool, error) {
	names := make([]string, len(versions))
	nums := make([]int32, len(versions))
	for i, nv := range versions {
		names[i], nums[i] = nv.Name, int32(nv.Version)
	}
	rows, _ := db.Pool.Query(ctx, `
		SELECT x.n, x.v FROM unnest($2::text[], $3::int[]) AS x (n, v)
		WHERE EXISTS (SELECT 1 FROM environment_values WHERE environment_id = $1 AND name = x.n AND version = x.v AND ciphertext IS NOT NULL)
		   OR EXISTS (SELECT 1 FROM value_versions WHERE environment_id = $1 AND name = x.n AND version = x.v)`, envID, names, nums)
	kept, err := pgx.CollectRows(rows, pgx.RowToStructByPos[NameVersion])
	if err != nil {
		return nil, fmt.Errorf("store: kept versions: %w", err)
	}
	out := make(map[NameVersion]bool, len(kept))
	for _, nv := range kept {
		out[nv] = true
	}
	return out, nil
}

// ValueChange is a value set, changed or deleted since a release, by name.
type ValueChange struct {
	Name string
	// Action is "set" (not in the release), "changed" or "deleted".
	Action string
	// From is the release's version (0 when set since); To the current
	// version (0 when deleted).
	From, To int
	By       string
	At       time.Time
}

// ValueChangesSince compares the environment's values with a release:
// names set, changed or deleted since, sorted by name. Only names in
// within count (nil: all), so that values no revision uses stay quiet; only
// their rows are read, not every stored value.
func (db *DB) ValueChangesSince(ctx context.Context, envID int64, release []NameVersion, within []string) ([]ValueChange, error) {
	only, args := "", []any{envID}
	if within != nil {
		only, args = ` AND v.name = ANY($2)`, append(args, within)
	}
	rows, _ := db.Pool.Query(ctx, `
		SELECT v.name, v.version, v.ciphertext IS NOT NULL, `+userDisplayName+`, v.updated_at
		FROM environment_values v LEFT JOIN users u ON u.id = v.updated_by
		WHERE v.environment_id = $1 AND v.version > 0`+only+` ORDER BY v.name`, args...)
	type slotRow struct {
		Name    string
		Version int
		Set     bool
		By      string
		At      time.Time
	}
	slots, err := pgx.CollectRows(rows, pgx.RowToStructByPos[slotRow])
	if err != nil {
		return nil, fmt.Errorf("store: value changes: %w", err)
	}
	was := map[string]int{}
	for _, nv := range release {
		was[nv.Name] = nv.Version
	}
	var out []ValueChange
	for _, s := range slots {
		from, inRelease := was[s.Name]
		switch {
		case s.Set && !inRelease:
			out = append(out, ValueChange{Name: s.Name, Action: "set", To: s.Version, By: s.By, At: s.At})
		case s.Set && from != s.Version:
			out = append(out, ValueChange{Name: s.Name, Action: "changed", From: from, To: s.Version, By: s.By, At: s.At})
		case !s.Set && inRelease:
			out = append(out, ValueChange{Name: s.Name, Action: "deleted", From: from, By: s.By, At: s.At})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return slices.Clip(out), nil
}

// resealValueVersions seals every kept earlier version under newID (a key
// rotation), in batches of short transactions; versions do not change.
func (v *Vault) resealValueVersions(ctx context.Context, newID string) error {
	type kept struct {
		env               int64
		name, keyID       string
		version           int
		nonce, ciphertext []byte
	}
	for {
		rows, _ := v.db.Pool.Query(ctx, `SELECT environment_id, name, version, key_id, nonce, ciphertext FROM value_versions
			WHERE key_id <> $1 ORDER BY environment_id, name, version LIMIT 100`, newID)
		batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (kept, error) {
			var k kept
			err := row.Scan(&k.env, &k.name, &k.version, &k.keyID, &k.nonce, &k.ciphertext)
			return k, err
		})
		if err != nil || len(batch) == 0 {
			return err
		}
		for _, k := range batch {
			pt, err := v.keys.open(k.keyID, k.env, k.name, k.version, k.nonce, k.ciphertext)
			if err != nil {
				return err
			}
			nonce, ct, err := v.keys.seal(newID, k.env, k.name, k.version, pt)
			clear(pt)
			if err != nil {
				return err
			}
			// Only if untouched meanwhile (a prune may have deleted it).
			if _, err := v.db.Pool.Exec(ctx, `UPDATE value_versions SET key_id = $4, nonce = $5, ciphertext = $6
				WHERE environment_id = $1 AND name = $2 AND version = $3 AND key_id = $7`,
				k.env, k.name, k.version, newID, nonce, ct, k.keyID); err != nil {
				return err
			}
		}
	}
}
