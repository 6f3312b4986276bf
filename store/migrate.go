package store

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/skali-dev/studio/migrations"
)

// migrationLock is the advisory lock key that serialises migrations, so two
// replicas starting at once apply each migration exactly once.
const migrationLock = 0x5ca11_57d10

// Migration is one numbered SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded migrations in order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("store: migration %s is not named NNN_description.sql", e.Name())
		}
		data, err := fs.ReadFile(migrations.FS, e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(data)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("store: migrations %s and %s share a number", out[i-1].Name, out[i].Name)
		}
	}
	return out, nil
}

// Migrate applies every migration not yet recorded in schema_migrations, each
// in its own transaction, holding an advisory lock for the whole run. It
// returns the names of the migrations it applied.
//
// A migration numbered below the newest applied one is refused before
// anything is applied: a fresh database would apply it in order and an
// existing one after its successors, so the two would end up different.
func (db *DB) Migrate(ctx context.Context) ([]string, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	return db.migrate(ctx, all)
}

func (db *DB) migrate(ctx context.Context, all []Migration) ([]string, error) {
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLock)); err != nil {
		return nil, fmt.Errorf("store: migrate: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLock))
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	rows, _ := conn.Query(ctx, `SELECT version FROM schema_migrations`)
	done, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("store: migrate: read applied versions: %w", err)
	}
	applied := make(map[int]bool, len(done))
	newest := 0
	for _, v := range done {
		applied[int(v)] = true
		newest = max(newest, int(v))
	}
	if err := checkOrder(all, applied, newest); err != nil {
		return nil, err
	}
	var names []string
	for _, m := range all {
		if applied[m.Version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return names, fmt.Errorf("store: migration %s: %w", m.Name, err)
		}
		names = append(names, m.Name)
	}
	// River keeps the jobs that execute runs in this database; its own
	// migrations go with ours, under the same lock.
	rm, err := rivermigrate.New(riverpgxv5.New(db.Pool), nil)
	if err != nil {
		return names, fmt.Errorf("store: river migrations: %w", err)
	}
	res, err := rm.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return names, fmt.Errorf("store: river migrations: %w", err)
	}
	for _, v := range res.Versions {
		names = append(names, fmt.Sprintf("river %d_%s", v.Version, v.Name))
	}
	return names, nil
}

// checkOrder refuses a pending migration numbered below the newest applied
// one, naming both.
func checkOrder(all []Migration, applied map[int]bool, newest int) error {
	newestName := fmt.Sprintf("%03d", newest)
	for _, m := range all {
		if m.Version == newest {
			newestName = m.Name
		}
	}
	for _, m := range all {
		if !applied[m.Version] && m.Version < newest {
			return fmt.Errorf("store: migration %s is numbered below %s, which this database has already applied; "+
				"it would run out of order here and in order on a fresh database. Give it a number above %d; nothing was applied",
				m.Name, newestName, newest)
		}
	}
	return nil
}
