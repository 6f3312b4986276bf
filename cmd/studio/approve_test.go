package main

import (
	"context"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestStudioDeployWaitsForApprovalAndRunsApprove: a deploy of a protected
// environment, through the CLI, waits for approval and says so; its
// --approval-timeout exits 4 with the run still waiting; `studio runs
// approve` with another person's token starts it, and following it again
// sees it succeed.
func TestStudioDeployWaitsForApprovalAndRunsApprove(t *testing.T) {
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
	token := func(subject string, role store.Role) string {
		u, err := db.UpsertSignIn(ctx, "https://idp.example", subject, subject+"@example.test", subject, true)
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
	ci, boss := token("ci", store.RoleDeployer), token("boss", store.RoleAdmin)
	if err := db.PutProtectionRule(ctx, store.Actor{}, env, store.ProtectionRule{Approvals: 1, ApproverRole: store.RoleAdmin,
		Expires: store.DefaultApprovalExpiry, Bypass: store.BypassNobody}, store.Starter{}); err != nil {
		t.Fatal(err)
	}
	studio := startStudio(t, dbURL, key, "--local-step-delay", "30ms")

	r := studioCLI(t, ci, "deploy", "--url", studio.addr, "--project", "plain", "--env", "production", "--wait", "--poll", "100ms", "--approval-timeout", "1s")
	if r.code != 4 || !strings.Contains(r.stdout, "waiting for approval (0 of 1: may approve: boss") {
		t.Fatalf("a deploy that waits: exit %d, want 4\n%s%s", r.code, r.stdout, r.stderr)
	}
	runURL := ""
	for _, f := range strings.Fields(r.stdout) {
		if strings.Contains(f, "/runs/") {
			runURL = f
			break
		}
	}
	if runURL == "" {
		t.Fatalf("no run address in:\n%s", r.stdout)
	}
	// The test Studio's public address has no port; the process listens on one.
	runURL = strings.Replace(runURL, "http://127.0.0.1/", strings.TrimRight(studio.addr, "/")+"/", 1)
	// The deployer's token cannot approve; the admin's can.
	if r := studioCLI(t, ci, "runs", "approve", runURL); r.code != 2 {
		t.Fatalf("approve with the deployer's token: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := studioCLI(t, boss, "runs", "approve", "--comment", "ship it", runURL); r.code != 0 || !strings.Contains(r.stdout, "Approved run") {
		t.Fatalf("approve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := studioCLI(t, ci, "runs", "watch", "--poll", "100ms", runURL); r.code != 0 || !strings.Contains(r.stdout, "succeeded") {
		t.Fatalf("watch the approved run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
