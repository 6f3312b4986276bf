package kubernetes_test

import (
	"strings"
	"testing"

	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/store"
)

const blueGreenManifest = `name: bg
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
        strategy: blue-green
        timeout: 20s
`

// TestBlueGreenSwitchesTheServiceOnceTheNewSlotIsReady: each deploy starts
// the new revision in the slot the Service does not select; a revision
// that never becomes ready fails with the deadline's message while the
// live slot keeps serving, and one that does takes the Service's selector,
// after which the old slot goes.
func TestBlueGreenSwitchesTheServiceOnceTheNewSlotIsReady(t *testing.T) {
	t.Parallel()
	f := newFixture(t, blueGreenManifest, "blue-green", map[string]string{"SESSION_SECRET": secretValue})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", run.Status, run.Reason)
	}
	slot := func() string {
		return str(f.get(kubernetes.KindService, "web"), "spec", "selector", kubernetes.LabelSlot)
	}
	if s := slot(); s != "blue" {
		t.Fatalf("after the first deploy the Service selects slot %q, want blue", s)
	}
	blue := f.get(kubernetes.KindDeployment, "web-blue")
	if str(blue, "status", "availableReplicas") != "2" {
		t.Fatalf("the blue Deployment has %s available replicas, want 2", str(blue, "status", "availableReplicas"))
	}

	// A revision whose pods never become ready: the green slot fails, the
	// blue one serves on, untouched.
	f.annotate("web", "rollout", map[string]string{"testcluster.skali.dev/never-ready": "true"})
	f.addRevision(strings.Replace(blueGreenManifest, "web:1", "web:2", 1))
	run := f.deploy()
	if run.Status != store.RunFailed || !strings.Contains(run.Reason, "has timed out progressing") {
		t.Fatalf("deploy of a never-ready revision %s: %q, want failed at the progress deadline", run.Status, run.Reason)
	}
	if s := slot(); s != "blue" {
		t.Fatalf("after the failed deploy the Service selects slot %q, want blue", s)
	}
	after := f.get(kubernetes.KindDeployment, "web-blue")
	if str(after, "metadata", "generation") != str(blue, "metadata", "generation") || str(after, "status", "availableReplicas") != "2" {
		t.Fatalf("the serving blue Deployment changed during the failed deploy: generation %s → %s, %s available",
			str(blue, "metadata", "generation"), str(after, "metadata", "generation"), str(after, "status", "availableReplicas"))
	}

	// A revision that becomes ready takes the Service; blue goes.
	f.annotate("web", "rollout", nil)
	f.addRevision(strings.Replace(blueGreenManifest, "web:1", "web:3", 1))
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy of a ready revision %s: %s", run.Status, run.Reason)
	}
	if s := slot(); s != "green" {
		t.Fatalf("after the deploy the Service selects slot %q, want green", s)
	}
	green := f.get(kubernetes.KindDeployment, "web-green")
	if str(green, "spec", "template", "spec", "containers", 0, "image") != "registry.local/web:3" || str(green, "status", "availableReplicas") != "2" {
		t.Fatalf("the green Deployment runs %s with %s available replicas", str(green, "spec", "template", "spec", "containers", 0, "image"), str(green, "status", "availableReplicas"))
	}
	eventually(t, "the blue Deployment to go", func() bool {
		_, err := f.client.Get(f.ctx, kubernetes.KindDeployment, f.ns, "web-blue")
		return kubernetes.IsNotFound(err)
	})
	f.checkNoPlaintext()
}
