package compiler

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/skali-dev/studio/compiler/internal/check"
	"go.yaml.in/yaml/v3"
)

// The keys and allowed values come from the reference table (reference.go).
var applicationFields = fieldNames("applications.*")

var (
	buildFields     = fieldNames("applications.*.build")
	portFields      = fieldNames("applications.*.ports.*")
	protocols       = fieldValues("applications.*.ports.*.protocol")
	platformValues  = fieldValues("applications.*.platforms")
	healthFields    = fieldNames("applications.*.health")
	probeFields     = fieldNames("applications.*.health.startup")
	probeHTTPFields = fieldNames("applications.*.health.startup.http")
	resourceFields  = fieldNames("applications.*.resources")
	amountFields    = fieldNames("applications.*.resources.requests")
	scalingFields   = fieldNames("applications.*.scaling")
	replicaFields   = fieldNames("applications.*.scaling.replicas")
	placementFields = fieldNames("applications.*.placement")
	spreadFields    = fieldNames("applications.*.placement.spread")
	deployFields    = fieldNames("applications.*.deployment")
	releaseFields   = fieldNames("applications.*.deployment.releaseCommand")
	rolloutFields   = fieldNames("applications.*.deployment.rollout")
	strategies      = fieldValues("applications.*.deployment.rollout.strategy")
	shutdownFields  = fieldNames("applications.*.shutdown")
	volumeFields    = fieldNames("applications.*.volumes.*")
	devFields       = fieldNames("applications.*.dev")
)

