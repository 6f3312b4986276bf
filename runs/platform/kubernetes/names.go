package kubernetes

import (
	"fmt"
	"maps"
	"slices"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

var _ platform.DefinitionChecker = (*Platform)(nil)

// CheckDefinition implements platform.DefinitionChecker: two applications
// whose objects would have the same kind and name in the environment's
// namespace (a blue-green application web's slot web-blue and an
// application named web-blue, a route web's "api-public" and an
// application web-api's route "public") would overwrite each other, so the
// plan is refused, naming both and the object.
func (p *Platform) CheckDefinition(def *compiler.Definition) []string {
	if def == nil {
		return nil
	}
	type owner struct{ app, what string }
	owners := map[string]owner{}
	var refused []string
	claim := func(kind, name, app, what string) {
		key := kind + "/" + name
		o, taken := owners[key]
		if !taken {
			owners[key] = owner{app, what}
			return
		}
		if o.app != app {
			refused = append(refused, fmt.Sprintf("On Kubernetes, %s and %s would both be the %s %s; rename one of the applications %s and %s.",
				o.what, what, kind, name, o.app, app))
		}
	}
	for _, app := range slices.Sorted(maps.Keys(def.Applications)) {
		a := def.Applications[app]
		if blueGreen(a) {
			for _, slot := range []string{"blue", "green"} {
				claim("Deployment", dnsName(app, slot), app, fmt.Sprintf("the %s slot of %s", slot, app))
			}
		} else {
			claim("Deployment", dnsName(app), app, "the Deployment of "+app)
		}
		if len(a.Ports) > 0 {
			claim("Service", dnsName(app), app, "the Service of "+app)
		}
		if a.Scaling.TargetCPUUtilization > 0 {
			claim("HorizontalPodAutoscaler", dnsName(app), app, "the autoscaler of "+app)
		}
		for _, rn := range sortedRoutes(a) {
			claim("HTTPRoute", dnsName(app, rn), app, fmt.Sprintf("route %s of %s", rn, app))
			if len(a.Routes[rn].Aliases) > 0 {
				claim("HTTPRoute", dnsName(app, rn, "aliases"), app, fmt.Sprintf("the aliases of route %s of %s", rn, app))
			}
		}
		for _, vol := range sortedVolumes(a) {
			claim("PersistentVolumeClaim", dnsName(app, vol), app, fmt.Sprintf("volume %s of %s", vol, app))
		}
	}
	return refused
}
