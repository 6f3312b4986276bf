package kubernetes_test

import (
	"slices"
	"strings"
	"testing"

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
