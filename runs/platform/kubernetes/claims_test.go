package kubernetes_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/store"
)

const claimsManifest = `name: claims
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: "${APP_DOMAIN}"
        port: http
        aliases: ["www.${APP_DOMAIN}"]
        tls: disabled
    deployment:
      releaseCommand:
        command: ["/app/migrate"]
        timeout: 1m
`

// releaseHook is the Kubernetes platform with a hook run before each
// release command.
type releaseHook struct {
	*kubernetes.Platform
	before func()
}

func (h *releaseHook) Release(ctx context.Context, env platform.Env, app string, a *compiler.Application, cmd *compiler.ReleaseCommand, key platform.ReleaseKey, out platform.Output) error {
	if h.before != nil {
		h.before()
	}
	return h.Platform.Release(ctx, env, app, a, cmd, key, out)
}

// routeHostnames are the hostnames of the HTTPRoutes in the namespace.
func (f *fixture) routeHostnames() []string {
	f.t.Helper()
	routes, err := f.client.List(f.ctx, kubernetes.KindHTTPRoute, f.ns, "")
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, r := range routes {
		hs, _ := at(r, "spec", "hostnames").([]any)
		for _, h := range hs {
			out = append(out, h.(string))
		}
	}
	slices.Sort(out)
	return out
}

// TestNoHTTPRouteIsWrittenForAHostnameTheEnvironmentDoesNotHold moves the
// alias's claim to another project's environment while the deploy runs
// its release command: the rollout, which writes the HTTPRoutes, is
// refused and the cluster gets no route at all; once the claim is back,
// the same deploy writes both.
func TestNoHTTPRouteIsWrittenForAHostnameTheEnvironmentDoesNotHold(t *testing.T) {
	t.Parallel()
	f := newFixture(t, claimsManifest, "claims", map[string]string{"APP_DOMAIN": "claims.test"})
	hook := &releaseHook{Platform: f.platform}
	f.svc = runs.NewService(f.db, f.vault, hook, time.Now, nil)
	p, _, err := f.db.CreateProject(f.ctx, store.Actor{}, store.NewRevision{Name: "rival", Source: "name: rival", Canonical: []byte(`{"name":"rival"}`), Hash: "sha256:rival"})
	if err != nil {
		t.Fatal(err)
	}
	rival, err := f.db.CreateEnvironment(f.ctx, store.Actor{}, p.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	hook.before = func() {
		if _, err := f.db.MoveHostnameClaim(f.ctx, store.Actor{}, "www.claims.test", rival.ID); err != nil {
			t.Error(err)
		}
	}
	run := f.deploy()
	if run.Status != store.RunFailed || run.Reason != "www.claims.test is served by another environment of this installation." {
		t.Fatalf("deploy %s (%s), want failed on www.claims.test", run.Status, run.Reason)
	}
	if got := f.routeHostnames(); len(got) != 0 {
		t.Fatalf("HTTPRoutes for %v were written", got)
	}
	if deps, err := f.client.List(f.ctx, kubernetes.KindDeployment, f.ns, ""); err != nil || len(deps) != 0 {
		t.Fatalf("%d Deployments after the refused rollout (%v)", len(deps), err)
	}

	hook.before = nil
	if _, err := f.db.MoveHostnameClaim(f.ctx, store.Actor{}, "www.claims.test", f.env.ID); err != nil {
		t.Fatal(err)
	}
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy with both claims: %s (%s)", run.Status, run.Reason)
	}
	if got := f.routeHostnames(); !slices.Equal(got, []string{"claims.test", "www.claims.test"}) {
		t.Fatalf("HTTPRoutes for %v, want claims.test and www.claims.test", got)
	}
}
