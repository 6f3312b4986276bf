package kubernetes_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// TestRolloutAndReleaseWriteTheirProgress: a rollout writes its replicas'
// readiness as it changes, and a release Job its pod's log lines; kwok's
// simulated pods keep no log, so the Job's conditions are written instead.
// No line holds a value's plaintext.
func TestRolloutAndReleaseWriteTheirProgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, releaseManifest, "output", map[string]string{"SESSION_SECRET": secretValue})
	run := f.deploy()
	if run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s", run.Status, run.Reason)
	}
	env := platform.Env{ID: f.env.ID, Project: f.project.Name, Name: f.env.Name}
	app := compiler.Compile([]byte(releaseManifest)).Definition.Applications["web"]

	release := &recorder{}
	if err := f.platform.Release(f.ctx, env, "web", app, app.Deployment.ReleaseCommand, platform.ReleaseKey{RunID: run.ID, Position: 99}, release); err != nil {
		t.Fatalf("release: %v", err)
	}
	if release.index("started") < 0 || release.index(" Complete True") < 0 {
		t.Errorf("the release's output %q, want the Job started and its Complete condition", release.all())
	}

	rollout := &recorder{}
	two := *app
	two.Scaling.Min, two.Scaling.Max = 2, 2
	if err := f.platform.Rollout(f.ctx, env, "web", &two, rollout); err != nil {
		t.Fatalf("rollout: %v", err)
	}
	lines := rollout.all()
	t.Logf("release output %q; rollout output %q", release.all(), lines)
	ready, switched := slices.Index(lines, "2 of 2 replicas ready"), slices.Index(lines, "the Service of web now sends traffic to the green Deployment")
	if ready < 0 || switched < ready {
		t.Errorf("the rollout's output %q, want 2 of 2 replicas ready, then the switch to green", lines)
	}
	if slices.ContainsFunc(append(lines, release.all()...), func(l string) bool { return strings.Contains(l, secretValue) }) {
		t.Error("an output line holds a value's plaintext")
	}
}

const probedManifest = `name: probed
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
    health:
      readiness:
        http:
          port: http
          path: /ready
    deployment:
      rollout:
        strategy: rolling
        timeout: 1m
`

// TestRolloutEndedByItsTimeoutSaysWhatItsPodsShow: when the step's rollout
// timeout comes before the cluster's own verdict (a busy controller), the
// rollout still says why it is stuck, as the cluster's verdict would.
func TestRolloutEndedByItsTimeoutSaysWhatItsPodsShow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, probedManifest, "stalled", nil)
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", run.Status, run.Reason)
	}
	env := platform.Env{ID: f.env.ID, Project: f.project.Name, Name: f.env.Name}
	// The next image's pods run but never become ready (a kwok stage);
	// the Deployment's progress deadline is 55 s, the step's timeout 3 s.
	app := compiler.Compile([]byte(strings.Replace(probedManifest, "web:1", "web:never-2", 1))).Definition.Applications["web"]
	ctx, cancel := context.WithTimeout(f.ctx, 3*time.Second)
	defer cancel()
	out := &recorder{}
	err := f.platform.Rollout(ctx, env, "web", app, out)
	var stalled *platform.StalledError
	if !errors.As(err, &stalled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("rollout: %v, want it stalled at its timeout", err)
	}
	if !strings.Contains(stalled.Why, "fails its readiness probe GET /ready on port 8080") || !strings.HasPrefix(stalled.Why, "pod web-") {
		t.Errorf("why %q, want the pod and its failing probe", stalled.Why)
	}
	if !slices.Contains(out.all(), stalled.Why) {
		t.Errorf("the rollout's output %q lacks %q", out.all(), stalled.Why)
	}
}
