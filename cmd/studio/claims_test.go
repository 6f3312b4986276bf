package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

const claimsManifest = `name: NAME
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
`

// TestServeClaimsActiveHostnamesAndReservesItsOwn starts `studio serve` on
// an installation deployed before hostname claims existed: at start the
// environment's active hostname is claimed, and the host of --public-url
// can be no environment's (its plan is refused).
func TestServeClaimsActiveHostnamesAndReservesItsOwn(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a Studio process")
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
	environment := func(project, domain string, active bool) {
		t.Helper()
		src := strings.Replace(claimsManifest, "NAME", project, 1)
		res := compiler.Compile([]byte(src))
		if !res.Valid() {
			t.Fatalf("manifest: %v", res.Errors())
		}
		p, rev, err := db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: project, Source: src, Canonical: res.Definition.Canonical(), Hash: res.Hash})
		if err != nil {
			t.Fatal(err)
		}
		env, err := db.CreateEnvironment(ctx, store.Actor{}, p.ID, "production")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := vault.SetValue(ctx, store.Actor{}, env, "APP_DOMAIN", domain); err != nil {
			t.Fatal(err)
		}
		if active {
			if _, err := db.Pool.Exec(ctx, `UPDATE environments SET active_revision_id = $1 WHERE id = $2`, rev.ID, env.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	environment("shop", "shop.example.test", true)
	environment("mirror", "studio.example.test", false)
	// What migration 100 leaves on an installation that had deployed.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO installation_settings (key, value) VALUES ('hostname_claims_backfill', 'pending')`); err != nil {
		t.Fatal(err)
	}

	p := startStudio(t, dbURL, key, "--public-url", "http://studio.example.test")
	var holder string
	if err := db.Pool.QueryRow(ctx, `SELECT p.name FROM hostname_claims c JOIN environments e ON e.id = c.environment_id
		JOIN projects p ON p.id = e.project_id WHERE c.hostname = 'shop.example.test'`).Scan(&holder); err != nil || holder != "shop" {
		t.Fatalf("shop.example.test held by %q (%v) after the start, want shop", holder, err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(p.addr + strings.TrimPrefix(p.link, "http://studio.example.test"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get(p.addr + "/projects/mirror/environments/production/deploys/new")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "studio.example.test is this Studio&#39;s own address.") {
		t.Fatalf("the plan of a deploy naming the Studio's own host: %d, without the refusal", resp.StatusCode)
	}
}
