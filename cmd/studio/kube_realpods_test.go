package main

// The Studio and the pods it deploys on the test cluster's real node
// (testcluster --nodes real: containerd, a kubelet, kube-proxy and a
// registry on loopback): what only running containers show. A Studio
// process killed with SIGKILL while real pods roll out, and the Studio's
// own image running as two replicas inside the cluster, deploying from
// there with its in-cluster credentials and least-privilege RBAC.

import (
	"cmp"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
)

// realRolloutManifest is three replicas of the test application, each
// ready 4 s after it starts (a real readiness probe answered by the
// process), after a release command the test application runs: a rollout
// on a real node long enough to be interrupted.
func realRolloutManifest(name string) string {
	return `name: ` + name + `
applications:
  web:
    image: registry.local/skali/testapp:latest
    command: ["/testapp", "serve", "--ready-after", "4s"]
    ports:
      http:
        port: 8080
    health:
      readiness:
        http:
          port: http
          path: /readyz
    scaling:
      replicas:
        min: 3
        max: 3
    deployment:
      releaseCommand:
        command: ["/testapp", "exit", "--code", "0", "--stdout", "migrated"]
        timeout: 1m
      rollout:
        strategy: rolling
        maxSurge: 1
        maxUnavailable: 0
        timeout: 3m
`
}

// kubeRealCluster starts (once per test binary) the real-node test
// cluster; it skips where real pods cannot run, fails under CI=true.
func kubeRealCluster(t *testing.T) *clustertest.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real-node Kubernetes test cluster and Studio processes")
	}
	c := clustertest.StartReal(t)
	if c.Kubectl == "" {
		t.Skip("no kubectl beside the cluster's kubeconfig")
	}
	return c
}

// TestKubernetesStudioKilledMidRolloutOnRealPods is the SIGKILL test of
// kube_kill_test.go on real pods: the release command really ran once in
// a container, the pods' readiness is the process's own answer, and the
// resumed run re-creates nothing.
func TestKubernetesStudioKilledMidRolloutOnRealPods(t *testing.T) {
	t.Parallel()
	cluster := kubeRealCluster(t)
	killedMidRollout(t, cluster, realRolloutManifest("realkill"), "realkill-production")
	logs := kubectl(t, cluster, "", "-n", "realkill-production", "logs", "-l", "job-name", "--tail=20")
	if strings.Count(logs, "migrated") != 1 {
		t.Errorf("the release command's container printed %q; want its one run's \"migrated\"", logs)
	}
}

// pushImage builds one of the image tool's images (studio, postgres) and
// pushes it to the cluster's registry, as a user without Docker does.
func pushImage(t *testing.T, c *clustertest.Cluster, name string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	cmd := exec.Command("go", "run", "./cmd/imagetool", "--registry", c.Registry, "--source", root, name)
	cmd.Dir = filepath.Join(root, "testcluster")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("imagetool %s: %v\n%s", name, err, out)
	}
	t.Logf("image %s built and pushed in %s", name, time.Since(started).Round(100*time.Millisecond))
}

// inClusterPostgres is a PostgreSQL the Studio's pods reach (the image
// built from this machine's PostgreSQL files), in a namespace the Studio
// does not manage.
const inClusterPostgres = `apiVersion: v1
kind: Namespace
metadata: {name: studio-db}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: pg, namespace: studio-db}
spec:
  replicas: 1
  selector: {matchLabels: {app: pg}}
  template:
    metadata: {labels: {app: pg}}
    spec:
      containers:
      - name: postgres
        image: registry.local/skali/postgres:latest
        command: [/bin/sh, -c, 'echo studio-db-pw > /tmp/pw && initdb -D /tmp/data -U studio --pwfile=/tmp/pw --auth=scram-sha-256 -E UTF8 --locale=C >/dev/null && echo "host all all 0.0.0.0/0 scram-sha-256" >> /tmp/data/pg_hba.conf && exec postgres -D /tmp/data -c listen_addresses=* -c max_connections=200']
        readinessProbe: {tcpSocket: {port: 5432}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: pg, namespace: studio-db}
spec:
  selector: {app: pg}
  ports: [{port: 5432}]
`

