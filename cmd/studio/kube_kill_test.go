package main

import (
	"cmp"
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
)

// slowRolloutManifest's image tag starts with "slow": the test cluster's
// simulated kubelet makes its pods ready 3 to 5 s after they are scheduled,
// so a rollout lasts long enough to be interrupted. Its release command
// runs first, as a Job.
const slowRolloutManifest = `name: kubekill
applications:
  web:
    image: registry.local/web:slow-1
    ports:
      http:
        port: 8080
    scaling:
      replicas:
        min: 3
        max: 3
    deployment:
      releaseCommand:
        command: ["/app/migrate"]
        timeout: 1m
      rollout:
        strategy: rolling
        maxSurge: 1
        maxUnavailable: 0
        timeout: 2m
`

// uids returns the names and uids of objects, sorted.
func uids(items []map[string]any) []string {
	var out []string
	for _, it := range items {
		out = append(out, field(it, "metadata", "name")+"="+field(it, "metadata", "uid"))
	}
	sort.Strings(out)
	return out
}

// TestKubernetesStudioKilledMidRolloutResumesWithoutRecreating runs `studio
// serve --platform kubernetes` against the test cluster, starts a deploy
// through its deploy form, kills the process with SIGKILL while the
// Deployment rolls out (its pods not ready yet), and starts a second
// process: the run is marked "executor lost", resumed and succeeds, and the
// cluster shows nothing was re-created or changed by the resume: the same
// Deployment (uid, generation), the same one ReplicaSet, the same one
// release Job and its one pod.
func TestKubernetesStudioKilledMidRolloutResumesWithoutRecreating(t *testing.T) {
	t.Parallel()
	killedMidRollout(t, kubeCluster(t), slowRolloutManifest, "kubekill-production")
}

// killedMidRollout is the test above on cluster, with a manifest of one
// application web of 3 replicas with a release command, deployed to the
// namespace ns.
func killedMidRollout(t *testing.T, cluster *clustertest.Cluster, manifest, ns string) {
	ctx := context.Background()
	db, dbURL, key := newKubeProject(t, manifest, nil)
	project := strings.TrimSuffix(ns, "-production")
	t.Cleanup(func() { kubectl(t, cluster, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false") })
	// Leases of ten minutes and River's rescue at its default: only the
	// restarted process seeing that the lease's owner, a process of this
	// machine, no longer exists can resume the run before the test gives up.
	flags := []string{"--platform", "kubernetes", "--kubeconfig", cluster.Kubeconfig, "--run-lease", "10m"}
	first := startStudio(t, dbURL, key, flags...)
	runID := deployNewest(t, first, signedIn(t, first), db, project)

	// Kill it once the Deployment exists and is rolling out.
	var dep map[string]any
	waitFor(t, func() bool {
		if checkpointStatus(db, runID, "rollout") != store.CheckpointRunning {
			if status, reason := runOutcome(t, db, runID); store.RunFinished(status) {
				t.Fatalf("the run ended (%s: %s) before the rollout could be interrupted", status, reason)
			}
			return false
		}
		dep = kubeObject(t, cluster, "-n", ns, "deployment", "web")
		return dep != nil
	})
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.cmd.Wait()

	// What makes it a kill in the rollout's middle is the Studio's side:
	// it had not recorded the rollout's end. The pods go on becoming
	// ready (the kubelet does not wait for the Studio), so how many were
	// ready is only said.
	if s := checkpointStatus(db, runID, "rollout"); s != store.CheckpointRunning {
		t.Fatalf("the rollout checkpoint is %s after the kill", s)
	}
	before := kubeObject(t, cluster, "-n", ns, "deployment", "web")
	t.Logf("killed with %s of 3 replicas ready", cmp.Or(field(before, "status", "readyReplicas"), "0"))
	rsBefore := uids(kubeItems(t, cluster, "-n", ns, "replicasets"))
	jobsBefore := uids(kubeItems(t, cluster, "-n", ns, "jobs"))
	if len(rsBefore) != 1 || len(jobsBefore) != 1 {
		t.Fatalf("before the resume: ReplicaSets %v, Jobs %v; want one of each", rsBefore, jobsBefore)
	}

	startStudio(t, dbURL, key, flags...)
	waitForRunEnd(t, db, runID)
	evs := checkRunSucceededOnce(t, db, runID)
	var lost, resumed bool
	for _, e := range evs {
		var p struct {
			Run *struct {
				Status       string `json:"status"`
				ExecutorLost bool   `json:"executorLost"`
			} `json:"run"`
		}
		if json.Unmarshal(e.Payload, &p) != nil || p.Run == nil {
			continue
		}
		if p.Run.ExecutorLost {
			lost = true
		} else if lost && p.Run.Status == store.RunRunning {
			resumed = true
		}
	}
	if !lost || !resumed {
		t.Errorf("the run's events do not show it lost its executor (%v) and then resumed (%v)", lost, resumed)
	}
	if pid := executorPID(db, runID); pid != 0 {
		t.Errorf("the finished run still holds a lease of process %d", pid)
	}

	after := kubeObject(t, cluster, "-n", ns, "deployment", "web")
	for _, f := range []string{"uid", "generation", "creationTimestamp"} {
		if b, a := field(before, "metadata", f), field(after, "metadata", f); b != a {
			t.Errorf("the Deployment's %s went from %s to %s: the resumed run re-created or changed it", f, b, a)
		}
	}
	if field(after, "status", "readyReplicas") != "3" || field(after, "status", "observedGeneration") != field(after, "metadata", "generation") {
		t.Errorf("after the resumed run: Deployment status %v, want 3 ready replicas of its generation", after["status"])
	}
	if rs := uids(kubeItems(t, cluster, "-n", ns, "replicasets")); strings.Join(rs, " ") != strings.Join(rsBefore, " ") {
		t.Errorf("ReplicaSets went from %v to %v", rsBefore, rs)
	}
	if jobs := uids(kubeItems(t, cluster, "-n", ns, "jobs")); strings.Join(jobs, " ") != strings.Join(jobsBefore, " ") {
		t.Errorf("release Jobs went from %v to %v: the resumed run ran its release again", jobsBefore, jobs)
	}
	var jobPods int
	for _, p := range kubeItems(t, cluster, "-n", ns, "pods") {
		if field(p, "metadata", "ownerReferences", 0, "kind") == "Job" {
			jobPods++
		}
	}
	if jobPods != 1 {
		t.Errorf("%d pods of the release Job, want its one run", jobPods)
	}
	var n int
	db.Pool.QueryRow(ctx, `SELECT count(*) FROM runs`).Scan(&n)
	if n != 1 {
		t.Errorf("%d runs, want the one resumed", n)
	}
}
