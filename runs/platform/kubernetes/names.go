package kubernetes

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

var _ platform.DefinitionChecker = (*Platform)(nil)

// CheckDefinition implements platform.DefinitionChecker: two applications
// whose objects would have the same kind and name in the environment's
// namespace (a blue-green application web's slot web-blue and an
// application named web-blue, a route web's "api-public" and an
// application web-api's route "public") would overwrite each other, so the
// plan is refused, naming both and the object. Routes are refused on a
// Studio started without a Gateway (NoGatewayRefusal).
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
	if p.Opts.Gateway == "" {
		var routes []string
		for _, app := range slices.Sorted(maps.Keys(def.Applications)) {
			for _, rn := range sortedRoutes(def.Applications[app]) {
				routes = append(routes, fmt.Sprintf("route %s of %s", rn, app))
			}
		}
		if len(routes) > 0 {
			refused = append(refused, NoGatewayRefusal(routes))
		}
	}
	return refused
}

// NoGatewayRefusal is the plan's refusal of routes on a Studio started
// without --gateway: nothing would write their HTTPRoutes, so nothing
// would reach them, and no route is said to be issued.
func NoGatewayRefusal(routes []string) string {
	return fmt.Sprintf("On Kubernetes, routes attach to a Gateway, and this Studio was started without --gateway: no HTTPRoute would be written for %s, so nothing would reach it; start the Studio with --gateway NAMESPACE/NAME.",
		strings.Join(routes, ", "))
}
