package kubernetes

import (
	"encoding/json"
	"testing"
)

// The rollout's verdict and the text a user reads, from Deployments as the
// API server returns them (these run without a cluster; the same states
// are reached on the test cluster by kubernetes_test.go).
func TestRolloutStateReadsTheDeploymentAsKubectlDoes(t *testing.T) {
	for _, c := range []struct {
		name, status string
		gen          int
		done         bool
		failed, text string
	}{
		{"not yet observed", `{"observedGeneration":1,"replicas":2,"updatedReplicas":2,"readyReplicas":2,"availableReplicas":2}`, 2,
			false, "", "waiting for the cluster to see the new revision"},
		{"surging", `{"observedGeneration":2,"replicas":3,"updatedReplicas":1,"readyReplicas":2,"availableReplicas":2}`, 2,
			false, "", "0 of 2 replicas ready"},
		{"old replica leaving", `{"observedGeneration":2,"replicas":3,"updatedReplicas":2,"readyReplicas":3,"availableReplicas":3}`, 2,
			false, "", "2 of 2 replicas ready"},
		{"available", `{"observedGeneration":2,"replicas":2,"updatedReplicas":2,"readyReplicas":2,"availableReplicas":2}`, 2,
			true, "", "2 of 2 replicas ready"},
		{"deadline exceeded", `{"observedGeneration":2,"replicas":3,"updatedReplicas":1,"readyReplicas":2,"availableReplicas":2,
			"conditions":[{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded","message":"ReplicaSet \"web-7d\" has timed out progressing."}]}`, 2,
			false, `ReplicaSet "web-7d" has timed out progressing (0 of 2 replicas ready)`, "0 of 2 replicas ready"},
	} {
		var st Object
		if err := json.Unmarshal([]byte(c.status), &st); err != nil {
			t.Fatal(err)
		}
		dep := Object{"metadata": Object{"generation": float64(c.gen)}, "spec": Object{"replicas": float64(2)}, "status": st}
		got := rolloutState(dep)
		if got.done != c.done || got.failed != c.failed || got.text != c.text {
			t.Errorf("%s: got %+v, want done=%v failed=%q text=%q", c.name, got, c.done, c.failed, c.text)
		}
	}
}