// application checks one application and returns its definition.
func (c *checker) application(n *yaml.Node, p pathT, declared map[string]map[string]bool, hosts *hostClaims) *Application {
	o, ok := c.object(n, p, applicationFields)
	if !ok {
		return nil
	}
	app := &Application{}

	// Source: exactly one of a nonempty image or a build.
	imgNode, buildNode := o.get("image"), o.get("build")
	switch {
	case imgNode == nil && buildNode == nil:
		c.errorf(c.parentKey(o), o.at("image"), "an application needs exactly one of `image` or `build`; neither is declared")
	case imgNode != nil && buildNode != nil:
		c.errorf(buildNode, o.at("build"), "`image` and `build` are mutually exclusive; declare only one")
	}
	if imgNode != nil {
		if s, ok := c.nonEmptyStr(imgNode, o.at("image")); ok {
			switch {
			case strings.ContainsAny(s, " \t\r\n") || hasControl(s):
				c.errorf(imgNode, o.at("image"), "image reference must not contain whitespace or control characters")
			case strings.Contains(s, "${"):
				// The image is literal: an expression passes through
				// verbatim and declares no value, which is rarely meant.
				c.warnf(imgNode, o.at("image"), "image is literal, with no interpolation: "+quote(literalImageExpression(s))+" is not replaced by a value and reaches the registry as written; write the reference out in full")
			default:
				if p := imageProblem(s); p != "" {
					c.errorf(imgNode, o.at("image"), p)
				}
			}
			app.Image = s
		}
	}
	if buildNode != nil {
		app.Build = c.build(buildNode, o.at("build"))
	}

	if n := o.get("platforms"); n != nil {
		items := c.stringList(n, o.at("platforms"))
		for i, it := range items {
			ip := index(o.at("platforms"), indexOf(resolve(n), it, i))
			v, ok := c.enum(it, ip, platformValues)
			if !ok {
				continue
			}
			if slices.Contains(app.Platforms, v) {
				c.errorf(it, ip, "platform `"+v+"` is listed twice")
				continue
			}
			app.Platforms = append(app.Platforms, v)
		}
		sort.Strings(app.Platforms)
	}
	if n := o.get("command"); n != nil {
		app.Command = c.argv(n, o.at("command"), false)
	}
	if n := o.get("environment"); n != nil {
		app.Environment = c.environment(n, o.at("environment"), declared)
	}

	ports := map[string]*Port{}
	if n := o.get("ports"); n != nil {
		pp := o.at("ports")
		fs, _ := c.entries(n, pp)
		for _, f := range c.keyedEntries(fs, pp, "port name") {
			if port := c.port(f.val, join(pp, f.key.Value)); port != nil {
				ports[f.key.Value] = port
			}
		}
		// Names that failed checks are still declared, so references to
		// them are not reported twice.
		for _, f := range fs {
			if _, ok := ports[f.key.Value]; !ok {
				ports[f.key.Value] = nil
			}
		}
	}
	for k, v := range ports {
		if v != nil {
			if app.Ports == nil {
				app.Ports = map[string]*Port{}
			}
			app.Ports[k] = v
		}
	}
	if n := o.get("routes"); n != nil {
		app.Routes = c.routes(n, o.at("routes"), ports, hosts)
	}
	if n := o.get("health"); n != nil {
		app.Health = c.health(n, o.at("health"), ports)
	}
	if n := o.get("resources"); n != nil {
		app.Resources = c.resources(n, o.at("resources"))
	}

	app.Scaling = Scaling{Min: 1, Max: 1}
	var scalingObj object
	var maxNode *yaml.Node
	if n := o.get("scaling"); n != nil {
		scalingObj, maxNode = c.scaling(n, o.at("scaling"), &app.Scaling)
	}
	if app.Scaling.TargetCPUUtilization > 0 && app.Resources.Requests.CPU == 0 {
		c.warnf(scalingObj.node, o.at("resources.requests.cpu"), "CPU autoscaling measures utilization relative to the CPU request; declare resources.requests.cpu")
	}

	app.Placement = Placement{Across: "nodes", Enforcement: "preferred"}
	if n := o.get("placement"); n != nil {
		c.placement(n, o.at("placement"), &app.Placement)
	}

	volumesNode := o.get("volumes")
	if volumesNode != nil {
		app.Volumes = c.volumes(volumesNode, o.at("volumes"))
	}
	hasVolumes := len(app.Volumes) > 0
	if !hasVolumes && volumesNode != nil {
		if fs, _ := c.entries(volumesNode, rootPath); len(fs) > 0 {
			hasVolumes = true // declared but invalid: still apply the volume rules
		}
	}
	app.Deployment = c.deployment(o.get("deployment"), o.at("deployment"), hasVolumes)
	if hasVolumes {
		if app.Scaling.Min > 1 || app.Scaling.Max > 1 {
			at, atPath := maxNode, o.at("scaling.replicas.max")
			if app.Scaling.Min > 1 || at == nil {
				at, atPath = scalingObj.node, o.at("scaling.replicas.min")
				if r, ok := c.quietObject(scalingObj.get("replicas")); ok {
					if m := r.get("min"); m != nil && app.Scaling.Min > 1 {
						at = m
					}
				}
			}
			c.errorf(at, atPath, "an application with volumes runs exactly one replica; remove the volumes or set the replica count to 1")
		}
	}

	app.Shutdown = Shutdown{GracePeriod: defaultGracePeriod}
	if n := o.get("shutdown"); n != nil {
		if so, ok := c.object(n, o.at("shutdown"), shutdownFields); ok {
			if g := so.get("gracePeriod"); g != nil {
				if d, ok := c.duration(g, so.at("gracePeriod"), false); ok {
					app.Shutdown.GracePeriod = d
				}
			}
		}
	}

	// Client-only blocks: validated, never compiled.
	if n := o.get("commands"); n != nil {
		cp := o.at("commands")
		fs, _ := c.entries(n, cp)
		for _, f := range c.keyedEntries(fs, cp, "command name") {
			c.argv(f.val, join(cp, f.key.Value), true)
		}
	}
	if n := o.get("dev"); n != nil {
		c.dev(n, o.at("dev"), ports)
	}
	return app
}

