package kubernetes

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skali-dev/studio/runs/platform"
)

func readRecorded(t *testing.T, name string) (Object, []Object) {
	t.Helper()
	var pod Object
	var events []Object
	for file, v := range map[string]any{name + ".pod.json": &pod, name + ".events.json": &events} {
		b, err := os.ReadFile(filepath.Join("testdata", "pods", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	return pod, events
}

// Pods as a real node left them (testdata/pods, recorded by
// TestRecordPodStates), read as the problem a user is told of.
func TestClassifyPodReadsRecordedPods(t *testing.T) {
	for _, c := range []struct {
		name     string
		state    platform.AppState
		reason   []string // the Reason holds each
		exitCode int      // -1: none
		limit    string
		image    string
	}{
		{"crashloop", platform.StateCrashLooping, []string{"container app exited with code 2", "restarted once"}, 2, "", ""},
		{"oomkilled", platform.StateOOMKilled, []string{"container app was killed for passing its memory limit of 32MiB"}, 137, "32Mi", ""},
		{"oomunreported", platform.StateOOMKilled, []string{"container app was killed (exit code 137, SIGKILL), most likely for passing its memory limit of 32MB: the node did not say why"}, 137, "32M", ""},
		{"imagepull", platform.StateImagePull, []string{"image registry.local/skali/nope:1 cannot be pulled", "not found"}, -1, "", "registry.local/skali/nope:1"},
		{"unschedulable", platform.StateUnschedulable, []string{"no node can run it: 0/1 nodes are available: 1 Insufficient cpu."}, -1, "", ""},
		{"notready", platform.StateNotReady, []string{"container app fails its readiness probe GET /readyz on port 8080: Readiness probe failed: HTTP probe failed with statuscode: 503"}, -1, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod, events := readRecorded(t, c.name)
			got, ok := ClassifyPod(pod, events)
			if !ok {
				t.Fatalf("no problem seen in %s", c.name)
			}
			if got.State != c.state || got.Pod != c.name || got.Limit != c.limit || got.Image != c.image {
				t.Errorf("got state %q pod %q limit %q image %q, want %q %q %q %q", got.State, got.Pod, got.Limit, got.Image, c.state, c.name, c.limit, c.image)
			}
			for _, want := range c.reason {
				if !strings.Contains(got.Reason, want) {
					t.Errorf("reason %q lacks %q", got.Reason, want)
				}
			}
			switch {
			case c.exitCode < 0 && got.ExitCode != nil:
				t.Errorf("exit code %d, want none", *got.ExitCode)
			case c.exitCode >= 0 && (got.ExitCode == nil || *got.ExitCode != c.exitCode):
				t.Errorf("exit code %v, want %d", got.ExitCode, c.exitCode)
			}
			if c.state != platform.StateUnschedulable && c.state != platform.StateImagePull && got.Since.IsZero() {
				t.Error("no time the problem was first seen")
			}
			if got.State.Failing() != (c.state != platform.StateNotReady) {
				t.Errorf("%s: Failing() = %v", got.State, got.State.Failing())
			}
		})
	}
	t.Run("running", func(t *testing.T) {
		pod, events := readRecorded(t, "running")
		if got, ok := ClassifyPod(pod, events); ok {
			t.Fatalf("a ready pod read as %+v", got)
		}
	})
	t.Run("not ready without its events", func(t *testing.T) {
		pod, _ := readRecorded(t, "notready")
		got, ok := ClassifyPod(pod, nil)
		if !ok || got.State != platform.StateNotReady || got.Reason != "container app fails its readiness probe GET /readyz on port 8080" {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("an exit 137 after a failed liveness probe is not the memory limit", func(t *testing.T) {
		pod, _ := readRecorded(t, "oomunreported")
		pod["spec"].(Object)["restartPolicy"] = "Always" // as a Deployment's pods
		killed := Object{"reason": "Killing", "message": "Container app failed liveness probe, will be restarted",
			"involvedObject": Object{"kind": "Pod", "name": "oomunreported", "fieldPath": "spec.containers{app}"}}
		got, ok := ClassifyPod(pod, []Object{killed})
		if !ok || got.State == platform.StateOOMKilled || !strings.Contains(got.Reason, "exited with code 137") {
			t.Fatalf("got %+v, want an exit with code 137, not a memory kill", got)
		}
	})
	t.Run("a pod being deleted has no problem of the app's", func(t *testing.T) {
		pod, events := readRecorded(t, "crashloop")
		pod["metadata"].(Object)["deletionTimestamp"] = "2026-12-02T21:07:00Z"
		if got, ok := ClassifyPod(pod, events); ok {
			t.Fatalf("got %+v", got)
		}
	})
}

// TestAPodWaitingForItsVolumeClaimIsNotUnschedulable: the scheduler calls
// a pod whose claim is not bound yet unschedulable ("pod has unbound
// immediate PersistentVolumeClaims"), and schedules it once the claim is
// bound: that is a pod still being created, not one no node can run (a
// rollout of a fresh volume failed at once on a busy node). A pod no node
// has room for still is one.
func TestAPodWaitingForItsVolumeClaimIsNotUnschedulable(t *testing.T) {
	pod, events := readRecorded(t, "unschedulable")
	if p, ok := ClassifyPod(pod, events); !ok || p.State != platform.StateUnschedulable {
		t.Fatalf("the recorded pod without room = %+v (%v), want unschedulable", p, ok)
	}
	for _, v := range list(pod, "status", "conditions") {
		if c, _ := v.(Object); c["type"] == "PodScheduled" {
			c["message"] = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found"
		}
	}
	if p, ok := ClassifyPod(pod, events); ok {
		t.Errorf("a pod waiting for its claim to be bound = %+v, want no problem yet", p)
	}
}
