package kubernetes_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
)

const handEditManifest = `name: handedit
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
    scaling:
      replicas:
        min: 2
        max: 2
    deployment:
      rollout:
        strategy: rolling
        timeout: 60s
`

// runLogText is every log line of a run, one text.
func (f *fixture) runLogText(runID int64) string {
	f.t.Helper()
	var b strings.Builder
	cps, err := f.db.Checkpoints(f.ctx, runID)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, cp := range cps {
		lines, err := f.db.RunLog(f.ctx, runID, cp.Position)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, l := range lines {
			b.WriteString(cp.Name + ": " + l.Text + "\n")
		}
	}
	return b.String()
}

// TestHandEditsAreListedInThePlanAndTakenBackByTheDeploy deploys, then
// changes the Deployment by hand as a person does (`kubectl scale`, `kubectl
// set image`): the plan of the next deploy lists the fields kubectl owns,
// who and since when; the deploy succeeds (no server-side apply conflict),
// takes both fields back and says so in its log, and the plan after it
// lists nothing.
func TestHandEditsAreListedInThePlanAndTakenBackByTheDeploy(t *testing.T) {
	t.Parallel()
	cluster := clustertest.Start(t)
	if cluster.Kubectl == "" {
		t.Skip("no kubectl beside the cluster's kubeconfig")
	}
	f := newFixture(t, handEditManifest, "production", map[string]string{"SESSION_SECRET": secretValue})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", run.Status, run.Reason)
	}
	for _, args := range [][]string{{"scale", "deployment/web", "--replicas=5"}, {"set", "image", "deployment/web", "web=registry.local/web:by-hand"}} {
		if out, err := exec.Command(cluster.Kubectl, append([]string{"--kubeconfig", cluster.Kubeconfig, "-n", f.ns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := f.svc.PlanDeploy(f.ctx, env, 0)
	if err != nil {
		t.Fatal(err)
	}
	if plan.HandEditsError != "" {
		t.Fatalf("the plan could not read hand edits: %s", plan.HandEditsError)
	}
	var listed []string
	for _, h := range plan.HandEdits {
		if h.Since.IsZero() && h.Subresource == "" {
			// (The API server records no time for a write through scale.)
			t.Errorf("hand edit %+v says no since-when", h)
		}
		listed = append(listed, h.Kind+" "+h.Name+" "+h.Manager+"/"+h.Subresource+": "+strings.Join(h.Fields, ", "))
	}
	all := strings.Join(listed, "\n")
	if !strings.Contains(all, "Deployment web kubectl/scale: spec.replicas") ||
		!strings.Contains(all, "Deployment web kubectl-set/: spec.template.spec.containers[name=web].image") {
		t.Fatalf("the plan lists these hand edits:\n%s\nwant kubectl's spec.replicas (through scale) and the web container's image", all)
	}

	run := f.deploy(runs.DeployRequest{Redeploy: true})
	if run.Status != store.RunSucceeded {
		t.Fatalf("the deploy after the hand edits %s: %s\n%s", run.Status, run.Reason, f.runLogText(run.ID))
	}
	dep := f.get(kubernetes.KindDeployment, "web")
	if str(dep, "spec", "replicas") != "2" || str(dep, "spec", "template", "spec", "containers", 0, "image") != "registry.local/web:1" {
		t.Errorf("after the deploy the Deployment runs %s replicas of %s; want the manifest's 2 of registry.local/web:1",
			str(dep, "spec", "replicas"), str(dep, "spec", "template", "spec", "containers", 0, "image"))
	}
	log := f.runLogText(run.ID)
	if !strings.Contains(log, "Took back from kubectl (through scale): spec.replicas of Deployment web") ||
		!strings.Contains(log, "Took back from kubectl-set: spec.template.spec.containers[name=web].image of Deployment web") {
		t.Errorf("the deploy's log does not say which fields it took back from whom:\n%s", log)
	}
	if plan, err := f.svc.PlanDeploy(f.ctx, env, 0); err != nil || len(plan.HandEdits) != 0 {
		t.Errorf("after the deploy the plan still lists hand edits %+v (%v)", plan.HandEdits, err)
	}
}

// TestHandEditsOfTheLiveBlueGreenSlotAreSaidBeforeItGoes edits the live
// blue-green slot by hand (`kubectl set image`): the plan lists the edit as
// removed with the deploy, and the deploy that switches to the other slot
// says the edit went with the slot it deleted.
func TestHandEditsOfTheLiveBlueGreenSlotAreSaidBeforeItGoes(t *testing.T) {
	t.Parallel()
	cluster := clustertest.Start(t)
	if cluster.Kubectl == "" {
		t.Skip("no kubectl beside the cluster's kubeconfig")
	}
	f := newFixture(t, strings.Replace(blueGreenManifest, "name: bg", "name: bghand", 1), "production", map[string]string{"SESSION_SECRET": secretValue})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", run.Status, run.Reason)
	}
	if out, err := exec.Command(cluster.Kubectl, "--kubeconfig", cluster.Kubeconfig, "-n", f.ns, "set", "image", "deployment/web-blue", "web=registry.local/web:by-hand").CombinedOutput(); err != nil {
		t.Fatalf("kubectl set image: %v: %s", err, out)
	}
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.addRevision(strings.Replace(strings.Replace(blueGreenManifest, "name: bg", "name: bghand", 1), "web:1", "web:2", 1))
	plan, err := f.svc.PlanDeploy(f.ctx, env, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, h := range plan.HandEdits {
		if h.Kind == "Deployment" && h.Name == "web-blue" && h.Manager == "kubectl-set" && h.Removed &&
			strings.Join(h.Fields, ",") == "spec.template.spec.containers[name=web].image" {
			found = true
		}
	}
	if !found {
		t.Fatalf("the plan does not list kubectl-set's image of the live slot web-blue as removed with the deploy: %+v (%s)", plan.HandEdits, plan.HandEditsError)
	}
	run := f.deploy()
	if run.Status != store.RunSucceeded {
		t.Fatalf("the deploy %s: %s", run.Status, run.Reason)
	}
	if log := f.runLogText(run.ID); !strings.Contains(log, "Removed with this switch, with its hand edit: Deployment web-blue: kubectl-set (since ") ||
		!strings.Contains(log, "owns spec.template.spec.containers[name=web].image") {
		t.Errorf("the switch does not say the hand edit went with the slot:\n%s", log)
	}
}
