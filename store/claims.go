package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
)

// HostnameClaim is a hostname (a route's domain, an alias or a bucket
// route's domain) and the environment of the installation that holds it.
type HostnameClaim struct {
	Hostname      string
	EnvironmentID int64
	// Project and Environment name the holder; pages show them to
	// installation admins only.
	Project, Environment string
	// RunID is the deploy that claimed it (nil once that run is gone, or
	// for a claim backfilled from an active revision).
	RunID *int64
	Since time.Time
}

// ClaimConflict is a deploy's hostname that another environment holds.
// Owner names the holder ("project / environment") when it is known.
type ClaimConflict struct {
	Hostname string
	Owner    string
}

func (e *ClaimConflict) Error() string {
	return e.Hostname + " is served by another environment of this installation."
}

// normalHostnames is names lower-cased, without repeats or empty names, in
// order: every transaction takes the rows of a set of names in the same
// order, so two overlapping claims never deadlock.
func normalHostnames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// claimHostnamesTx claims names for the environment inside a run's
// creation transaction. A name another environment holds is a
// ClaimConflict; a name claimed by a concurrent transaction that commits
// first is PostgreSQL's unique violation on the insert, also returned as a
// ClaimConflict (the transaction is then aborted: the caller returns it).
// Names the environment holds already keep their claim as it is.
func claimHostnamesTx(ctx context.Context, tx pgx.Tx, envID, runID int64, names []string, now time.Time) error {
	names = normalHostnames(names)
	if len(names) == 0 {
		return nil
	}
	var taken, owner string
	err := tx.QueryRow(ctx, `
		SELECT c.hostname, p.name || ' / ' || e.name FROM hostname_claims c
		JOIN environments e ON e.id = c.environment_id JOIN projects p ON p.id = e.project_id
		WHERE c.hostname = ANY($1) AND c.environment_id <> $2 ORDER BY c.hostname LIMIT 1`, names, envID).Scan(&taken, &owner)
	switch {
	case err == nil:
		return &ClaimConflict{Hostname: taken, Owner: owner}
	case !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	for _, n := range names {
		_, err := tx.Exec(ctx, `
			INSERT INTO hostname_claims (hostname, environment_id, run_id, since)
			SELECT $1, $2, $3, $4 WHERE NOT EXISTS (SELECT 1 FROM hostname_claims WHERE hostname = $1 AND environment_id = $2)`,
			n, envID, runID, now)
		if isUniqueViolation(err) {
			return &ClaimConflict{Hostname: n}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ClaimHostnames claims for the environment, on behalf of deploy run
// runID, every name of names nobody holds, unless another environment
// holds one of them: then it claims none and returns those (sorted). A
// deploy's run calls it before any step acts for a hostname: its values
// may have changed since the run was created.
func (db *DB) ClaimHostnames(ctx context.Context, envID, runID int64, names []string) ([]string, error) {
	names = normalHostnames(names)
	if len(names) == 0 {
		return nil, nil
	}
	var others []string
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO hostname_claims (hostname, environment_id, run_id, since)
			SELECT n, $2, $3, $4 FROM unnest($1::text[]) AS n ORDER BY n
			ON CONFLICT (hostname) DO NOTHING`, names, envID, runID, db.Now()); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, `SELECT hostname FROM hostname_claims WHERE hostname = ANY($1) AND environment_id <> $2 ORDER BY hostname`, names, envID)
		var err error
		if others, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if len(others) > 0 {
			return errNotApplied // claim none of them
		}
		return nil
	})
	if err != nil && !errors.Is(err, errNotApplied) {
		return nil, fmt.Errorf("store: claim hostnames: %w", err)
	}
	return others, nil
}

// HeldHostnames is the set of hostnames the environment holds.
func (db *DB) HeldHostnames(ctx context.Context, envID int64) (map[string]bool, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT hostname FROM hostname_claims WHERE environment_id = $1`, envID)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: held hostnames: %w", err)
	}
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}

const claimColumns = `c.hostname, c.environment_id, p.name, e.name, c.run_id, c.since
	FROM hostname_claims c JOIN environments e ON e.id = c.environment_id JOIN projects p ON p.id = e.project_id`

func collectClaim(row pgx.CollectableRow) (HostnameClaim, error) {
	var c HostnameClaim
	err := row.Scan(&c.Hostname, &c.EnvironmentID, &c.Project, &c.Environment, &c.RunID, &c.Since)
	return c, err
}

// HostnameClaimsOf returns the claims of those of names that are claimed,
// by hostname.
func (db *DB) HostnameClaimsOf(ctx context.Context, names []string) (map[string]HostnameClaim, error) {
	names = normalHostnames(names)
	out := map[string]HostnameClaim{}
	if len(names) == 0 {
		return out, nil
	}
	rows, _ := db.Pool.Query(ctx, `SELECT `+claimColumns+` WHERE c.hostname = ANY($1)`, names)
	claims, err := pgx.CollectRows(rows, collectClaim)
	if err != nil {
		return nil, fmt.Errorf("store: hostname claims: %w", err)
	}
	for _, c := range claims {
		out[c.Hostname] = c
	}
	return out, nil
}

// HostnameClaims lists every claim of the installation by hostname (the
// installation admin page).
func (db *DB) HostnameClaims(ctx context.Context) ([]HostnameClaim, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+claimColumns+` ORDER BY c.hostname`)
	claims, err := pgx.CollectRows(rows, collectClaim)
	if err != nil {
		return nil, fmt.Errorf("store: hostname claims: %w", err)
	}
	return claims, nil
}

// MoveHostnameClaim gives the claim of hostname to the environment toEnvID
// (installation admins), with its audit record (hostname.moved, from and
// to). The audit record names no environment of its own, so that only
// installation admins read it. The old holder's certificate of hostname
// that was not issued yet is dropped. Moving a claim changes no platform object:
// the environment that held it stops acting for the hostname (its runs,
// the reconciler and Check now skip it), and the one that holds it now
// serves it at its next deploy.
func (db *DB) MoveHostnameClaim(ctx context.Context, a Actor, hostname string, toEnvID int64) (*HostnameClaim, error) {
	hostname = strings.ToLower(strings.TrimSpace(hostname))
	var moved HostnameClaim
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var fromID int64
		var from string
		err := tx.QueryRow(ctx, `
			SELECT c.environment_id, p.name || ' / ' || e.name FROM hostname_claims c
			JOIN environments e ON e.id = c.environment_id JOIN projects p ON p.id = e.project_id
			WHERE c.hostname = $1 FOR UPDATE OF c`, hostname).Scan(&fromID, &from)
		if errors.Is(err, pgx.ErrNoRows) {
			return apperr.Errorf(apperr.NotFound, "No environment holds %s.", hostname)
		}
		if err != nil {
			return err
		}
		var to string
		err = tx.QueryRow(ctx, `SELECT p.name || ' / ' || e.name FROM environments e JOIN projects p ON p.id = e.project_id WHERE e.id = $1`, toEnvID).Scan(&to)
		if errors.Is(err, pgx.ErrNoRows) {
			return apperr.Errorf(apperr.Invalid, "Choose the environment to move %s to.", hostname)
		}
		if err != nil {
			return err
		}
		if fromID == toEnvID {
			return apperr.Errorf(apperr.Invalid, "%s already holds %s.", to, hostname)
		}
		if _, err := tx.Exec(ctx, `UPDATE hostname_claims SET environment_id = $2, run_id = NULL, since = $3 WHERE hostname = $1`,
			hostname, toEnvID, db.Now()); err != nil {
			return err
		}
		// The old holder's certificate that was still to be issued is
		// dropped: nothing probes or issues it for that environment now.
		if _, err := tx.Exec(ctx, `DELETE FROM certificates WHERE environment_id = $1 AND domain = $2 AND state <> 'issued'`, fromID, hostname); err != nil {
			return err
		}
		e := a.event("hostname.moved")
		e.Target = hostname
		e.Detail = map[string]any{"from": from, "to": to}
		if err := auditTx(ctx, tx, e); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT `+claimColumns+` WHERE c.hostname = $1`, hostname).
			Scan(&moved.Hostname, &moved.EnvironmentID, &moved.Project, &moved.Environment, &moved.RunID, &moved.Since)
	})
	if err != nil {
		return nil, fmt.Errorf("store: move hostname claim: %w", err)
	}
	return &moved, nil
}

// releaseHostnamesTx makes the environment's claims exactly names, inside
// the transaction that activates a deploy's revision: claims of names it
// no longer uses are released, and a name nobody holds is claimed.
func releaseHostnamesTx(ctx context.Context, tx pgx.Tx, envID, runID int64, names []string, now time.Time) error {
	names = normalHostnames(names)
	if _, err := tx.Exec(ctx, `DELETE FROM hostname_claims WHERE environment_id = $1 AND NOT (hostname = ANY($2))`, envID, names); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO hostname_claims (hostname, environment_id, run_id, since)
		SELECT n, $2, $3, $4 FROM unnest($1::text[]) AS n ORDER BY n
		ON CONFLICT (hostname) DO NOTHING`, names, envID, runID, now)
	return err
}

