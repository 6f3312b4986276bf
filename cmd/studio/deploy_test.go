package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// nxdomainDNS is a DNS server on loopback that knows no name, so every
// route's domain points nowhere yet (a deferred route).
func nxdomainDNS(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Rcode = dns.RcodeNameError
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

// cliProjects are the projects the CLI deploys: one that succeeds, one
// whose route is deferred, one whose build fails.
var cliProjects = map[string]string{
	"plain": "name: plain\napplications:\n  api:\n    image: ghcr.io/acme/api:1\n",
	"shop": `name: shop
applications:
  web:
    image: ghcr.io/acme/web:1
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: "${APP_DOMAIN}"
        port: http
`,
	"broken": "name: broken\napplications:\n  broken:\n    build:\n      context: .\n",
}

// cliResult is what one `studio` command did.
type cliResult struct {
	code           int
	stdout, stderr string
}

// studioCLI runs the studio binary (this test binary as `studio`) with
// args and STUDIO_TOKEN, its output going to pipes (not a terminal), as in
// a CI job.
func studioCLI(t *testing.T, token string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "STUDIO_TEST_MAIN=1", "STUDIO_TOKEN="+token)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{code: code, stdout: out.String(), stderr: errOut.String()}
}

// TestStudioDeployWaitExitStatuses runs `studio deploy --wait` against a
// real `studio serve` process, as a CI job would: a deploy that succeeds
// (0), one whose route is deferred (3), one that fails (1) and refused ones
// (2); then `studio values import` and `studio runs watch`.
func TestStudioDeployWaitExitStatuses(t *testing.T) {
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
	keys, err := store.OpenKeyring(ctx, db, store.KeyringOptions{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	vault := store.NewVault(db, keys)
	u, err := db.UpsertSignIn(ctx, "https://idp.example", "ci", "ci@example.test", "CI", true)
	if err != nil {
		t.Fatal(err)
	}
	var scope []store.TokenGrant
	envs := map[string]*store.Environment{}
	for name, src := range cliProjects {
		res := compiler.Compile([]byte(src))
		if !res.Valid() {
			t.Fatalf("%s: %v", name, res.Diagnostics)
		}
		p, _, err := db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: name, Source: src, Canonical: res.Definition.Canonical(), Hash: res.Hash})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range []string{"production", "staging"} {
			env, err := db.CreateEnvironment(ctx, store.Actor{}, p.ID, e)
			if err != nil {
				t.Fatal(err)
			}
			envs[name+"/"+e] = env
			if e == "production" {
				scope = append(scope, store.TokenGrant{EnvironmentID: env.ID, Role: store.RoleAdmin})
			}
		}
	}
	// shop/staging is in scope too, without its value.
	scope = append(scope, store.TokenGrant{EnvironmentID: envs["shop/staging"].ID, Role: store.RoleAdmin})
	if _, err := vault.SetValue(ctx, store.Actor{}, envs["shop/production"], "APP_DOMAIN", "shop.test"); err != nil {
		t.Fatal(err)
	}
	_, token, err := db.CreateToken(ctx, store.Actor{User: u}, store.NewToken{Name: "ci", Scope: scope, Days: 1})
	if err != nil {
		t.Fatal(err)
	}
	faults := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(faults, []byte(`{"build": {"broken": "the compiler ran out of memory"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	studio := startStudio(t, dbURL, key, "--local-step-delay", "30ms", "--dns-server", nxdomainDNS(t), "--local-faults", faults, "--admins", "ci")
	deploy := func(project, env string, extra ...string) cliResult {
		return studioCLI(t, token, append([]string{"deploy", "--url", studio.addr, "--project", project, "--env", env, "--wait", "--poll", "200ms"}, extra...)...)
	}

	// Succeeds: 0, one plain line per checkpoint change, no terminal codes.
	r := deploy("plain", "production")
	if r.code != 0 || !strings.Contains(r.stdout, "checkpoint 1/") || !strings.Contains(r.stdout, ": succeeded") ||
		!strings.Contains(r.stdout, "succeeded: http") || strings.Contains(r.stdout, "\033[") {
		t.Fatalf("a deploy that succeeds: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The same with --json: one JSON object per line, the last one finished.
	r = deploy("plain", "production", "--redeploy", "--json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var last map[string]any
	for _, l := range lines {
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Fatalf("--json printed a line that is not JSON: %q", l)
		}
	}
	if r.code != 0 || last["event"] != "finished" || last["status"] != "succeeded" || len(lines) < 3 {
		t.Fatalf("--json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A deferred route: succeeded with warnings, 3.
	r = deploy("shop", "production")
	if r.code != 3 || !strings.Contains(r.stdout, "succeeded with warnings") {
		t.Fatalf("a deploy with a deferred route: exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, token) {
		t.Fatal("the CLI printed the token")
	}

	// A failing build: 1, with the reason.
	r = deploy("broken", "production")
	if r.code != 1 || !strings.Contains(r.stdout, "failed") {
		t.Fatalf("a deploy that fails: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Refused: a required value is missing (the page's sentence), an
	// environment outside the token's scope, no token, bad usage.
	r = deploy("shop", "staging")
	if r.code != 2 || !strings.Contains(r.stderr, "Required values are missing") {
		t.Fatalf("a refused deploy: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = deploy("plain", "staging"); r.code != 2 || !strings.Contains(r.stderr, "may not act on plain/staging") {
		t.Fatalf("a deploy outside the scope: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = studioCLI(t, "", "deploy", "--url", studio.addr, "--project", "plain", "--env", "production"); r.code != 2 || !strings.Contains(r.stderr, "STUDIO_TOKEN") {
		t.Fatalf("no token: exit %d, want 2\n%s", r.code, r.stderr)
	}
	if r = studioCLI(t, token, "deploy", "--url", studio.addr); r.code != 2 {
		t.Fatalf("bad usage: exit %d, want 2", r.code)
	}

	// --manifest adds the revision first.
	file := filepath.Join(t.TempDir(), "skali.yaml")
	if err := os.WriteFile(file, []byte(cliProjects["plain"]+"description: from CI\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r = deploy("plain", "production", "--manifest", file); r.code != 0 || !strings.Contains(r.stdout, "Added revision 2") {
		t.Fatalf("--manifest: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// --release rolls back to the first deploy of plain: revision 1 again.
	var firstDeploy int64
	if err := db.Pool.QueryRow(ctx, `SELECT min(id) FROM runs WHERE environment_id = $1 AND kind = 'deploy' AND status = 'succeeded'`,
		envs["plain/production"].ID).Scan(&firstDeploy); err != nil {
		t.Fatal(err)
	}
	release := strconv.FormatInt(firstDeploy, 10)
	if r = deploy("plain", "production", "--release", release, "--revision", "2"); r.code != 2 {
		t.Fatalf("--release with --revision: exit %d, want 2 (bad usage)\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = deploy("plain", "production", "--release", release); r.code != 0 {
		t.Fatalf("--release %s: exit %d\n%s%s", release, r.code, r.stdout, r.stderr)
	}
	var rolledBack int
	if err := db.Pool.QueryRow(ctx, `SELECT rv.number FROM environments e JOIN revisions rv ON rv.id = e.active_revision_id WHERE e.id = $1`,
		envs["plain/production"].ID).Scan(&rolledBack); err != nil {
		t.Fatal(err)
	}
	if rolledBack != 1 {
		t.Errorf("after --release %s plain/production runs revision %d, want 1 (the release's)", release, rolledBack)
	}
	// A release that is not a successful deploy of the environment is
	// refused with the API's sentence.
	if r = deploy("plain", "production", "--release", "999999"); r.code != 2 {
		t.Errorf("--release of no such run: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}

	// values import, then the refused deploy goes ahead (deferred: 3).
	dotenv := filepath.Join(t.TempDir(), "staging.env")
	if err := os.WriteFile(dotenv, []byte("APP_DOMAIN=staging-secret-host.test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = studioCLI(t, token, "values", "import", "--url", studio.addr, "--project", "shop", "--env", "staging", dotenv)
	if r.code != 0 || !strings.Contains(r.stdout, "set APP_DOMAIN (version 1)") || strings.Contains(r.stdout+r.stderr, "staging-secret-host") {
		t.Fatalf("values import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = deploy("shop", "staging", "--json"); r.code != 3 {
		t.Fatalf("after the import: exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
	}

	// runs watch follows a run by its page's address.
	var runID string
	if err := db.Pool.QueryRow(ctx, `SELECT max(id)::text FROM runs WHERE environment_id = $1`, envs["broken/production"].ID).Scan(&runID); err != nil {
		t.Fatal(err)
	}
	r = studioCLI(t, token, "runs", "watch", studio.addr+"/projects/broken/environments/production/runs/"+runID)
	if r.code != 1 || !strings.Contains(r.stdout, "the compiler ran out of memory") {
		t.Fatalf("runs watch of the failed run: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
}
