package kubernetes_test

import (
	"context"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/store"
)

// TestHealthFollowsWhatKubectlDoes deploys on the kwok cluster with the
// health monitor running and, as a person with kubectl would, scales the
// Deployment to 0 and then deletes it: the stored health (what the page,
// the API and studio status read) says running, then scaled to zero,
// then missing, each from the watches, without a deploy.
func TestHealthFollowsWhatKubectlDoes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollingManifest, "health-kubectl", map[string]string{"SESSION_SECRET": secretValue})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s", run.Status, run.Reason)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	go func() { _ = f.svc.WatchHealth(ctx) }()

	wait := func(state platform.AppState, level platform.HealthLevel) platform.AppHealth {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			h, err := f.db.HealthOf(f.ctx, f.env.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Report.Apps) == 1 && h.Report.Apps[0].State == state && h.Level == level {
				return h.Report.Apps[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("health %s %+v, want web %s and %s", h.Level, h.Report.Apps, state, level)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	web := wait(platform.StateRunning, platform.HealthHealthy)
	if web.Ready != 2 || web.Desired != 2 {
		t.Errorf("running web: %d of %d ready, want 2 of 2", web.Ready, web.Desired)
	}
	if err := f.client.Scale(f.ctx, kubernetes.KindDeployment, f.ns, "web", 0); err != nil {
		t.Fatal(err)
	}
	web = wait(platform.StateScaledToZero, platform.HealthDown)
	if web.Desired != 0 || web.Since.IsZero() {
		t.Errorf("scaled web: desired %d, since %v; want 0 and a time", web.Desired, web.Since)
	}
	if err := f.client.Delete(f.ctx, kubernetes.KindDeployment, f.ns, "web"); err != nil {
		t.Fatal(err)
	}
	web = wait(platform.StateMissing, platform.HealthDown)
	if web.Reason == "" {
		t.Error("a deleted Deployment is missing without a reason")
	}
}
