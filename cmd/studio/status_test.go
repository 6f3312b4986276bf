package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestStudioStatusSaysWhatRunsNow runs `studio status` against a real
// `studio serve` on the local platform whose faults make one project's
// application crash loop after its rollout: the healthy one exits 0 and
// says running, the crash-looping one exits 1 with its state and reason,
// one never deployed exits 1 and says nothing runs, and a token outside
// the scope is refused (2).
func TestStudioStatusSaysWhatRunsNow(t *testing.T) {
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
	u, err := db.UpsertSignIn(ctx, "https://idp.example", "ci", "ci@example.test", "CI", true)
	if err != nil {
		t.Fatal(err)
	}
	var scope []store.TokenGrant
	for _, name := range []string{"plain", "crashy", "idle"} {
		app := "api"
		if name == "plain" {
			app = "web"
		}
		src := "name: " + name + "\napplications:\n  " + app + ":\n    image: ghcr.io/acme/api:1\n"
		res := compiler.Compile([]byte(src))
		p, _, err := db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: name, Source: src, Canonical: res.Definition.Canonical(), Hash: res.Hash})
		if err != nil {
			t.Fatal(err)
		}
		env, err := db.CreateEnvironment(ctx, store.Actor{}, p.ID, "production")
		if err != nil {
			t.Fatal(err)
		}
		if name != "idle" {
			scope = append(scope, store.TokenGrant{EnvironmentID: env.ID, Role: store.RoleAdmin})
		} else {
			scope = append(scope, store.TokenGrant{EnvironmentID: env.ID, Role: store.RoleViewer})
		}
	}
	_, token, err := db.CreateToken(ctx, store.Actor{User: u}, store.NewToken{Name: "ci", Scope: scope, Days: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The local platform's faults are by application: api (of crashy)
	// crash loops once rolled out; web (of plain) runs.
	faults := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(faults, []byte(`{"runtime": {"api": {"state": "crash looping", "reason": "exit code 3", "restarts": 4}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	studio := startStudio(t, dbURL, key, "--local-step-delay", "10ms", "--dns-server", nxdomainDNS(t), "--local-faults", faults, "--admins", "ci")
	for _, project := range []string{"crashy", "plain"} {
		if r := studioCLI(t, token, "deploy", "--url", studio.addr, "--project", project, "--env", "production", "--wait", "--poll", "200ms"); r.code != 0 {
			t.Fatalf("deploy %s: exit %d\n%s", project, r.code, r.stderr)
		}
	}
	status := func(project string) cliResult {
		return studioCLI(t, token, "status", "--url", studio.addr, "--project", project, "--env", "production")
	}
	// The health arrives from the platform's simulation within a second or
	// two; a starved machine may take much longer.
	deadline := time.Now().Add(2 * time.Minute)
	r := status("crashy")
	for !strings.Contains(r.stdout, "crash looping") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		r = status("crashy")
	}
	if r.code != 1 || !strings.Contains(r.stdout, "production: down") || !strings.Contains(r.stdout, "api: crash looping, 0 of 1 ready, 4 restarts in the last hour") || !strings.Contains(r.stdout, "exit code 3") {
		t.Errorf("status of a crash loop: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = status("plain")
	deadline = time.Now().Add(2 * time.Minute)
	for !strings.Contains(r.stdout, "healthy") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		r = status("plain")
	}
	if r.code != 0 || !strings.Contains(r.stdout, "plain/production: healthy") || !strings.Contains(r.stdout, "web: running, 1 of 1 ready, 0 restarts") {
		t.Errorf("status of a healthy environment: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := status("idle"); r.code != 1 || !strings.Contains(r.stdout, "idle/production: unknown") || !strings.Contains(r.stdout, "Not deployed yet") {
		t.Errorf("status of an environment never deployed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := status("nosuch"); r.code != 2 {
		t.Errorf("status of an environment outside the scope: exit %d, want 2\n%s", r.code, r.stderr)
	}
	if r := studioCLI(t, token, "status", "--url", studio.addr); r.code != 2 {
		t.Errorf("status without --project: exit %d, want 2", r.code)
	}
}
