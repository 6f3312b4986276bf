package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestStudioDeployWaitInterruptedInCICancelsTheRun sends a real SIGINT to
// `studio deploy --wait` running without a terminal (as a cancelled CI job
// does): it asks the Studio to cancel the run, says so, exits 1 at once,
// and the run ends cancelled.
func TestStudioDeployWaitInterruptedInCICancelsTheRun(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Studio processes")
	}
	ctx := context.Background()
	dbURL := storetest.NewURL(t)
	key := store.GenerateKey()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := store.OpenKeyring(ctx, db, store.KeyringOptions{SecretKey: key}); err != nil {
		t.Fatal(err)
	}
	u, err := db.UpsertSignIn(ctx, "https://idp.example", "ci", "ci@example.test", "CI", true)
	if err != nil {
		t.Fatal(err)
	}
	src := cliProjects["plain"]
	res := compiler.Compile([]byte(src))
	p, _, err := db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: "plain", Source: src, Canonical: res.Definition.Canonical(), Hash: res.Hash})
	if err != nil {
		t.Fatal(err)
	}
	env, err := db.CreateEnvironment(ctx, store.Actor{}, p.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := db.CreateToken(ctx, store.Actor{User: u}, store.NewToken{Name: "ci",
		Scope: []store.TokenGrant{{EnvironmentID: env.ID, Role: store.RoleDeployer}}, Days: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Slow steps: the run is still going when the signal comes.
	studio := startStudio(t, dbURL, key, "--local-step-delay", "3s", "--admins", "ci")

	cmd := exec.Command(os.Args[0], "deploy", "--url", studio.addr, "--project", "plain", "--env", "production", "--wait", "--poll", "200ms")
	cmd.Env = append(os.Environ(), "STUDIO_TEST_MAIN=1", "STUDIO_TOKEN="+token)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	var printed strings.Builder
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		printed.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), "checkpoint 1/") {
			break // following the run
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(out)
	printed.Write(rest)
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 1 || !strings.Contains(printed.String(), "Interrupted: asked run") {
		t.Fatalf("deploy --wait after SIGINT: exit %d, want 1 saying it asked the run to cancel\n%s%s", code, printed.String(), errOut.String())
	}
	var status string
	var requested bool
	for range 400 {
		if err := db.Pool.QueryRow(ctx, `SELECT status, cancel_requested FROM runs WHERE environment_id = $1`, env.ID).Scan(&status, &requested); err != nil {
			t.Fatal(err)
		}
		if store.RunFinished(status) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !requested || status != store.RunCancelled {
		t.Errorf("the interrupted deploy's run: cancel requested %v, status %s; want cancelled", requested, status)
	}
}
