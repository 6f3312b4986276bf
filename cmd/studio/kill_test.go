package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// parallelTests is how many of the package's parallel tests run at once
// unless -parallel says otherwise. Go's default is GOMAXPROCS (2 on a
// two-core CI machine), but most of these tests' time is spent waiting for
// a Studio process, a cluster, a real pod or a cron minute, not computing,
// so more of them fit on two cores (see docs/testing.md).
const parallelTests = 3

// TestMain runs `studio` itself when the test starts this binary as a
// Studio process (STUDIO_TEST_MAIN=1), so a test can kill one with SIGKILL.
func TestMain(m *testing.M) {
	if os.Getenv("STUDIO_TEST_MAIN") == "1" {
		// Before flag.Parse: the arguments are the studio command's.
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	storetest.DefaultParallel(parallelTests)
	storetest.Main(m)
}

const killManifest = `name: killed
applications:
  api:
    image: ghcr.io/acme/api:1
    environment:
      DATABASE_URL: "{{databases.data.url}}"
      TOKEN: "${API_TOKEN}"
    deployment:
      releaseCommand:
        command: ["/api", "migrate"]
databases:
  data:
    engine: postgres
    version: 17
`

// newKilledEnvironment makes a database with the project of killManifest,
// its environment production and the value it needs, and returns the
// database, its URL and the key that encrypts values (for the Studio
// processes a test starts on it).
func newKilledEnvironment(t *testing.T) (db *store.DB, dbURL, key string) {
	t.Helper()
	ctx := context.Background()
	dbURL = storetest.NewURL(t)
	key = store.GenerateKey()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	keys, err := store.OpenKeyring(ctx, db, store.KeyringOptions{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	res := compiler.Compile([]byte(killManifest))
	p, _, err := db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: "killed", Source: killManifest, Canonical: res.Definition.Canonical(), Hash: res.Hash})
	if err != nil {
		t.Fatal(err)
	}
	env, err := db.CreateEnvironment(ctx, store.Actor{}, p.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.NewVault(db, keys).SetValue(ctx, store.Actor{}, env, "API_TOKEN", "t0ken"); err != nil {
		t.Fatal(err)
	}
	return db, dbURL, key
}

// deployRevision1 starts a deploy of revision 1 of killed/production
// through the Studio at addr, as the signed-in client c, and returns the
// run's id (the database's only run).
func deployRevision1(t *testing.T, c *http.Client, addr string, db *store.DB) int64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, addr+"/projects/killed/environments/production/deploys", strings.NewReader(url.Values{"revision": {"1"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("deploy: %d", resp.StatusCode)
	}
	var runID int64
	if err := db.Pool.QueryRow(context.Background(), `SELECT id FROM runs`).Scan(&runID); err != nil {
		t.Fatal(err)
	}
	return runID
}

// studioProcess is `studio serve` in a process of its own.
type studioProcess struct {
	cmd  *exec.Cmd
	addr string
	link string
}

// startStudio starts `studio serve` on the database; flags are added to
// (and win over) the defaults of these tests: 700 ms steps, 10 s leases
// (a killed process's lease is taken over at once by a process of the
// same machine, which sees its owner is gone; a lease much shorter would
// be lost by a live process on a starved machine, its renewals late).
func startStudio(t testing.TB, dbURL, key string, flags ...string) *studioProcess {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--public-url", "http://127.0.0.1",
		"--local-step-delay", "700ms", "--run-lease", "10s", "--reconcile-interval", "1h", "--data-dir", t.TempDir()}, flags...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "STUDIO_TEST_MAIN=1", "DATABASE_URL="+dbURL, "STUDIO_SECRET_KEY="+key)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p := &studioProcess{cmd: cmd}
	lines := bufio.NewScanner(out)
	for (p.addr == "" || p.link == "") && lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "Skali Studio is serving on "); ok {
			p.addr = rest
		}
		if rest, ok := strings.CutPrefix(lines.Text(), "Sign in: "); ok {
			p.link = strings.TrimPrefix(rest, "http://127.0.0.1")
		}
	}
	go io.Copy(io.Discard, out)
	if p.addr == "" || p.link == "" {
		t.Fatal("the Studio printed no address or sign-in link")
	}
	return p
}

// TestAKilledProcessesRunResumesAfterARestart starts a deploy on one Studio
// process, kills it with SIGKILL in the middle of a step, and starts the
// Studio again: the run resumes from its last recorded checkpoint, with
// no finished step done again and its events numbered without gaps.
func TestAKilledProcessesRunResumesAfterARestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Studio processes")
	}
	ctx := context.Background()
	db, dbURL, key := newKilledEnvironment(t)

	// Leases of ten minutes and River's rescue at its default (15 minutes):
	// only the restarted process seeing that the lease's owner, a process of
	// this machine, no longer exists can resume the run before the test
	// gives up.
	first := startStudio(t, dbURL, key, "--run-lease", "10m")
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := c.Get(first.addr + first.link); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	runID := deployRevision1(t, c, first.addr, db)
	// Kill the process while it provisions the database (checkpoint 2).
	waitFor(t, func() bool {
		var status string
		db.Pool.QueryRow(ctx, `SELECT status FROM run_checkpoints WHERE run_id = $1 AND position = 2`, runID).Scan(&status)
		return status == store.CheckpointRunning
	})
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.cmd.Wait()
	var status string
	db.Pool.QueryRow(ctx, `SELECT status FROM run_checkpoints WHERE run_id = $1 AND position = 2`, runID).Scan(&status)
	if status != store.CheckpointRunning {
		t.Fatalf("checkpoint 2 is %s after the kill", status)
	}

	startStudio(t, dbURL, key, "--run-lease", "10m")
	waitForRunEnd(t, db, runID)
	checkRunSucceededOnce(t, db, runID)
}

// waitFor polls cond until it holds; it asserts nothing about time, but
// gives up after two minutes so a broken resume fails instead of hanging.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	waitForWithin(t, 2*time.Minute, cond)
}

// waitForWithin is waitFor giving up after limit: for a wait that holds
// more than a resume (a real operator's database, a real dump).
func waitForWithin(t testing.TB, limit time.Duration, cond func() bool) {
	t.Helper()
	if !pollUntil(limit, cond) {
		t.Fatalf("gave up waiting after %s", limit)
	}
}

// pollUntil polls cond every 50 ms until it holds (true) or limit has
// passed (false).
func pollUntil(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}