// BackfillHostnameClaims claims, once per installation, the hostnames of
// the revision active in each environment deployed before claims existed
// (migration 100 marks the installations that need it). Environments are
// taken oldest first: of two that already served the same hostname, the
// older keeps it and the other's next deploy naming it is refused. It
// returns how many hostnames it claimed and how many it found held by an
// older environment. Hostnames of reserved (the Studio's own) are not
// claimed. Done, it does nothing.
func (v *Vault) BackfillHostnameClaims(ctx context.Context, reserved []string) (claimed, conflicts int, err error) {
	err = v.db.InTx(ctx, func(tx pgx.Tx) error {
		var state string
		err := tx.QueryRow(ctx, `SELECT value FROM installation_settings WHERE key = 'hostname_claims_backfill' FOR UPDATE`).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, `SELECT id FROM environments WHERE active_revision_id IS NOT NULL ORDER BY id`)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		for _, id := range ids {
			hosts, err := v.ResolveActiveHostnames(ctx, id)
			if err != nil {
				return err
			}
			var names []string
			for _, h := range hosts {
				if h.Name != "" && !slices.Contains(reserved, strings.ToLower(h.Name)) {
					names = append(names, h.Name)
				}
			}
			names = normalHostnames(names)
			if len(names) == 0 {
				continue
			}
			tag, err := tx.Exec(ctx, `
				INSERT INTO hostname_claims (hostname, environment_id, since)
				SELECT n, $2, $3 FROM unnest($1::text[]) AS n ORDER BY n
				ON CONFLICT (hostname) DO NOTHING`, names, id, v.db.Now())
			if err != nil {
				return err
			}
			claimed += int(tag.RowsAffected())
			conflicts += len(names) - int(tag.RowsAffected())
		}
		_, err = tx.Exec(ctx, `DELETE FROM installation_settings WHERE key = 'hostname_claims_backfill'`)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("store: backfill hostname claims: %w", err)
	}
	return claimed, conflicts, nil
}

// ResolveReleaseHostnames expands the hostname expressions of def with the
// value versions fixed for deploy run runID (its release: what the
// platform's routes are written with), keyed by expression, as
// ResolvePlannedHostnames does with the current values (which a run that
// pinned no release deploys). Only the values these expressions reference
// are decrypted.
func (v *Vault) ResolveReleaseHostnames(ctx context.Context, envID, runID int64, def *compiler.Definition) (map[string]ResolvedHost, error) {
	exprs, names := hostnameExpressions(def)
	values := map[string]string{}
	if len(names) > 0 {
		release, err := v.db.deployValues(ctx, runID)
		if err != nil {
			return nil, err
		}
		if len(release) == 0 {
			// A run that pinned no release (one from before releases
			// were recorded) deploys the current values.
			return v.resolveHostnames(ctx, envID, def)
		}
		for _, nv := range release {
			if !slices.Contains(names, nv.Name) {
				continue
			}
			pt, err := v.openVersion(ctx, v.db.Pool, envID, nv.Name, nv.Version)
			if err != nil {
				return nil, err
			}
			values[nv.Name] = string(pt)
		}
	}
	defer clear(values)
	return expandHostnames(exprs, values), nil
}
