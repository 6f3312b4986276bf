package store_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("STUDIO_TEST_CHILD_PG_DIR"); dir != "" {
		runChildPostgres(dir)
		return
	}
	storetest.Main(m)
}

// runChildPostgres is the body of a child process that starts a private
// server, prints its URL and then waits to be killed.
func runChildPostgres(dir string) {
	pg, err := store.StartPostgres(context.Background(), store.PostgresOptions{Dir: dir, Ephemeral: true})
	if err != nil {
		println("child:", err.Error())
		os.Exit(3)
	}
	os.Stdout.WriteString(pg.URL() + "\n")
	select {}
}

// reachableDir is a temporary directory that the postgres system user can
// enter (t.TempDir's parent is private to root).
func reachableDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "studio-pg-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestPrivatePostgresKeepsDataAcrossKillAndRestart(t *testing.T) {
	dir := reachableDir(t)
	ctx := context.Background()

	// First run: a child process owns the server and is killed with SIGKILL,
	// as an operator's kill -9 of the Studio would.
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "STUDIO_TEST_CHILD_PG_DIR="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child did not report a URL: %v", err)
	}
	db, err := store.Open(ctx, strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE kept (note text); INSERT INTO kept VALUES ('before the kill')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_ = child.Process.Signal(syscall.SIGKILL)
	_ = child.Wait()

	// Second run on the same directory starts despite what the first left.
	pg, err := store.StartPostgres(ctx, store.PostgresOptions{Dir: dir, Ephemeral: true, Logger: quiet()})
	if err != nil {
		t.Fatalf("second start after kill -9: %v", err)
	}
	db, err = store.Open(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	var note string
	if err := db.Pool.QueryRow(ctx, `SELECT note FROM kept`).Scan(&note); err != nil {
		t.Fatalf("data written before the kill is gone: %v", err)
	}
	if note != "before the kill" {
		t.Errorf("note = %q, want %q", note, "before the kill")
	}
	db.Close()
	pg.Stop()

	// After Stop no postgres process holds the directory.
	if data, err := os.ReadFile(dir + "/postgres/postmaster.pid"); err == nil {
		t.Errorf("postmaster.pid still present after Stop: %s", strings.SplitN(string(data), "\n", 2)[0])
	}
}

// Whether the server crashes (SIGQUIT, like an immediate shutdown) or is
// told to stop (SIGTERM, the smart shutdown that waits for open
// connections, which the Studio's pool would hold forever), readiness fails
// and then recovers on its own.
func TestPrivatePostgresComesBackAfterItsProcessDies(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) { comesBackAfter(t, sig) })
	}
}

func comesBackAfter(t *testing.T, sig syscall.Signal) {
	dir := reachableDir(t)
	ctx := context.Background()
	pg, err := store.StartPostgres(ctx, store.PostgresOptions{Dir: dir, Ephemeral: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	db, err := store.Open(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	pidLine, err := os.ReadFile(dir + "/postgres/postmaster.pid")
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for _, c := range strings.SplitN(string(pidLine), "\n", 2)[0] {
		pid = pid*10 + int(c-'0')
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
	// The database is unavailable, then answers again without anyone acting.
	deadline := time.Now().Add(30 * time.Second)
	sawDown := false
	for time.Now().Before(deadline) {
		if err := db.Ping(ctx); err != nil {
			sawDown = true
		} else if sawDown {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !sawDown {
		t.Fatal("the database never went down after its process was signalled")
	}
	t.Fatal("the database did not come back within 30s")
}

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