// TestTheStudioOnTheClusterDeploysFromInside builds the Studio's image
// with the repository's image tool, applies deploy/kubernetes/studio.yaml
// as it ships (two replicas, its service account, its least-privilege
// roles and admission policy) with only the image's name changed, against
// a PostgreSQL in the cluster, and waits for both pods to be Ready on
// /readyz. Then, signed in through the Studio's Service, it deploys an
// environment from there: the Studio in the cluster creates the
// environment's namespace and real pods. The replica executing the run is
// deleted during the rollout (a real pod's SIGTERM); the other replica
// takes the run over and it succeeds once, with the environment's pods
// Ready.
func TestTheStudioOnTheClusterDeploysFromInside(t *testing.T) {
	t.Parallel()
	cluster := kubeRealCluster(t)
	ctx := context.Background()
	pushImage(t, cluster, "studio")
	pushImage(t, cluster, "postgres")
	// The Studio's namespace, account and roles stay: tests of another
	// binary sharing the real-node cluster use them (as they are shipped).
	t.Cleanup(func() {
		kubectl(t, cluster, "", "-n", "skali-studio", "delete", "deployment,service,secret", "skali-studio", "skali-studio-secrets", "--ignore-not-found", "--wait=false")
		kubectl(t, cluster, "", "delete", "namespace", "studio-db", "inside-production", "--ignore-not-found", "--wait=false")
	})

	kubectl(t, cluster, inClusterPostgres, "apply", "-f", "-")
	kubectl(t, cluster, "", "-n", "studio-db", "rollout", "status", "deployment/pg", "--timeout=120s")
	pgIP := strings.TrimSpace(kubectl(t, cluster, "", "-n", "studio-db", "get", "service", "pg", "-o", "jsonpath={.spec.clusterIP}"))
	dbURL := "postgres://studio:studio-db-pw@" + pgIP + ":5432/postgres?sslmode=disable"
	key := store.GenerateKey()

	shipped, err := os.ReadFile("../../deploy/kubernetes/studio.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.Replace(string(shipped), "image: registry.local/skali-studio:latest", "image: registry.local/skali/studio:latest", 1)
	manifest = strings.Replace(manifest, "value: registry.local/skali-studio:latest", "value: registry.local/skali/studio:latest", 1)
	if manifest == string(shipped) {
		t.Fatal("deploy/kubernetes/studio.yaml no longer names the image registry.local/skali-studio:latest: update this test")
	}
	manifest += `---
apiVersion: v1
kind: Secret
metadata: {name: skali-studio-secrets, namespace: skali-studio}
stringData:
  DATABASE_URL: "` + dbURL + `"
  STUDIO_SECRET_KEY: "` + key + `"
`
	started := time.Now()
	kubectl(t, cluster, manifest, "apply", "-f", "-")
	if out, err := exec.Command(cluster.Kubectl, "--kubeconfig", cluster.Kubeconfig, "-n", "skali-studio", "rollout", "status", "deployment/skali-studio", "--timeout=240s").CombinedOutput(); err != nil {
		t.Fatalf("the Studio's Deployment did not become ready: %v\n%s\npods:\n%s\nlogs:\n%s", err, out,
			kubectl(t, cluster, "", "-n", "skali-studio", "get", "pods", "-o", "wide"),
			kubectl(t, cluster, "", "-n", "skali-studio", "logs", "-l", "app.kubernetes.io/name=skali-studio", "--tail=30", "--prefix"))
	}
	studioPods := kubeItems(t, cluster, "-n", "skali-studio", "pods")
	if len(studioPods) != 2 {
		t.Fatalf("%d Studio pods, want the manifest's 2 replicas", len(studioPods))
	}
	t.Logf("both Studio replicas were Ready on /readyz %s after the manifest was applied", time.Since(started).Round(100*time.Millisecond))

	// The project, with the key the Studio's pods seal values with; the
	// database is the one they migrated.
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	addKubeProject(t, db, key, realRolloutManifest("inside"), nil)
	tok, err := db.CreateLoginToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	svcIP := strings.TrimSpace(kubectl(t, cluster, "", "-n", "skali-studio", "get", "service", "skali-studio", "-o", "jsonpath={.spec.clusterIP}"))
	studio := &studioProcess{addr: "http://" + svcIP, link: "/login/local?token=" + tok}
	// The Service answers once kube-proxy has the ready pods' endpoints
	// (until then it refuses connections).
	var last string
	waitFor(t, func() bool {
		resp, err := http.Get(studio.addr + "/readyz")
		if err != nil {
			last = err.Error()
			return false
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK
	})
	t.Logf("the Studio's Service answers /readyz: %s", last)
	runID := deployNewest(t, studio, signedIn(t, studio), db, "inside")

	// Delete the replica that executes the run once the rollout is under
	// way (real pods being created, not all ready).
	var executor string
	waitFor(t, func() bool {
		if status, reason := runOutcome(t, db, runID); store.RunFinished(status) {
			t.Fatalf("the run ended (%s: %s) before its rollout could be interrupted", status, reason)
		}
		if checkpointStatus(db, runID, "rollout") != store.CheckpointRunning {
			return false
		}
		var owner *string
		db.Pool.QueryRow(ctx, `SELECT lease_owner FROM runs WHERE id = $1`, runID).Scan(&owner)
		if owner == nil {
			return false
		}
		// The owner is host@pid-namespace:pid:token; a pod's host name
		// is its name.
		machine, _, _ := strings.Cut(*owner, ":")
		executor, _, _ = strings.Cut(machine, "@")
		return true
	})
	var isStudioPod bool
	for _, p := range studioPods {
		isStudioPod = isStudioPod || field(p, "metadata", "name") == executor
	}
	if !isStudioPod {
		t.Fatalf("the run's lease is held by %q, not one of the Studio's pods", executor)
	}
	// The run's rollout step was running (its end not recorded) when the
	// pod that executes it is deleted; the pods it rolls out go on
	// becoming ready meanwhile (the kubelet does not wait for the
	// Studio), so how many were is only said.
	kubectl(t, cluster, "", "-n", "skali-studio", "delete", "pod", executor, "--wait=false")
	t.Logf("deleted the Studio's pod %s during the rollout (rollout step %s, %s of 3 replicas ready just after)", executor,
		checkpointStatus(db, runID, "rollout"), cmp.Or(field(kubeObject(t, cluster, "-n", "inside-production", "deployment", "web"), "status", "readyReplicas"), "0"))

	waitForRunEnd(t, db, runID)
	checkRunSucceededOnce(t, db, runID)
	dep := kubeObject(t, cluster, "-n", "inside-production", "deployment", "web")
	if field(dep, "status", "readyReplicas") != "3" {
		t.Errorf("after the run: the environment's Deployment has %q ready replicas, want 3 (status %v)", field(dep, "status", "readyReplicas"), dep["status"])
	}
	var applied bool
	withFields := kubeObject(t, cluster, "-n", "inside-production", "deployment", "web", "--show-managed-fields")
	entries, _ := withFields["metadata"].(map[string]any)["managedFields"].([]any)
	for _, e := range entries {
		applied = applied || (field(e, "manager") == "skali-studio" && field(e, "operation") == "Apply")
	}
	if !applied {
		t.Errorf("the environment's Deployment was not applied by the Studio's field manager: %v", entries)
	}
}
