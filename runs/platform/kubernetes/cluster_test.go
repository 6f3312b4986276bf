package kubernetes_test

import (
	"strings"
	"testing"

	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/store"
)

// TestAnEnvironmentOnAnotherClusterIsSaidAndDeployedWhole: a deploy
// records the cluster it activated on (kube-system's uid); a Studio whose
// cluster is another one (here: the record changed, as when the same
// database is pointed at a new cluster) says so in one sentence and plans
// the whole revision instead of "nothing changes", and after that deploy
// the environment is on this cluster again.
func TestAnEnvironmentOnAnotherClusterIsSaidAndDeployedWhole(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollingManifest, "other-cluster", map[string]string{"SESSION_SECRET": secretValue})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s", run.Status, run.Reason)
	}
	ks := f.get(kubernetes.KindNamespace, "kube-system")
	uid := str(ks, "metadata", "uid")
	recorded, err := f.db.EnvironmentPlatform(f.ctx, f.env.ID)
	if err != nil || recorded != "kubernetes/"+uid {
		t.Fatalf("recorded cluster %q (%v), want kubernetes/%s", recorded, err, uid)
	}
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := f.svc.PlanDeploy(f.ctx, env, 0)
	if err != nil {
		t.Fatal(err)
	}
	if plan.OtherCluster != "" || !plan.Redeploy {
		t.Fatalf("on its own cluster: other %q, redeploy %v (want nothing to change)", plan.OtherCluster, plan.Redeploy)
	}

	if err := f.db.SetEnvironmentPlatform(f.ctx, f.env.ID, "kubernetes/0a1b2c3d-another-cluster"); err != nil {
		t.Fatal(err)
	}
	plan, err = f.svc.PlanDeploy(f.ctx, env, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "The active revision of other-cluster runs on the kubernetes cluster 0a1b2c3d, not on the kubernetes cluster " + uid[:8] +
		", where this Studio deploys: nothing of it runs here, so the next deploy deploys everything."
	if plan.OtherCluster != want {
		t.Fatalf("the plan says %q, want %q", plan.OtherCluster, want)
	}
	if plan.Redeploy || plan.From != nil || len(plan.Rollouts) != 1 || !plan.Rollouts[0].Rolls {
		t.Fatalf("the plan on another cluster: redeploy %v, from %v, rollouts %+v; want everything deployed", plan.Redeploy, plan.From, plan.Rollouts)
	}
	if said, err := f.svc.OtherCluster(f.ctx, env); err != nil || said != want {
		t.Fatalf("OtherCluster: %q, %v", said, err)
	}
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy on the other cluster %s: %s", run.Status, run.Reason)
	}
	if recorded, _ := f.db.EnvironmentPlatform(f.ctx, f.env.ID); recorded != "kubernetes/"+uid {
		t.Fatalf("after the deploy the environment is on %q", recorded)
	}
	if said, _ := f.svc.OtherCluster(f.ctx, env); said != "" || strings.Contains(said, "another") {
		t.Fatalf("after the deploy: %q", said)
	}
}
