package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// LabelSlot names the blue or green Deployment of a blue-green
// application; its Service selects the live one.
const LabelSlot = "skali.dev/slot"

// annotationTemplate is the hash of what a slot's Deployment was applied
// with: a resumed rollout finds the revision live already by it.
const annotationTemplate = "skali.dev/template-hash"

// blueGreen reports whether an application rolls out as two Deployments
// and a Service switch: blue-green, with a Service to switch.
func blueGreen(a *compiler.Application) bool {
	return a.Deployment.Rollout.Strategy == "blue-green" && len(a.Ports) > 0
}

func otherSlot(slot string) string {
	if slot == "blue" {
		return "green"
	}
	return "blue"
}

// templateHash identifies what a Deployment is applied with.
func templateHash(dep Object) string {
	data, _ := json.Marshal(dep["spec"])
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}

// slotDeployment is the application's Deployment in slot.
func slotDeployment(dep Object, app, slot, hash string) Object {
	md := dep["metadata"].(Object)
	md["name"] = dnsName(app, slot)
	md["labels"].(Object)[LabelSlot] = slot
	md["annotations"] = Object{annotationTemplate: hash}
	spec := dep["spec"].(Object)
	spec["selector"].(Object)["matchLabels"].(Object)[LabelSlot] = slot
	spec["template"].(Object)["metadata"].(Object)["labels"].(Object)[LabelSlot] = slot
	return dep
}

// rolloutBlueGreen is the reference's blue-green: the new revision starts
// in the slot the Service does not select, beside the live one, which
// serves until every new replica is ready; then the Service's selector
// switches to it and the old slot goes. A failed rollout leaves the live
// slot serving. A resumed rollout re-attaches: the slot being started is
// applied unchanged, and a revision found live already is only finished.
func (p *Platform) rolloutBlueGreen(ctx context.Context, n envNames, app string, a *compiler.Application, valuesVersion string, out platform.Output) error {
	base := withValuesVersion(deployment(n, app, a, p), valuesVersion)
	hash := templateHash(base)
	live := ""
	svc, err := p.Client.Get(ctx, KindService, n.namespace, dnsName(app))
	switch {
	case err == nil:
		live = str(svc, "spec", "selector", LabelSlot)
	case !IsNotFound(err):
		return p.apiError("reading the Service of "+app, err)
	}
	target := otherSlot(live)
	var cur Object
	if live != "" {
		cur, err = p.Client.Get(ctx, KindDeployment, n.namespace, dnsName(app, live))
		switch {
		case err == nil && str(cur, "metadata", "annotations", annotationTemplate) == hash:
			target = live // this revision serves already: finish its switch
		case err != nil && !IsNotFound(err):
			return p.apiError("reading the "+live+" Deployment of "+app, err)
		}
	}
	if target != live {
		if live == "" {
			out.Line(fmt.Sprintf("starting the %s Deployment of %s", target, app))
		} else {
			out.Line(fmt.Sprintf("starting the %s Deployment of %s beside the %s one, which serves until it is ready", target, app, live))
		}
	}
	dep, err := p.apply(ctx, KindDeployment, slotDeployment(base, app, target, hash), out)
	if err != nil {
		return p.apiError("applying the "+target+" Deployment of "+app, err)
	}
	minReady := 0
	if a.Scaling.TargetCPUUtilization > 0 {
		// The new slot starts with as many replicas as the live one has
		// (at least the minimum), and the autoscaler moves to it at once;
		// the live slot keeps its replicas until the switch.
		minReady = max(a.Scaling.Min, 1)
		if cur != nil && target != live {
			if spec, _ := cur["spec"].(Object); num(spec["replicas"]) > minReady {
				minReady = num(spec["replicas"])
			}
		}
		if spec, _ := dep["spec"].(Object); num(spec["replicas"]) < minReady {
			if err := p.Client.Scale(ctx, KindDeployment, n.namespace, dnsName(app, target), minReady); err != nil {
				return p.apiError("scaling the "+target+" Deployment of "+app, err)
			}
		}
		if _, err := p.apply(ctx, KindHPA, autoscalerOf(n, app, a, p, dnsName(app, target)), out); err != nil {
			return p.apiError("applying the autoscaler of "+app, err)
		}
	}
	if err := p.waitRollout(ctx, n, app, dep, minReady, out); err != nil {
		return err
	}
	s := service(n, app, a, p)
	s["spec"].(Object)["selector"].(Object)[LabelSlot] = target
	if _, err := p.apply(ctx, KindService, s, out); err != nil {
		return p.apiError("switching the Service of "+app, err)
	}
	if target != live {
		out.Line(fmt.Sprintf("the Service of %s now sends traffic to the %s Deployment", app, target))
	}
	return p.dropDeployments(ctx, n, app, dnsName(app, target), out)
}

// dropDeployments deletes the application's Deployments other than keep:
// the old slot after a switch, a Deployment from before a change of
// strategy.
func (p *Platform) dropDeployments(ctx context.Context, n envNames, app, keep string, out platform.Output) error {
	sel := fmt.Sprintf("%s=%s,%s=%s", LabelManagedBy, managedBy, LabelService, labelValue(app))
	deps, err := p.Client.List(ctx, KindDeployment, n.namespace, sel)
	if err != nil {
		return p.apiError("listing the Deployments of "+app, err)
	}
	for _, d := range deps {
		name := str(d, "metadata", "name")
		if name == keep {
			continue
		}
		// Hand edits of the slot go with it: said, not dropped silently.
		for _, h := range handEdits(KindDeployment, d) {
			out.Line("Removed with this switch, with its hand edit: " + handEditText(h))
		}
		if err := p.Client.Delete(ctx, KindDeployment, n.namespace, name); err != nil {
			return p.apiError("deleting the Deployment "+name+" of "+app, err)
		}
		out.Line(fmt.Sprintf("deleted the Deployment %s/%s of %s", n.namespace, name, app))
	}
	return nil
}
