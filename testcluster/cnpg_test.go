package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRealNodeRunsCloudNativePG starts a real-node cluster with --cnpg:
// the operator built from its module becomes Available, the real CRD
// refuses a field it does not know under strict validation, a 1-instance
// Cluster of the Debian-built PostgreSQL image becomes Ready, and a pod
// given the operator's application Secret's uri (through the cluster's
// DNS, as an application's {{databases.NAME.url}}) connects as the app
// user over TLS, migrates and writes a row. Afterwards the machine is as
// before.
func TestRealNodeRunsCloudNativePG(t *testing.T) {
	bin := needRealNode(t)
	if ok, err := cnpgBuilt(bin); err != nil || !ok {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the CloudNativePG operator is not built in %s (go run . --dir /tmp/tc --bin %s --build-only --cnpg)", bin, bin)
		}
		t.Skipf("the CloudNativePG operator is not built in %s (go run . --dir /tmp/tc --bin %s --build-only --cnpg)", bin, bin)
	}
	prog := buildProg(t)
	before := idleMachineState(t)
	rc := startReal(t, prog, bin, "--cnpg")

	avail := rc.kubectl(t, "", "-n", cnpgNamespace, "get", "deployment", cnpgDeployment, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status} {.spec.template.spec.containers[0].image}`)
	if avail != "True "+cnpgLocalImage {
		t.Fatalf("the operator's Deployment: %q, want Available with %s", avail, cnpgLocalImage)
	}

	rc.kubectl(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: cnpgtest}\n", "apply", "-f", "-")
	// The reduced CRD kept unknown fields; the real one refuses them.
	if out, err := rc.kubectlErr("apiVersion: postgresql.cnpg.io/v1\nkind: Cluster\nmetadata: {name: typo, namespace: cnpgtest}\nspec: {instances: 1, storage: {size: 1Gi}, instancez: 2}\n",
		"apply", "--server-side", "--validate=strict", "-f", "-"); err == nil || !strings.Contains(out, "instancez") {
		t.Fatalf("a Cluster with an unknown field under strict validation: %v: %s", err, out)
	}

	started := time.Now()
	rc.kubectl(t, `apiVersion: postgresql.cnpg.io/v1
kind: Cluster
metadata: {name: pg, namespace: cnpgtest}
spec:
  instances: 1
  imageName: `+postgresImage+`
  storage: {size: 1Gi}
`, "apply", "--server-side", "--validate=strict", "-f", "-")
	if out, err := rc.kubectlErr("", "-n", "cnpgtest", "wait", "clusters.postgresql.cnpg.io/pg", "--for=condition=Ready", "--timeout=240s"); err != nil {
		t.Fatalf("the Cluster did not become Ready: %v: %s\n%s", err, out, rc.cnpgState("cnpgtest"))
	}
	t.Logf("the Cluster was Ready %s after it was applied", time.Since(started).Round(100*time.Millisecond))
	if phase := rc.kubectl(t, "", "-n", "cnpgtest", "get", "pvc", "pg-1", "-o", "jsonpath={.status.phase} {.spec.storageClassName}"); phase != "Bound "+storageClass {
		t.Errorf("the instance's claim: %q", phase)
	}

	rc.kubectl(t, `apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: cnpgtest}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: registry.local/skali/testapp:latest
        args: [migrate]
        env:
        - name: DATABASE_URL
          valueFrom: {secretKeyRef: {name: pg-app, key: uri}}
        - {name: TESTAPP_NOTE, value: through the operator's Secret}
`, "apply", "-f", "-")
	if out, err := rc.kubectlErr("", "-n", "cnpgtest", "wait", "job/migrate", "--for=condition=Complete", "--timeout=120s"); err != nil {
		logs, _ := rc.kubectlErr("", "-n", "cnpgtest", "logs", "job/migrate")
		t.Fatalf("the migration: %v: %s\n%s", err, out, logs)
	}
	logs := rc.kubectl(t, "", "-n", "cnpgtest", "logs", "job/migrate")
	if !strings.Contains(logs, "connected as app, TLSv1.") || !strings.Contains(logs, "row added: through the operator's Secret") {
		t.Fatalf("the migration's output: %q, want a TLS connection as app and a row", logs)
	}
	t.Logf("migration: %s", strings.TrimSpace(logs))

	rc.stop(t)
	sameMachine(t, "after SIGTERM", before, idleMachineState(t))
}

// cnpgState is what a failed wait for a Cluster prints: the objects, the
// Cluster's status, the events, the instance pods' and the operator's
// last log lines.
func (rc *realCluster) cnpgState(ns string) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"-n", ns, "get", "clusters.postgresql.cnpg.io,pods,pvc,jobs", "-o", "wide"},
		{"-n", ns, "get", "clusters.postgresql.cnpg.io", "-o", "jsonpath={.items[*].status}"},
		{"-n", ns, "get", "events", "--sort-by=.lastTimestamp"},
		{"-n", ns, "logs", "-l", "cnpg.io/cluster", "--all-containers", "--tail=30", "--prefix"},
		{"-n", cnpgNamespace, "logs", "deployment/" + cnpgDeployment, "--tail=30"},
	} {
		out, _ := rc.kubectlErr("", args...)
		fmt.Fprintf(&b, "$ kubectl %s\n%s\n", strings.Join(args, " "), out)
	}
	return b.String()
}
