package kubernetes_test

import (
	"encoding/base64"
	"testing"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/store"
)

// valuesManifest runs an application with a value in its environment and a
// route whose domain names a value.
const valuesManifest = `name: rollback
applications:
  web:
    image: registry.local/web:1
    environment:
      GREETING: "hello ${SESSION_SECRET}"
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: ${APP_DOMAIN}
        port: http
        tls: disabled
    deployment:
      rollout:
        strategy: rolling
        timeout: 30s
`

// TestRollbackWritesTheReleaseValuesToTheSecret deploys with one version of
// a value, deploys again with a second, then rolls back to the first
// deploy: the values Secret, read back from the API server, holds the
// version of each deploy's release (the rollback's is the first deploy's),
// the pods restart with it (their template names the Secret's version),
// and a plain deploy afterwards brings the latest version back. The
// plaintext is nowhere but in the Secret. Values are compared, never
// printed.
func TestRollbackWritesTheReleaseValuesToTheSecret(t *testing.T) {
	t.Parallel()
	v1, v2 := secretValue+"-first", secretValue+"-second"
	f := newFixture(t, valuesManifest, "values-rollback", map[string]string{"SESSION_SECRET": v1, "APP_DOMAIN": "rollback.test"})
	holds := func(what, want string) string {
		t.Helper()
		sec := f.get(kubernetes.KindSecret, kubernetes.ValuesSecret)
		if str(sec, "data", "SESSION_SECRET") != base64.StdEncoding.EncodeToString([]byte(want)) {
			t.Fatalf("after %s the values Secret does not hold the version of SESSION_SECRET the deploy's release fixed", what)
		}
		dep := f.get(kubernetes.KindDeployment, "web")
		version := str(dep, "spec", "template", "metadata", "annotations", "skali.dev/values-version")
		if version != str(sec, "metadata", "resourceVersion") {
			t.Fatalf("after %s web's pods start with values version %s, want the Secret's %s", what, version, str(sec, "metadata", "resourceVersion"))
		}
		if host := str(f.get(kubernetes.KindHTTPRoute, "web-public"), "spec", "hostnames", 0); host != "rollback.test" {
			t.Fatalf("after %s the route's hostname is %s, want the value APP_DOMAIN names, rollback.test", what, host)
		}
		return version
	}

	first := f.deploy()
	if first.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", first.Status, first.Reason)
	}
	firstVersion := holds("the first deploy", v1)

	if _, err := f.vault.SetValue(f.ctx, store.Actor{}, f.env, "SESSION_SECRET", v2); err != nil {
		t.Fatal(err)
	}
	if run := f.deploy(runs.DeployRequest{Redeploy: true}); run.Status != store.RunSucceeded {
		t.Fatalf("second deploy %s: %s", run.Status, run.Reason)
	}
	secondVersion := holds("the second deploy", v2)
	if secondVersion == firstVersion {
		t.Fatalf("the second deploy's new value left web's pod template as it was: its pods keep the old value")
	}

	rollback := f.deploy(runs.DeployRequest{Release: first.ID})
	if rollback.Status != store.RunSucceeded {
		t.Fatalf("rollback to run %d: %s: %s", first.ID, rollback.Status, rollback.Reason)
	}
	if rollback.ReleaseOf == nil || *rollback.ReleaseOf != first.ID {
		t.Fatalf("run %d is not a rollback to run %d", rollback.ID, first.ID)
	}
	if holds("the rollback", v1) == secondVersion {
		t.Fatalf("the rollback left web's pod template as it was: its pods keep the second deploy's value")
	}

	if run := f.deploy(runs.DeployRequest{Redeploy: true}); run.Status != store.RunSucceeded {
		t.Fatalf("deploy after the rollback %s: %s", run.Status, run.Reason)
	}
	holds("a plain deploy after the rollback", v2)
	f.checkNoPlaintext()
}
