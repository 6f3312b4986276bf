package pgserver_test

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
	"github.com/skali-dev/studio/store/pgserver"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("STUDIO_TEST_CHILD_PG_DIR"); dir != "" {
		runChildPostgres(dir)
		return
	}
	os.Exit(m.Run())
}

// runChildPostgres is the body of a child process that starts a private
// server, prints its URL and then waits to be killed.
func runChildPostgres(dir string) {
	pg, err := pgserver.Start(context.Background(), pgserver.Options{Dir: dir, Ephemeral: true})
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
	pg, err := pgserver.Start(ctx, pgserver.Options{Dir: dir, Ephemeral: true, Logger: quiet()})
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
	pg, err := pgserver.Start(ctx, pgserver.Options{Dir: dir, Ephemeral: true, Logger: quiet()})
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
