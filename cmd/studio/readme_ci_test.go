package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// readmeCISteps returns the shell of the README's GitHub Actions example:
// its Validate step's command and its "Deploy and wait" step's script.
func readmeCISteps(t *testing.T) (validate, deploy string) {
	t.Helper()
	b, err := os.ReadFile("../../docs/api-and-cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, job, ok := strings.Cut(string(b), "```yaml\nname: deploy staging\n")
	job, _, _ = strings.Cut(job, "```")
	if !ok {
		t.Fatal("docs/api-and-cli.md has no GitHub Actions example (```yaml name: deploy staging)")
	}
	lines := strings.Split(job, "\n")
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case "- name: Validate":
			validate = strings.TrimPrefix(strings.TrimSpace(lines[i+1]), "run: ")
		case "run: |":
			indent := len(l) - len(strings.TrimLeft(l, " ")) + 2
			for _, body := range lines[i+1:] {
				if len(body) < indent || strings.TrimSpace(body[:indent]) != "" {
					break
				}
				deploy += body[indent:] + "\n"
			}
		}
	}
	if validate == "" || !strings.Contains(deploy, "studio deploy") {
		t.Fatalf("the documented example has no Validate step or deploy script:\n%s", job)
	}
	return validate, deploy
}

// TestTheREADMEsCIExampleWorksWithADeployersToken runs the README's GitHub
// Actions steps as written, with bash, a `studio` on PATH and the token
// the README recommends: a deployer of shop/staging. The manifest adds a
// revision and the deploy, deferred while DNS moves, passes the job. A
// manifest whose hostname would publish a value also used outside
// hostnames is refused to that token (even with --confirm-public-value),
// the refusal naming the flag; an admin's token publishes it once, and
// the deployer's job passes from then on.
func TestTheREADMEsCIExampleWorksWithADeployersToken(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a Studio process")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	validate, script := readmeCISteps(t)
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
	src := cliProjects["shop"]
	res := compiler.Compile([]byte(src))
	p, _, err := db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: "shop", Source: src, Canonical: res.Definition.Canonical(), Hash: res.Hash})
	if err != nil {
		t.Fatal(err)
	}
	staging, err := db.CreateEnvironment(ctx, store.Actor{}, p.ID, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vault.SetValue(ctx, store.Actor{}, staging, "APP_DOMAIN", "staging.shop.test"); err != nil {
		t.Fatal(err)
	}
	tokenOf := func(subject string, role store.Role) string {
		u, err := db.UpsertSignIn(ctx, "https://idp.example", subject, subject+"@example.test", subject, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.AddMember(ctx, store.Actor{}, staging, u.Email, role); err != nil {
			t.Fatal(err)
		}
		_, token, err := db.CreateToken(ctx, store.Actor{User: u}, store.NewToken{Name: "ci", Scope: []store.TokenGrant{{EnvironmentID: staging.ID, Role: role}}, Days: 1})
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	deployerToken, adminToken := tokenOf("ci-deployer", store.RoleDeployer), tokenOf("ci-admin", store.RoleAdmin)
	studio := startStudio(t, dbURL, key, "--local-step-delay", "30ms", "--dns-server", nxdomainDNS(t))

	// `studio` on PATH is this test binary as the CLI.
	bin := t.TempDir()
	wrapper := "#!/bin/sh\nSTUDIO_TEST_MAIN=1 exec " + shellQuote(os.Args[0]) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "studio"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	checkout := t.TempDir()
	job := func(token, manifest, shell string) cliResult {
		t.Helper()
		if err := os.WriteFile(filepath.Join(checkout, "skali.yaml"), []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bash, "-e", "-c", shell)
		cmd.Dir = checkout
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "STUDIO_URL="+studio.addr, "STUDIO_TOKEN="+token)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		text := out.String()
		for _, tok := range []string{deployerToken, adminToken} {
			text = strings.ReplaceAll(text, tok, "[a token]")
		}
		return cliResult{code: code, stdout: text}
	}

	// The README's steps as written, with the deployer's token.
	changed := src + "description: from CI\n"
	if r := job(deployerToken, changed, validate); r.code != 0 {
		t.Fatalf("the Validate step: exit %d\n%s", r.code, r.stdout)
	}
	r := job(deployerToken, changed, script)
	if r.code != 0 || !strings.Contains(r.stdout, "Added revision 2") || !strings.Contains(r.stdout, "::warning::deployed with deferred routes") {
		t.Fatalf("the README's deploy step with a deployer's token: exit %d, want 0 (deferred routes are a warning)\n%s", r.code, r.stdout)
	}

	// A hostname that would publish APP_DOMAIN, which the application also reads.
	publishing := strings.Replace(changed, "    ports:\n", "    environment:\n      PUBLIC_ORIGIN: \"https://${APP_DOMAIN}\"\n    ports:\n", 1)
	r = job(deployerToken, publishing, script)
	if r.code != 2 || !strings.Contains(r.stdout, "Only an admin of staging can deploy a hostname built from APP_DOMAIN") ||
		!strings.Contains(r.stdout, "--confirm-public-value") {
		t.Fatalf("publishing with a deployer's token: exit %d, want 2 naming --confirm-public-value\n%s", r.code, r.stdout)
	}
	withFlag := strings.Replace(script, "--wait", "--wait --confirm-public-value staging", 1)
	if r = job(deployerToken, publishing, withFlag); r.code != 2 || !strings.Contains(r.stdout, "Only an admin of staging") {
		t.Fatalf("a deployer's token with --confirm-public-value: exit %d, want 2 (refused)\n%s", r.code, r.stdout)
	}
	if r = job(adminToken, publishing, script); r.code != 2 || !strings.Contains(r.stdout, "Type the environment's name, staging, to publish it. (flag --confirm-public-value)") {
		t.Fatalf("an admin's token without the flag: exit %d, want 2 naming the flag\n%s", r.code, r.stdout)
	}
	if r = job(adminToken, publishing, withFlag); r.code != 0 {
		t.Fatalf("an admin's token with --confirm-public-value staging: exit %d, want 0\n%s", r.code, r.stdout)
	}
	// Published once: the deployer's job passes as the README has it.
	if r = job(deployerToken, publishing+"# a comment changes no definition\n", strings.Replace(script, "--wait", "--wait --redeploy", 1)); r.code != 0 {
		t.Fatalf("the deployer's job after the publication: exit %d, want 0\n%s", r.code, r.stdout)
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
