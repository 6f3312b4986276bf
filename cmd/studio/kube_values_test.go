package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/skali-dev/studio/store"
)

const kubeValuesManifest = `name: kubevalues
applications:
  web:
    image: registry.local/web:1
    environment:
      GREETING: "hello ${SESSION_SECRET}"
    ports:
      http:
        port: 8080
    deployment:
      rollout:
        strategy: rolling
        timeout: 60s
`

// TestKubernetesRollbackThroughTheDeployFormWritesTheReleaseValues: a real
// `studio serve --platform kubernetes` deploys with one version of a value,
// then, once it changed, with the second; a rollback to the first deploy
// through the deploy form (release=RUN) writes the first version back to
// the values Secret, read from the API server, and the next plain deploy
// the latest. Values are compared, never printed.
func TestKubernetesRollbackThroughTheDeployFormWritesTheReleaseValues(t *testing.T) {
	t.Parallel()
	cluster := kubeCluster(t)
	ctx := context.Background()
	const v1, v2 = "kubevalues-first-plaintext", "kubevalues-second-plaintext"
	db, dbURL, key := newKubeProject(t, kubeValuesManifest, map[string]string{"SESSION_SECRET": v1})
	const ns = "kubevalues-production"
	t.Cleanup(func() { kubectl(t, cluster, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false") })
	studio := startStudio(t, dbURL, key, "--platform", "kubernetes", "--kubeconfig", cluster.Kubeconfig, "--run-lease", "10m")
	c := signedIn(t, studio)
	deployed := func(what string, run int64, want string) {
		t.Helper()
		waitForRunEnd(t, db, run)
		if status, reason := runOutcome(t, db, run); status != store.RunSucceeded {
			t.Fatalf("%s: %s: %s", what, status, reason)
		}
		sec := kubeObject(t, cluster, "-n", ns, "secret", "values")
		if field(sec, "data", "SESSION_SECRET") != base64.StdEncoding.EncodeToString([]byte(want)) {
			t.Fatalf("after %s the values Secret does not hold the version of SESSION_SECRET that deploy's release fixed", what)
		}
	}

	first := deployNewest(t, studio, c, db, "kubevalues")
	deployed("the first deploy", first, v1)

	keys, err := store.OpenKeyring(ctx, db, store.KeyringOptions{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	env, err := db.EnvironmentByName(ctx, "kubevalues", "production")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.NewVault(db, keys).SetValue(ctx, store.Actor{}, env, "SESSION_SECRET", v2); err != nil {
		t.Fatal(err)
	}
	deployed("the deploy of the new value", deployNewest(t, studio, c, db, "kubevalues"), v2)

	var before int64
	db.Pool.QueryRow(ctx, `SELECT max(id) FROM runs`).Scan(&before)
	postForm(t, c, studio.addr+"/projects/kubevalues/environments/production/deploys", fmt.Sprintf("release=%d", first))
	var rollback int64
	if err := db.Pool.QueryRow(ctx, `SELECT id FROM runs WHERE id > $1 AND release_of = $2`, before, first).Scan(&rollback); err != nil {
		t.Fatalf("the deploy form with release=%d started no rollback: %v", first, err)
	}
	deployed("the rollback to the first deploy", rollback, v1)

	deployed("a plain deploy after the rollback", deployNewest(t, studio, c, db, "kubevalues"), v2)
}
