package kubernetes

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
)

// recorded are the pods testdata/pods holds, as a real node left them:
// name → the pod (the container's args choose the testapp's behaviour)
// and what its status must show before it is saved.
var recorded = []struct {
	name  string
	pod   string
	ready func(pod Object, events []Object) bool
}{
	{"crashloop", `{"spec":{"containers":[{"name":"app","image":"registry.local/skali/testapp:latest",
		"args":["exit","--code","2","--stdout","starting with token s3cr3t-t0k3n","--stderr","cannot open the config"]}]}}`,
		func(pod Object, _ []Object) bool {
			return waitingReason(pod) == "CrashLoopBackOff"
		}},
	{"oomkilled", `{"spec":{"containers":[{"name":"app","image":"registry.local/skali/testapp:latest",
		"args":["allocate","--mib","96"],"resources":{"limits":{"memory":"32Mi"}}}]}}`,
		func(pod Object, _ []Object) bool {
			return waitingReason(pod) == "CrashLoopBackOff"
		}},
	{"imagepull", `{"spec":{"containers":[{"name":"app","image":"registry.local/skali/nope:1"}]}}`,
		func(pod Object, _ []Object) bool {
			return waitingReason(pod) == "ImagePullBackOff"
		}},
	{"unschedulable", `{"spec":{"containers":[{"name":"app","image":"registry.local/skali/testapp:latest",
		"resources":{"requests":{"cpu":"64"}}}]}}`,
		func(pod Object, _ []Object) bool {
			c, ok := conditionOf(pod, "PodScheduled")
			return ok && c.reason == "Unschedulable"
		}},
	{"notready", `{"spec":{"containers":[{"name":"app","image":"registry.local/skali/testapp:latest",
		"args":["serve","--never-ready"],"ports":[{"containerPort":8080}],
		"readinessProbe":{"httpGet":{"path":"/readyz","port":8080},"periodSeconds":1}}]}}`,
		func(pod Object, events []Object) bool {
			return lastUnhealthy(str(pod, "metadata", "name"), "app", events) != nil
		}},
	{"running", `{"spec":{"containers":[{"name":"app","image":"registry.local/skali/testapp:latest",
		"args":["serve"],"ports":[{"containerPort":8080}],
		"readinessProbe":{"httpGet":{"path":"/readyz","port":8080},"periodSeconds":1}}]}}`,
		func(pod Object, _ []Object) bool {
			c, ok := conditionOf(pod, "Ready")
			return ok && c.status == "True"
		}},
}

func waitingReason(pod Object) string {
	for _, v := range list(pod, "status", "containerStatuses") {
		cs, _ := v.(Object)
		if w, ok := nested(cs, "state", "waiting"); ok {
			return str(w, "reason")
		}
	}
	return ""
}

// TestRecordPodStates regenerates testdata/pods from a real-node cluster
// (SKALI_RECORD_PODS=1, as root; about a minute): each pod of recorded is
// created, and saved with the namespace's events once its status shows
// what the classifier's table test reads.
func TestRecordPodStates(t *testing.T) {
	if os.Getenv("SKALI_RECORD_PODS") != "1" {
		t.Skip("regenerates testdata/pods on a real-node cluster: SKALI_RECORD_PODS=1")
	}
	c := clustertest.StartReal(t)
	client, err := LoadClient(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := "record-pods"
	_ = client.Delete(ctx, KindNamespace, "", ns)
	for {
		if _, err := client.Get(ctx, KindNamespace, "", ns); IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the namespace of an earlier recording did not go")
		}
		time.Sleep(250 * time.Millisecond)
	}
	if _, err := client.Create(ctx, KindNamespace, Object{"apiVersion": "v1", "kind": "Namespace", "metadata": Object{"name": ns}}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Delete(context.Background(), KindNamespace, "", ns) }()
	for _, r := range recorded {
		var pod Object
		if err := json.Unmarshal([]byte(r.pod), &pod); err != nil {
			t.Fatal(err)
		}
		pod["apiVersion"], pod["kind"] = "v1", "Pod"
		pod["metadata"] = Object{"name": r.name, "namespace": ns}
		if _, err := client.Create(ctx, KindPod, pod); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
	}
	if err := os.MkdirAll(filepath.Join("testdata", "pods"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range recorded {
		for {
			pod, err := client.Get(ctx, KindPod, ns, r.name)
			if err != nil {
				t.Fatalf("%s: %v", r.name, err)
			}
			events, err := client.List(ctx, KindEvent, ns, "")
			if err != nil {
				t.Fatal(err)
			}
			var mine []Object
			for _, ev := range events {
				if str(ev, "involvedObject", "name") == r.name {
					delete(ev["metadata"].(Object), "managedFields")
					mine = append(mine, ev)
				}
			}
			if r.ready(pod, mine) {
				delete(pod["metadata"].(Object), "managedFields")
				save(t, r.name+".pod.json", pod)
				save(t, r.name+".events.json", mine)
				break
			}
			if ctx.Err() != nil {
				b, _ := json.Marshal(pod["status"])
				t.Fatalf("%s never showed its state: %s", r.name, b)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}

func save(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "pods", name), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s", strings.TrimSuffix(name, ".json"))
}
