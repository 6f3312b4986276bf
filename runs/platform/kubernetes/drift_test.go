package kubernetes_test

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
)

// TestDriftIsReportedFromTheWatchesAndRestoredByARedeploy deploys on the
// kwok cluster with the health monitor running and, as a person with
// kubectl would, scales web to 0, sets another image and changes one
// environment variable and adds another: each is stored as drift (what it
// is now, what the Studio applied), with one drift.detected per change
// and none for the watch's later ticks. A redeploy restores all of it,
// the added variable too, and the drift goes. Then the Deployment is
// deleted: reported, and a redeploy makes it again.
func TestDriftIsReportedFromTheWatchesAndRestoredByARedeploy(t *testing.T) {
	t.Parallel()
	cluster := clustertest.Start(t)
	if cluster.Kubectl == "" {
		t.Skip("no kubectl beside the cluster's kubeconfig")
	}
	f := newFixture(t, rollingManifest, "drift", map[string]string{"SESSION_SECRET": secretValue})
	if _, _, err := f.vault.CreateWebhookEndpoint(f.ctx, store.Actor{}, f.env, store.NewWebhookEndpoint{URL: "https://hooks.example.test/drift",
		Events: []string{store.WebhookDriftDetected}, Format: store.WebhookFormatStandard}); err != nil {
		t.Fatal(err)
	}
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s", run.Status, run.Reason)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	go func() { _ = f.svc.WatchHealth(ctx) }()
	kubectl := func(args ...string) { f.kubectl(cluster, args...) }
	waitDrift := f.waitDrift
	detected := func() int {
		var n int
		if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM webhook_deliveries WHERE event = $1`, store.WebhookDriftDetected).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitDrift()

	kubectl("scale", "deployment/web", "--replicas=0")
	ds := waitDrift("Deployment web replicas: 0 ← 2")
	if ds[0].Since.IsZero() {
		t.Error("the scale's drift says no when")
	}
	kubectl("set", "image", "deployment/web", "web=registry.local/web:by-hand")
	kubectl("set", "env", "deployment/web", "GREETING=changed-by-hand", "DEBUG=1")
	waitDrift("Deployment web replicas: 0 ← 2", "Deployment web image: registry.local/web:by-hand ← registry.local/web:1",
		"Deployment web env GREETING: changed ← set", "Deployment web env DEBUG: set ← not set")
	// The watches tick on (the kwok pods come and go): nothing more is
	// announced than the changes themselves.
	seen := detected()
	if seen < 1 || seen > 3 {
		t.Errorf("%d drift.detected for three kubectl commands, want one per change seen (1 to 3)", seen)
	}
	if err := f.svc.SyncHealth(f.ctx, f.platform, f.project.Name, f.env.Name); err != nil {
		t.Fatal(err)
	}
	if n := detected(); n != seen {
		t.Errorf("reading the same drift again sent %d more drift.detected", n-seen)
	}

	run := f.deploy(runs.DeployRequest{Redeploy: true})
	if run.Status != store.RunSucceeded {
		t.Fatalf("the redeploy %s: %s\n%s", run.Status, run.Reason, f.runLogText(run.ID))
	}
	waitDrift()
	dep := f.get(kubernetes.KindDeployment, "web")
	if str(dep, "spec", "replicas") != "2" || str(dep, "spec", "template", "spec", "containers", 0, "image") != "registry.local/web:1" {
		t.Errorf("after the redeploy: %s replicas of %s, want 2 of registry.local/web:1", str(dep, "spec", "replicas"), str(dep, "spec", "template", "spec", "containers", 0, "image"))
	}
	env := str(dep, "spec", "template", "spec", "containers", 0, "env")
	if strings.Contains(env, "DEBUG") || strings.Contains(env, "changed-by-hand") {
		t.Errorf("after the redeploy the container's environment is %s, want the Studio's only", env)
	}

	kubectl("delete", "deployment/web")
	waitDrift("Deployment web : deleted ← present")
	if run := f.deploy(runs.DeployRequest{Redeploy: true}); run.Status != store.RunSucceeded {
		t.Fatalf("the redeploy after the delete %s: %s", run.Status, run.Reason)
	}
	waitDrift()
	if dep := f.get(kubernetes.KindDeployment, "web"); str(dep, "spec", "replicas") != "2" {
		t.Errorf("the redeploy did not make web's Deployment again: %v", dep)
	}
}

// kubectl runs kubectl in the fixture's namespace, as a person would.
func (f *fixture) kubectl(cluster *clustertest.Cluster, args ...string) {
	f.t.Helper()
	if out, err := exec.Command(cluster.Kubectl, append([]string{"--kubeconfig", cluster.Kubeconfig, "-n", f.ns}, args...)...).CombinedOutput(); err != nil {
		f.t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// waitDrift waits until the stored drift is exactly want ("object field:
// now ← applied", in any order) and returns it.
func (f *fixture) waitDrift(want ...string) []platform.Drift {
	f.t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds, err := f.db.DriftOf(f.ctx, f.env.ID)
		if err != nil {
			f.t.Fatal(err)
		}
		var got []string
		for _, d := range ds {
			got = append(got, d.Object+" "+d.Field+": "+d.Now+" ← "+d.Applied)
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return ds
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("stored drift:\n%s\nwant:\n%s\nlog:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), lastLines(f.logs.String(), 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDriftOfAnAutoscaledApplicationIsRestoredIntoItsRange scales an
// autoscaled application to 0 and deletes its autoscaler with kubectl:
// both are reported (the count against the range the Studio applied),
// and a redeploy applies the autoscaler again and scales the Deployment
// back into its range (an autoscaler does not scale one at 0).
func TestDriftOfAnAutoscaledApplicationIsRestoredIntoItsRange(t *testing.T) {
	t.Parallel()
	cluster := clustertest.Start(t)
	if cluster.Kubectl == "" {
		t.Skip("no kubectl beside the cluster's kubeconfig")
	}
	f := newFixture(t, autoscaledManifest, "hpa-drift", map[string]string{"SESSION_SECRET": secretValue})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", run.Status, run.Reason)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	go func() { _ = f.svc.WatchHealth(ctx) }()
	for deadline := time.Now().Add(2 * time.Minute); str(f.get(kubernetes.KindDeployment, "web"), "spec", "replicas") != "2"; {
		if time.Now().After(deadline) {
			t.Fatalf("the autoscaler did not raise the Deployment to its minimum of 2 replicas: %v", at(f.get(kubernetes.KindHPA, "web"), "status"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.waitDrift()
	f.kubectl(cluster, "scale", "deployment/web", "--replicas=0")
	f.kubectl(cluster, "delete", "hpa/web")
	f.waitDrift("Deployment web replicas: 0 ← 2 to 6", "HorizontalPodAutoscaler web : removed ← 2 to 6 replicas")

	run := f.deploy(runs.DeployRequest{Redeploy: true})
	if run.Status != store.RunSucceeded {
		t.Fatalf("the redeploy %s: %s\n%s", run.Status, run.Reason, f.runLogText(run.ID))
	}
	f.waitDrift()
	if got := str(f.get(kubernetes.KindDeployment, "web"), "spec", "replicas"); got != "2" {
		t.Errorf("after the redeploy web runs %s replicas, want 2 (the bottom of its range)", got)
	}
	if log := f.runLogText(run.ID); !strings.Contains(log, "Scaled Deployment web back to 2") {
		t.Errorf("the redeploy's log does not say it scaled web back:\n%s", log)
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
