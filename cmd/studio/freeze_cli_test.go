package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestStudioDeployInAFreezeWindow runs `studio deploy` against a real
// `studio serve` in freeze windows: in a refusing window a deployer's
// --freeze-override is refused with the sentence and an installation
// admin's deploys, audited; in a delaying window `--wait` and `runs watch`
// of a run approved in one say "Frozen until … UTC: the deploy starts
// then", and once an admin lifts the freeze follow the run to its end.
func TestStudioDeployInAFreezeWindow(t *testing.T) {
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
	token := func(subject string, role store.Role, installationAdmin bool) string {
		u, err := db.UpsertSignIn(ctx, "https://idp.example", subject, subject+"@example.test", subject, installationAdmin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.AddMember(ctx, store.Actor{}, env, u.Email, role); err != nil {
			t.Fatal(err)
		}
		_, tok, err := db.CreateToken(ctx, store.Actor{User: u}, store.NewToken{Name: subject, Scope: []store.TokenGrant{{EnvironmentID: env.ID, Role: role}}, Days: 1})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ci, root := token("ci", store.RoleDeployer, false), token("root", store.RoleAdmin, true)
	freeze := func(from, to time.Time, action string) {
		t.Helper()
		ws, err := runs.CheckFreezeWindows([]runs.FreezeInput{{From: from.UTC().Format(time.RFC3339), To: to.UTC().Format(time.RFC3339), Action: action}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.PutFreezeWindows(ctx, store.Actor{}, env, ws); err != nil {
			t.Fatal(err)
		}
	}
	studio := startStudio(t, dbURL, key, "--local-step-delay", "30ms", "--admins", "root@example.test")
	deploy := func(tok string, args ...string) cliResult {
		return studioCLI(t, tok, append([]string{"deploy", "--url", studio.addr, "--project", "plain", "--env", "production", "--poll", "100ms"}, args...)...)
	}
	runs := func() int {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM runs`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// A refusing window, open for two more hours.
	freeze(time.Now().Add(-time.Hour), time.Now().Add(2*time.Hour), "refuse")
	r := deploy(ci, "--wait")
	if r.code != 2 || !strings.Contains(r.stderr, "production is frozen until ") || !strings.Contains(r.stderr, "UTC: deploys started in this window are refused") || runs() != 0 {
		t.Fatalf("a deploy in a refusing window: exit %d, %d runs\n%s%s", r.code, runs(), r.stdout, r.stderr)
	}
	r = deploy(ci, "--wait", "--freeze-override", "hotfix")
	if r.code != 2 || !strings.Contains(r.stderr, "UTC: only installation admins may override a freeze.") || runs() != 0 {
		t.Fatalf("a deployer's --freeze-override: exit %d, %d runs\n%s%s", r.code, runs(), r.stdout, r.stderr)
	}
	r = deploy(root, "--wait", "--freeze-override", "security fix CVE-1")
	if r.code != 0 || !strings.Contains(r.stdout, "succeeded") || strings.Contains(r.stdout, "Frozen until") {
		t.Fatalf("an installation admin's --freeze-override: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var reason string
	if err := db.Pool.QueryRow(ctx, `SELECT detail->>'freeze_override' FROM audit_events WHERE action = 'deploy.started'`).Scan(&reason); err != nil || reason != "security fix CVE-1" {
		t.Fatalf("the override's audit record: %q %v", reason, err)
	}

	// A delaying window, open for an hour: --wait says until when; the
	// admin lifts the freeze (the API, as a script would) and the command
	// follows the run, which starts then.
	end := time.Now().Add(time.Hour).Truncate(time.Minute)
	freeze(time.Now().Add(-time.Hour), end, "wait")
	want := fmt.Sprintf("Frozen until %s: the deploy starts then", end.UTC().Format("Mon 15:04 UTC"))
	follow := startCLI(t, ci, "deploy", "--url", studio.addr, "--project", "plain", "--env", "production", "--poll", "100ms", "--wait", "--redeploy")
	if !follow.until(want, time.Minute) {
		r := follow.kill()
		t.Fatalf("a deploy in a delaying window did not print %q\n%s%s", want, r.stdout, r.stderr)
	}
	lifted := time.Now()
	liftFreeze(t, studio, root)
	r = follow.wait()
	if r.code != 0 || strings.Count(r.stdout, "Frozen until") != 1 || !strings.Contains(r.stdout, "succeeded") {
		t.Fatalf("a deploy in a delaying window: exit %d, want 0 with %q once, then the run\n%s%s", r.code, want, r.stdout, r.stderr)
	}
	var started time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT started_at FROM runs ORDER BY id DESC LIMIT 1`).Scan(&started); err != nil || started.Before(lifted) {
		t.Fatalf("the run started at %v (%v), before the freeze was lifted at %v", started, err, lifted)
	}

	// Protected, approved during a window: following it says it waits for
	// the window's end; once the freeze is lifted it follows the run to its
	// end. The watch starts before the approval: what it prints depends on
	// no command's speed.
	if err := db.PutProtectionRule(ctx, store.Actor{}, env, store.ProtectionRule{Approvals: 1, ApproverRole: store.RoleAdmin,
		Expires: store.DefaultApprovalExpiry, Bypass: store.BypassNobody}, store.Starter{}); err != nil {
		t.Fatal(err)
	}
	if r := deploy(ci, "--redeploy"); r.code != 0 {
		t.Fatalf("a protected deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var runID int64
	if err := db.Pool.QueryRow(ctx, `SELECT max(id) FROM runs`).Scan(&runID); err != nil {
		t.Fatal(err)
	}
	runURL := fmt.Sprintf("%s/projects/plain/environments/production/runs/%d", studio.addr, runID)
	watch := startCLI(t, ci, "runs", "watch", "--poll", "100ms", runURL)
	if line, ok := watch.next(time.Minute); !strings.HasPrefix(line, "waiting for approval (0 of 1") {
		t.Fatalf("watching a run that waits for its approval printed %q first (%v), want \"waiting for approval (0 of 1 …\"\n%s", line, ok, watch.kill().stderr)
	}
	end = time.Now().Add(time.Hour).Truncate(time.Minute)
	freeze(time.Now().Add(-time.Hour), end, "wait")
	if r := studioCLI(t, root, "runs", "approve", runURL); r.code != 0 {
		t.Fatalf("approve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want = fmt.Sprintf("Frozen until %s: the deploy starts then", end.UTC().Format("Mon 15:04 UTC"))
	if !watch.until(want, time.Minute) {
		r := watch.kill()
		t.Fatalf("following a run approved in a window did not print %q\n%s%s", want, r.stdout, r.stderr)
	}
	liftFreeze(t, studio, root)
	r = watch.wait()
	if r.code != 0 || !strings.Contains(r.stdout, "succeeded") || strings.Index(r.stdout, want) > strings.Index(r.stdout, "checkpoint 2/") {
		t.Fatalf("following a run approved in a window: exit %d, want 0 with %q, then the run\n%s%s", r.code, want, r.stdout, r.stderr)
	}
}

// liftFreeze removes the freeze windows of plain/production through the
// API, with an admin's token.
func liftFreeze(t *testing.T, studio *studioProcess, token string) {
	t.Helper()
	if code, body := apiCall(t, studio, token, http.MethodPut, "/projects/plain/environments/production/protection", `{"freeze_windows": []}`); code != http.StatusOK {
		t.Fatalf("lifting the freeze: %d\n%s", code, body)
	}
}

// apiCall sends a JSON request to the Studio's API (path under /api/v1)
// with a token and returns the answer's status and body.
func apiCall(t *testing.T, studio *studioProcess, token, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, studio.addr+"/api/v1"+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// cliProcess is a `studio` command still running, its output read line by
// line as it prints it.
type cliProcess struct {
	cmd    *exec.Cmd
	lines  chan string
	stdout strings.Builder
	stderr bytes.Buffer
	done   chan struct{}
}

// startCLI starts the studio binary (this test binary as `studio`) with
// args and STUDIO_TOKEN, as studioCLI does, without waiting for it.
func startCLI(t *testing.T, token string, args ...string) *cliProcess {
	t.Helper()
	p := &cliProcess{cmd: exec.Command(os.Args[0], args...), lines: make(chan string, 1024), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "STUDIO_TEST_MAIN=1", "STUDIO_TOKEN="+token)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.kill()
		}
	})
	go func() {
		defer close(p.done)
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.stdout.WriteString(sc.Text() + "\n")
			p.lines <- sc.Text()
		}
	}()
	return p
}

// next returns the next line the command prints (false: none within d, or
// it ended).
func (p *cliProcess) next(d time.Duration) (string, bool) {
	select {
	case l, ok := <-p.lines:
		return l, ok
	case <-time.After(d):
		return "", false
	}
}

// until reads the lines the command prints until one is line (false: the
// command ended, or none came for d).
func (p *cliProcess) until(line string, d time.Duration) bool {
	for {
		l, ok := p.next(d)
		if !ok {
			return false
		}
		if l == line {
			return true
		}
	}
}

// kill ends the command and returns what it did.
func (p *cliProcess) kill() cliResult {
	_ = p.cmd.Process.Kill()
	return p.wait()
}

// wait waits for the command to end and returns what it did.
func (p *cliProcess) wait() cliResult {
	for range p.lines {
	}
	<-p.done
	err := p.cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return cliResult{code: code, stdout: p.stdout.String(), stderr: p.stderr.String()}
}
