package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestMigrateTwiceAtOnceAppliesEachMigrationOnce(t *testing.T) {
	url := storetest.NewURL(t)
	ctx := context.Background()
	db, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// storetest already migrated this database; dropping the record makes
	// both replicas believe the work is still to do.
	if _, err := db.Pool.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			other, err := store.Open(ctx, url)
			if err != nil {
				errs <- err
				return
			}
			defer other.Close()
			_, err = other.Migrate(ctx)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	all, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(all) {
		t.Errorf("schema_migrations has %d rows, want %d", n, len(all))
	}
}

// TestMigrationNumberedBelowTheNewestAppliedIsRefused: a migration added
// with a number below one already applied (003 while 006 has run) would run
// after its successors here but before them on a fresh database; start-up
// and `studio migrate` refuse it, name it, and apply nothing.
func TestMigrationNumberedBelowTheNewestAppliedIsRefused(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := context.Background()
	all, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	late := store.Migration{Version: 3, Name: "003_late.sql", SQL: `CREATE TABLE late (id int)`}
	next := store.Migration{Version: 999, Name: "999_next.sql", SQL: `CREATE TABLE next (id int)`}
	withLate := append([]store.Migration{late}, append(all, next)...)
	applied, err := db.MigrateWith(ctx, withLate)
	if err == nil {
		t.Fatalf("migrate with 003 after %s applied = %v, want an error", all[len(all)-1].Name, applied)
	}
	for _, want := range []string{"003_late.sql", all[len(all)-1].Name} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	var tables int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename IN ('late', 'next')`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 || len(applied) != 0 {
		t.Errorf("%d of the new tables exist and %v was applied, want nothing applied", tables, applied)
	}
	// In order, the same new migration applies.
	if applied, err := db.MigrateWith(ctx, append(all, next)); err != nil || len(applied) != 1 {
		t.Errorf("migrate with only 999 pending = %v, %v; want it applied", applied, err)
	}
}
