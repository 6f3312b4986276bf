package kubernetes_test

import (
	"testing"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/store"
)

const pruneBefore = `name: shop
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
  worker:
    image: registry.local/worker:1
    ports:
      http:
        port: 8080
databases:
  data:
    engine: postgres
    version: 17
    isolation: project
    storage:
      size: 1GB
buckets:
  media:
    visibility: private
`

const pruneAfter = `name: shop
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
`

// TestRemovedServicesArePrunedOnlyAfterConfirmation: a revision without
// the worker, the database and the bucket needs the environment's name
// typed; without it nothing is deleted, with it the removed services'
// objects are, by label, and the rest stays. The driver runs as the
// Studio's service account, with exactly deploy/kubernetes's RBAC.
func TestRemovedServicesArePrunedOnlyAfterConfirmation(t *testing.T) {
	f := newFixtureAs(t, asStudio(t), pruneBefore, "prune", nil)
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", run.Status, run.Reason)
	}
	// Blue-green (the default): the first deploy made the blue Deployments.
	removed := map[kubernetes.Kind]string{kubernetes.KindDeployment: "worker-blue", kubernetes.KindService: "worker",
		kubernetes.KindPGCluster: "data", kubernetes.KindBucketClaim: "media"}
	exists := func(k kubernetes.Kind, name string) bool {
		_, err := f.client.Get(f.ctx, k, f.ns, name)
		if err != nil && !kubernetes.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	for k, name := range removed {
		if !exists(k, name) {
			t.Fatalf("the first deploy made no %s %s", k.Kind, name)
		}
	}

	f.addRevision(pruneAfter)
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run, err := f.svc.StartDeploy(f.ctx, store.Actor{}, env, runs.DeployRequest{}); err == nil {
		t.Fatalf("a deploy removing a database and a bucket started without confirmation (run %d)", run.ID)
	}
	for k, name := range removed {
		if !exists(k, name) {
			t.Fatalf("%s %s was deleted before the removal was confirmed", k.Kind, name)
		}
	}

	if run := f.deploy(runs.DeployRequest{Confirm: "prune"}); run.Status != store.RunSucceeded {
		t.Fatalf("confirmed deploy %s: %s", run.Status, run.Reason)
	}
	for k, name := range removed {
		eventually(t, k.Kind+" "+name+" to be deleted", func() bool { return !exists(k, name) })
	}
	for k, name := range map[kubernetes.Kind]string{kubernetes.KindDeployment: "web-blue", kubernetes.KindService: "web"} {
		if !exists(k, name) {
			t.Errorf("%s %s of web, still declared, was deleted", k.Kind, name)
		}
	}
}
