package kubernetes_test

import (
	"slices"
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
	t.Parallel()
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

const routesBefore = `name: routes
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: kept.test
        port: http
      extra:
        domain: dropped.test
        aliases: [www.dropped.test]
        port: http
    deployment:
      rollout:
        strategy: rolling
        timeout: 60s
  api:
    image: registry.local/api:1
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: api.test
        port: http
    deployment:
      rollout:
        strategy: rolling
        timeout: 60s
`

const routesAfter = `name: routes
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: kept.test
        port: http
    deployment:
      rollout:
        strategy: rolling
        timeout: 60s
`

// TestRemovedRoutesAndDomainsLoseTheirHTTPRoutesAndCertificates: a
// revision that drops a route of web and the whole api application goes
// live, and the dropped route's HTTPRoutes (its domain's and its
// aliases'), api's HTTPRoute and the cert-manager Certificates of the
// domains no route serves any more are deleted; web's remaining route and
// its Certificate stay. The test plays cert-manager (issuing each
// Certificate the first deploy applies); the driver runs as the Studio's
// service account, with exactly deploy/kubernetes's RBAC (cert-manager.yaml
// included).
func TestRemovedRoutesAndDomainsLoseTheirHTTPRoutesAndCertificates(t *testing.T) {
	t.Parallel()
	f := newFixtureAs(t, asStudio(t), routesBefore, "prune-routes", nil)
	f.useClusterIssuer("letsencrypt")
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.svc.StartDeploy(f.ctx, store.Actor{}, env, runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	done := f.execute(run.ID)
	cps, err := f.db.Checkpoints(f.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var domains []string
	for _, cp := range cps {
		if d := runs.DecodeCheckpointDetail(cp.Detail).TLS; d != nil {
			domains = append(domains, d.Domain)
		}
	}
	if !slices.Contains(domains, "dropped.test") || !slices.Contains(domains, "api.test") || !slices.Contains(domains, "kept.test") {
		t.Fatalf("the first deploy's certificates are for %v", domains)
	}
	for _, d := range domains {
		cm := f.certManager(d)
		cm.issuing()
		cm.issue(cm.request(1))
	}
	wait(t, done)
	if got, _ := f.db.RunByID(f.ctx, run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", got.Status, got.Reason)
	}
	exists := func(k kubernetes.Kind, name string) bool {
		_, err := f.client.Get(f.ctx, k, f.ns, name)
		if err != nil && !kubernetes.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	gone := map[string]kubernetes.Kind{"web-extra": kubernetes.KindHTTPRoute, "web-extra-aliases": kubernetes.KindHTTPRoute,
		"api-public": kubernetes.KindHTTPRoute}
	for _, d := range domains {
		if d != "kept.test" {
			gone[kubernetes.CertificateName(d)] = kubernetes.KindCertificate
		}
	}
	kept := map[string]kubernetes.Kind{"web-public": kubernetes.KindHTTPRoute, kubernetes.CertificateName("kept.test"): kubernetes.KindCertificate}
	for name, k := range gone {
		if !exists(k, name) {
			t.Fatalf("the first deploy made no %s %s", k.Kind, name)
		}
	}

	f.addRevision(routesAfter)
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("the deploy dropping a route and api: %s: %s", run.Status, run.Reason)
	}
	for name, k := range gone {
		eventually(t, k.Kind+" "+name+" to be deleted", func() bool { return !exists(k, name) })
	}
	for name, k := range kept {
		if !exists(k, name) {
			t.Errorf("%s %s, still served, was deleted", k.Kind, name)
		}
	}
}
