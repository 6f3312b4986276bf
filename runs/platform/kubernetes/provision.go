package kubernetes

// Provisioning waits for the operator: a database is provisioned once its
// CloudNativePG Cluster is Ready and the operator wrote its application
// Secret, a bucket once its ObjectBucketClaim is Bound, each within
// ProvisionTimeout (the reference's minute); otherwise the step fails
// with what the operator last said.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/skali-dev/studio/runs/platform"
)

// ProvisionTimeout is how long a database or bucket may take to accept
// connections: the reference's minute (Options.ProvisionTimeout).
const ProvisionTimeout = time.Minute

// databaseState reads a Cluster: ready once its Ready condition is True,
// the operator recorded the application Secret's version (the Studio may
// not read that Secret itself) and every instance's pod is Ready
// (status.readyInstances, which CloudNativePG counts from the pods'
// own Ready condition: its Ready condition can come first, while the
// NAME-rw Service has no ready endpoint yet and refuses connections);
// what it says otherwise.
func databaseState(o Object) (ready bool, said string) {
	c, ok := conditionOf(o, "Ready")
	secret := str(o, "status", "secretsResourceVersion", "applicationSecretVersion")
	want, readyPods := clusterNumber(o, "status", "instances"), clusterNumber(o, "status", "readyInstances")
	if want == 0 {
		want = clusterNumber(o, "spec", "instances")
	}
	if ok && c.status == "True" && secret != "" && readyPods >= want {
		return true, ""
	}
	if ok && c.status == "True" && secret != "" {
		return false, fmt.Sprintf("Ready, %d of %d instances' pods ready", readyPods, want)
	}
	switch {
	case ok && strings.TrimSpace(c.message) != "":
		said = strings.TrimSpace(c.message)
	case ok && c.reason != "":
		said = c.reason
	case str(o, "status", "phase") != "":
		said = str(o, "status", "phase")
		if r := str(o, "status", "phaseReason"); r != "" {
			said += ": " + r
		}
	}
	if said == "" && ok && c.status == "True" {
		said = "Ready, but the operator has not written the application Secret"
	}
	return false, said
}

// bucketState reads an ObjectBucketClaim: ready once Bound.
func bucketState(o Object) (ready bool, said string) {
	phase := str(o, "status", "phase")
	if phase == "Bound" {
		return true, ""
	}
	if phase != "" {
		said = "the claim is " + phase
	}
	return false, said
}

// waitProvisioned follows the object until state says ready, for at most
// Options.ProvisionTimeout, writing each new thing the operator says to out; at
// the deadline it fails with the operator's last words.
func (p *Platform) waitProvisioned(ctx context.Context, k Kind, namespace, name, what string, obj Object,
	state func(Object) (bool, string), out platform.Output) error {
	provisionTimeout := p.Opts.ProvisionTimeout
	if provisionTimeout <= 0 {
		provisionTimeout = ProvisionTimeout
	}
	started := time.Now()
	wctx, cancel := context.WithTimeout(ctx, provisionTimeout)
	defer cancel()
	last := ""
	check := func(o Object) (bool, error) {
		ready, said := state(o)
		if said != last && said != "" {
			last = said
			out.Line(fmt.Sprintf("%s %s/%s: %s", k.Kind, namespace, name, said))
		}
		return ready, nil
	}
	if done, _ := check(obj); done {
		out.Line(fmt.Sprintf("%s is ready", what))
		return nil
	}
	err := p.watches.follow(wctx, k, namespace, name, check)
	if err == nil {
		out.Line(fmt.Sprintf("%s is ready after %s", what, time.Since(started).Round(100*time.Millisecond)))
		return nil
	}
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if last == "" {
		last = "no operator acted on it"
	}
	return fmt.Errorf("%s was not ready within %s (%s %s/%s: %s)", what, provisionTimeout, k.Kind, namespace, name, last)
}

// clusterNumber reads a number of the Cluster (0 when absent).
func clusterNumber(o Object, path ...string) int {
	var v any = o
	for _, k := range path {
		m, _ := v.(Object)
		v = m[k]
	}
	return num(v)
}
