package kubernetes

import (
	"strings"
	"testing"
)

// A Cluster is ready for a release command only once the operator's Ready
// condition, its application Secret and every instance's pod Ready agree:
// CloudNativePG can say Ready while its primary's pod is not yet Ready,
// and then the NAME-rw Service refuses connections.
func TestDatabaseStateWaitsForTheInstancesPods(t *testing.T) {
	cluster := func(ready string, secret string, instances, readyPods int) Object {
		st := Object{"conditions": []any{Object{"type": "Ready", "status": ready, "reason": "ClusterIsReady"}},
			"instances": float64(instances), "readyInstances": float64(readyPods)}
		if secret != "" {
			st["secretsResourceVersion"] = Object{"applicationSecretVersion": secret}
		}
		return Object{"spec": Object{"instances": float64(instances)}, "status": st}
	}
	for _, c := range []struct {
		name  string
		o     Object
		ready bool
		said  string
	}{
		{"all ready", cluster("True", "42", 1, 1), true, ""},
		{"the primary's pod not Ready yet", cluster("True", "42", 1, 0), false, "Ready, 0 of 1 instances' pods ready"},
		{"two of three", cluster("True", "42", 3, 2), false, "Ready, 2 of 3 instances' pods ready"},
		{"no Secret yet", cluster("True", "", 1, 1), false, "ClusterIsReady"},
		{"not Ready", cluster("False", "42", 1, 1), false, "ClusterIsReady"},
	} {
		ready, said := databaseState(c.o)
		if ready != c.ready || !strings.Contains(said, c.said) {
			t.Errorf("%s: ready %v, said %q; want %v, %q", c.name, ready, said, c.ready, c.said)
		}
	}
}