// quietObject returns n as an object without reporting anything; the
// caller has already checked it.
func (c *checker) quietObject(n *yaml.Node) (object, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return object{}, false
	}
	o := object{node: n}
	for i := 0; i+1 < len(n.Content); i += 2 {
		o.fields = append(o.fields, field{key: resolve(n.Content[i]), val: n.Content[i+1]})
	}
	return o, true
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// environment checks environment variables and their expressions.
func (c *checker) environment(n *yaml.Node, p pathT, declared map[string]map[string]bool) map[string]string {
	fs, _ := c.entries(n, p)
	if len(fs) == 0 {
		return nil
	}
	env := make(map[string]string, len(fs))
	for _, f := range fs {
		name := f.key.Value
		kp := join(p, name)
		if !isEnvName(name) {
			c.errorf(f.key, kp, "environment variable name `"+name+"` must match ^[A-Za-z_][A-Za-z0-9_]*$")
			continue
		}
		v := resolve(f.val)
		s, ok := c.secretScalar(v, kp, "environment")
		if !ok {
			continue
		}
		if v.ShortTag() != "!!str" {
			env[name] = s
			continue
		}
		// Only an opening `{{` starts a service output: a lone `}}`, as in
		// a JSON value such as {"a":{"b":1}}, is ordinary text.
		if strings.Contains(s, "{{") {
			ref, whole := parseServiceRef(s)
			if !whole {
				c.errorf(v, kp, "a service output ({{...}}) must be the entire value; it cannot be combined with other text")
				continue
			}
			if !c.serviceRef(v, kp, ref, declared) {
				continue
			}
			env[name] = "{{" + ref.collection + "." + ref.key + "." + ref.output + "}}"
			continue
		}
		refs, problem := scanValueRefs(s, nil)
		if problem != "" {
			c.errorf(v, kp, "value "+problem)
			continue
		}
		c.recordRefs(v, kp, refs)
		env[name] = s
	}
	return env
}

// serviceRef checks a {{collection.key.output}} reference.
func (c *checker) serviceRef(n *yaml.Node, p pathT, ref serviceRef, declared map[string]map[string]bool) bool {
	outputs, ok := serviceOutputs[ref.collection]
	if !ok || ref.key == "" {
		c.errorf(n, p, "a service output must read {{databases.<key>.<output>}} or {{buckets.<key>.<output>}}")
		return false
	}
	if !declared[ref.collection][ref.key] {
		// The key is part of the value, which is never quoted; list what exists instead.
		var names []string
		if len(declared[ref.collection]) <= check.MaxSuggestCandidates {
			names = slices.Sorted(maps.Keys(declared[ref.collection]))
		}
		msg := "service output refers to a key not declared under " + ref.collection
		if len(names) > 0 {
			msg += "; declared " + ref.collection + " are " + check.QuoteList(names)
		}
		c.errorf(n, p, msg)
		return false
	}
	if !slices.Contains(outputs, ref.output) {
		msg := "service output names an output " + ref.collection + " do not have; available outputs are " + check.QuoteList(outputs)
		if s := check.Closest(ref.output, outputs); s != "" {
			msg += " (did you mean `" + s + "`?)"
		}
		c.errorf(n, p, msg)
		return false
	}
	return true
}

// dev checks the client-only dev block.
func (c *checker) dev(n *yaml.Node, p pathT, ports map[string]*Port) {
	o, ok := c.object(n, p, devFields)
	if !ok {
		return
	}
	if v := o.get("command"); v == nil {
		c.missing(o, "command", "the host dev server argv, such as [bun, run, dev]")
	} else {
		c.argv(v, o.at("command"), true)
	}
	if v := o.get("ports"); v != nil {
		pp := o.at("ports")
		fs, _ := c.entries(v, pp)
		for _, f := range fs {
			kp := join(pp, f.key.Value)
			if _, ok := ports[f.key.Value]; !ok {
				c.errorf(f.key, kp, "dev port `"+f.key.Value+"` is not a declared port of this application")
				continue
			}
			c.intRange(f.val, kp, 1, 65535, "host ports are 1 to 65535")
		}
	}
}
