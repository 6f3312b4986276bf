package kubernetes_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/store"
)

const collidingManifest = `name: slots
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
  web-blue:
    image: registry.local/web-blue:1
    ports:
      http:
        port: 8080
    deployment:
      rollout:
        strategy: rolling
`

// TestCollidingObjectNamesAreRefusedAtPlanTime: a blue-green application
// web beside an application named web-blue would share the Deployment
// web-blue (web's blue slot): the plan is refused, naming both, and
// nothing is applied; with web-blue renamed the deploy goes through, each
// application with its own Deployments.
func TestCollidingObjectNamesAreRefusedAtPlanTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, collidingManifest, "slots", nil)
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := f.svc.PlanDeploy(f.ctx, env, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "On Kubernetes, the blue slot of web and the Deployment of web-blue would both be the Deployment web-blue; rename one of the applications web and web-blue."
	if len(plan.Refused) != 1 || plan.Refused[0] != want {
		t.Fatalf("the plan refuses %q, want %q", plan.Refused, want)
	}
	run, err := f.svc.StartDeploy(f.ctx, store.Actor{}, env, runs.DeployRequest{})
	var refusal *runs.DeployRefusal
	if !errors.As(err, &refusal) || !strings.Contains(refusal.Message, want) {
		t.Fatalf("the deploy started (run %v) or was refused otherwise: %v", run, err)
	}
	if deps, err := f.client.List(f.ctx, kubernetes.KindDeployment, f.ns, ""); err != nil || len(deps) != 0 {
		t.Fatalf("the refused deploy left %d Deployments (%v)", len(deps), err)
	}

	f.addRevision(strings.Replace(collidingManifest, "  web-blue:", "  api:", 1))
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy with the application renamed: %s: %s", run.Status, run.Reason)
	}
	for dep, app := range map[string]string{"web-blue": "web", "api": "api"} {
		if got := str(f.get(kubernetes.KindDeployment, dep), "metadata", "labels", kubernetes.LabelService); got != app {
			t.Errorf("the Deployment %s belongs to %s, want %s", dep, got, app)
		}
	}
}

const routedManifest = `name: routed
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: routed.test
        port: http
        tls: automatic
`

// TestRoutesOnAStudioWithoutAGatewayAreRefusedBeforeTheDeploy: with no
// --gateway no HTTPRoute would be written, so the plan says so and the
// deploy is refused; nothing is applied and no route reads issued.
func TestRoutesOnAStudioWithoutAGatewayAreRefusedBeforeTheDeploy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, routedManifest, "no-gateway", nil)
	f.platform.Opts.Gateway = ""
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := f.svc.PlanDeploy(f.ctx, env, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "On Kubernetes, routes attach to a Gateway, and this Studio was started without --gateway: no HTTPRoute would be written for route public of web, so nothing would reach it; start the Studio with --gateway NAMESPACE/NAME."
	if len(plan.Refused) != 1 || plan.Refused[0] != want {
		t.Fatalf("the plan refuses %q, want %q", plan.Refused, want)
	}
	_, err = f.svc.StartDeploy(f.ctx, store.Actor{}, env, runs.DeployRequest{})
	var refusal *runs.DeployRefusal
	if !errors.As(err, &refusal) || !strings.Contains(refusal.Message, want) {
		t.Fatalf("the deploy was not refused with the plan's sentence: %v", err)
	}
	if _, err := f.client.Get(f.ctx, kubernetes.KindNamespace, "", f.ns); !kubernetes.IsNotFound(err) {
		t.Fatalf("the refused deploy made its namespace (%v)", err)
	}
	// The step itself refuses to call the route issued.
	if _, _, err := f.platform.Issue(f.ctx, platform.Env{ID: f.env.ID, Project: f.project.Name, Name: f.env.Name}, "routed.test", time.Now(), platform.Discard); err == nil || !strings.Contains(err.Error(), "without --gateway") {
		t.Fatalf("Issue without a Gateway: %v", err)
	}
}
