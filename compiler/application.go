package compiler

import (
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

var applicationFields = []string{
	"image", "build", "platforms", "command", "environment", "ports", "routes",
	"health", "resources", "scaling", "placement", "deployment", "shutdown",
	"volumes", "commands", "dev",
}

var (
	buildFields     = []string{"context", "dockerfile", "target", "arguments"}
	portFields      = []string{"port", "protocol"}
	protocols       = []string{"http", "https", "tcp", "udp"}
	platformValues  = []string{"linux/amd64", "linux/arm64"}
	healthFields    = []string{"startup", "readiness", "liveness"}
	probeFields     = []string{"http", "interval", "timeout", "failureThreshold"}
	probeHTTPFields = []string{"port", "path"}
	resourceFields  = []string{"requests", "limits"}
	amountFields    = []string{"cpu", "memory", "temporaryStorage"}
	scalingFields   = []string{"replicas", "autoscaling"}
	replicaFields   = []string{"min", "max"}
	placementFields = []string{"spread"}
	spreadFields    = []string{"across", "minimum", "enforcement"}
	deployFields    = []string{"releaseCommand", "rollout"}
	releaseFields   = []string{"command", "timeout"}
	rolloutFields   = []string{"strategy", "maxUnavailable", "maxSurge", "timeout"}
	strategies      = []string{"blue-green", "rolling", "recreate"}
	shutdownFields  = []string{"gracePeriod"}
	volumeFields    = []string{"mountPath", "size"}
	devFields       = []string{"command", "ports"}
)

// Probe defaults from the reference, per probe kind.
var probeDefaults = map[string]struct {
	interval, timeout time.Duration
	threshold         int
}{
	"startup":   {2 * time.Second, 2 * time.Second, 30},
	"readiness": {10 * time.Second, 2 * time.Second, 3},
	"liveness":  {30 * time.Second, 2 * time.Second, 3},
}

// Effective defaults the compiler writes into the definition.
const (
	defaultReleaseTimeout = 10 * time.Minute
	defaultRolloutTimeout = 10 * time.Minute
	defaultGracePeriod    = 30 * time.Second
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
			if contains(app.Platforms, v) {
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

// build checks a source build.
func (c *checker) build(n *yaml.Node, p pathT) *Build {
	o, ok := c.object(n, p, buildFields)
	if !ok {
		return nil
	}
	b := &Build{Dockerfile: "Dockerfile"}
	if n := o.get("context"); n == nil {
		c.missing(o, "context", "the build context relative to the project root, such as `.`")
	} else if s, ok := c.nonEmptyStr(n, o.at("context")); ok {
		if clean, problem := projectPath(s); problem != "" {
			c.errorf(n, o.at("context"), "build context `"+s+"` "+problem)
		} else {
			b.Context = clean
		}
	}
	if n := o.get("dockerfile"); n != nil {
		if s, ok := c.nonEmptyStr(n, o.at("dockerfile")); ok {
			if isAbsolute(s) {
				c.errorf(n, o.at("dockerfile"), "dockerfile `"+s+"` must be relative to the build context, not absolute")
			} else if b.Context != "" {
				if _, problem := projectPath(path.Join(b.Context, s)); problem != "" {
					c.errorf(n, o.at("dockerfile"), "dockerfile `"+s+"` leaves the project root; it may step out of the context with .. but must stay inside the project")
				}
			}
			// Cleaned like the context, so ./Dockerfile and Dockerfile
			// compile alike.
			b.Dockerfile = path.Clean(strings.ReplaceAll(s, `\`, "/"))
		}
	}
	if n := o.get("target"); n != nil {
		if s, ok := c.nonEmptyStr(n, o.at("target")); ok {
			b.Target = s
		}
	}
	if n := o.get("arguments"); n != nil {
		ap := o.at("arguments")
		fs, _ := c.entries(n, ap)
		for _, f := range fs {
			kp := join(ap, f.key.Value)
			if f.key.Value == "" || strings.ContainsAny(f.key.Value, "= \t\r\n") {
				c.errorf(f.key, kp, "build argument name `"+f.key.Value+"` must be nonempty without `=` or whitespace")
				continue
			}
			// Never quote the value: people paste credentials here by mistake.
			v, ok := c.secretScalar(f.val, kp, "build argument")
			if !ok {
				continue
			}
			if b.Arguments == nil {
				b.Arguments = map[string]string{}
			}
			b.Arguments[f.key.Value] = v
		}
	}
	return b
}

func isAbsolute(s string) bool {
	return strings.HasPrefix(s, "/") || strings.HasPrefix(s, `\`) ||
		len(s) >= 2 && s[1] == ':' && (s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z')
}

// projectPath cleans a path relative to the project root, refusing absolute
// paths and paths that escape the root.
func projectPath(s string) (string, string) {
	if isAbsolute(s) {
		return "", "must be relative to the project root, not absolute"
	}
	if hasControl(s) {
		return "", "must not contain control characters"
	}
	clean := path.Clean(strings.ReplaceAll(s, `\`, "/"))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", "escapes the project root"
	}
	return clean, ""
}

// secretScalar reads a string, number or boolean and converts it to text,
// without ever quoting it in a message.
func (c *checker) secretScalar(n *yaml.Node, p pathT, what string) (string, bool) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float", "!!bool", "!!timestamp":
			// A plain date such as 2024-01-01 is a timestamp to YAML but
			// text to a build or an environment: keep it as written.
			return n.Value, true
		}
	}
	c.errorf(n, p, what+" values must be a string, number or boolean, got "+kindName(n))
	return "", false
}

// stringList returns the item nodes of a list, or nil after reporting a type
// error. A null value is an empty list.
func (c *checker) stringList(n *yaml.Node, p pathT) []*yaml.Node {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		c.errorf(n, p, "expected a list, got "+kindName(n))
		return nil
	}
	out := make([]*yaml.Node, 0, len(n.Content))
	for i, it := range n.Content {
		it = resolve(it)
		if it.Kind != yaml.ScalarNode || it.ShortTag() == "!!null" {
			c.errorf(it, index(p, i), "expected a string, got "+kindName(it))
			continue
		}
		out = append(out, it)
	}
	return out
}

// argv reads an argv array. Scalars of any type are taken as their text so
// `[sleep, 10]` means what it says. nonEmpty requires at least one element.
func (c *checker) argv(n *yaml.Node, p pathT, nonEmpty bool) []string {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode && !(n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null") {
		c.errorf(n, p, "expected an argv list such as [\"/app/web\", \"serve\"], got "+kindName(n)+"; commands run without a shell, use [sh, -c, \"...\"] when you need one")
		return nil
	}
	items := c.stringList(n, p)
	if nonEmpty && len(n.Content) == 0 {
		c.errorf(n, p, "must be a nonempty argv list")
		return nil
	}
	if len(items) == 0 {
		return nil
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
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
		if len(declared[ref.collection]) <= maxSuggestCandidates {
			names = sortedStringKeys(declared[ref.collection])
		}
		msg := "service output refers to a key not declared under " + ref.collection
		if len(names) > 0 {
			msg += "; declared " + ref.collection + " are " + quoteList(names)
		}
		c.errorf(n, p, msg)
		return false
	}
	if !contains(outputs, ref.output) {
		msg := "service output names an output " + ref.collection + " do not have; available outputs are " + quoteList(outputs)
		if s := closest(ref.output, outputs); s != "" {
			msg += " (did you mean `" + s + "`?)"
		}
		c.errorf(n, p, msg)
		return false
	}
	return true
}

// port checks one declared port.
func (c *checker) port(n *yaml.Node, p pathT) *Port {
	o, ok := c.object(n, p, portFields)
	if !ok {
		return nil
	}
	port := &Port{Protocol: "http"}
	valid := true
	if v := o.get("port"); v == nil {
		c.missing(o, "port", "the container port, 1 to 65535")
		valid = false
	} else if x, ok := c.intRange(v, o.at("port"), 1, 65535, "ports are 1 to 65535"); ok {
		port.Port = x
	} else {
		valid = false
	}
	if v := o.get("protocol"); v != nil {
		if s, ok := c.enum(v, o.at("protocol"), protocols); ok {
			port.Protocol = s
		}
	}
	if !valid {
		return nil
	}
	return port
}

// portRef resolves a route or probe port: a declared port name or a number
// 1-65535 (integer or numeric string). It returns the text and number.
func (c *checker) portRef(n *yaml.Node, p pathT, ports map[string]*Port) (string, int, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		c.errorf(n, p, "expected a port name or number, got "+kindName(n))
		return "", 0, false
	}
	s := n.Value
	tag := n.ShortTag()
	if tag == "!!int" || (tag == "!!str" && allDigits(s)) {
		base := 0 // YAML integers: 0x1F, 0o17
		if tag == "!!str" {
			base = 10 // a numeric string is decimal: "08080" is 8080
		}
		v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), base, 64)
		if err != nil || v < 1 || v > 65535 {
			c.errorf(n, p, "port `"+s+"` is out of range; ports are 1 to 65535")
			return "", 0, false
		}
		return strconv.FormatInt(v, 10), int(v), true
	}
	if tag != "!!str" {
		c.errorf(n, p, "expected a port name or number, got "+kindName(n))
		return "", 0, false
	}
	port, ok := ports[s]
	if !ok && len(ports) > maxSuggestCandidates {
		c.errorf(n, p, "port `"+s+"` is not declared in this application's ports")
		return "", 0, false
	}
	if !ok {
		names := make([]string, 0, len(ports))
		for k := range ports {
			names = append(names, k)
		}
		sort.Strings(names)
		msg := "port `" + s + "` is not declared in this application's ports"
		if len(names) == 0 {
			msg += "; declare it under ports or use a number"
		} else if sug := closest(s, names); sug != "" {
			msg += "; did you mean `" + sug + "`?"
		} else {
			msg += "; declared ports are " + quoteList(names)
		}
		c.errorf(n, p, msg)
		return "", 0, false
	}
	if port == nil {
		return s, 0, true
	}
	if port.Protocol == "udp" {
		// "A udp port is exposed over UDP": routes and probes speak HTTP,
		// which runs over TCP.
		c.errorf(n, p, "port `"+s+"` uses protocol udp; routes and health probes speak HTTP over TCP, so they need a port with protocol http, https or tcp")
		return "", 0, false
	}
	return s, port.Port, true
}

// health checks the probes.
func (c *checker) health(n *yaml.Node, p pathT, ports map[string]*Port) Health {
	var h Health
	o, ok := c.object(n, p, healthFields)
	if !ok {
		return h
	}
	for _, kind := range healthFields {
		v := o.get(kind)
		if v == nil {
			continue
		}
		probe := c.probe(v, o.at(kind), kind, ports)
		switch kind {
		case "startup":
			h.Startup = probe
		case "readiness":
			h.Readiness = probe
		case "liveness":
			h.Liveness = probe
		}
	}
	return h
}

func (c *checker) probe(n *yaml.Node, p pathT, kind string, ports map[string]*Port) *Probe {
	o, ok := c.object(n, p, probeFields)
	if !ok {
		return nil
	}
	d := probeDefaults[kind]
	pr := &Probe{Interval: d.interval, Timeout: d.timeout, FailureThreshold: d.threshold}
	if h := o.get("http"); h == nil {
		c.missing(o, "http", "probes are HTTP checks with a port and a path")
	} else if ho, ok := c.object(h, o.at("http"), probeHTTPFields); ok {
		if v := ho.get("port"); v == nil {
			c.missing(ho, "port", "a named application port or a number")
		} else if s, num, ok := c.portRef(v, ho.at("port"), ports); ok {
			pr.Port, pr.TargetPort = s, num
		}
		if v := ho.get("path"); v == nil {
			c.missing(ho, "path", "the HTTP path to check, starting with /")
		} else if s, ok := c.str(v, ho.at("path")); ok {
			switch {
			case !strings.HasPrefix(s, "/"):
				c.errorf(v, ho.at("path"), "probe path `"+s+"` must start with /")
			case hasControl(s):
				c.errorf(v, ho.at("path"), "probe path must not contain control characters")
			default:
				pr.Path = s
			}
		}
	}
	if v := o.get("interval"); v != nil {
		if x, ok := c.duration(v, o.at("interval"), true); ok {
			pr.Interval = x
		}
	}
	if v := o.get("timeout"); v != nil {
		if x, ok := c.duration(v, o.at("timeout"), true); ok {
			pr.Timeout = x
		}
	}
	if v := o.get("failureThreshold"); v != nil {
		if x, ok := c.intRange(v, o.at("failureThreshold"), 1, 1<<31-1, "failureThreshold must be a positive integer"); ok {
			pr.FailureThreshold = x
		}
	}
	return pr
}

// resources checks requests and limits, and that no request exceeds its limit.
func (c *checker) resources(n *yaml.Node, p pathT) Resources {
	var r Resources
	o, ok := c.object(n, p, resourceFields)
	if !ok {
		return r
	}
	var reqNodes [3]*yaml.Node
	var reqObj object
	if v := o.get("requests"); v != nil {
		reqObj, _ = c.object(v, o.at("requests"), amountFields)
		r.Requests, reqNodes = c.amounts(reqObj)
	}
	if v := o.get("limits"); v != nil {
		lo, _ := c.object(v, o.at("limits"), amountFields)
		r.Limits, _ = c.amounts(lo)
	}
	rq, lm := r.Requests, r.Limits
	if rq.CPU > 0 && lm.CPU > 0 && rq.CPU > lm.CPU {
		c.errorf(reqNodes[0], reqObj.at("cpu"), "CPU request "+rq.CPU.String()+" exceeds the CPU limit "+lm.CPU.String())
	}
	if rq.Memory > 0 && lm.Memory > 0 && rq.Memory > lm.Memory {
		c.errorf(reqNodes[1], reqObj.at("memory"), "memory request "+rq.Memory.String()+" exceeds the memory limit "+lm.Memory.String())
	}
	if rq.TemporaryStorage > 0 && lm.TemporaryStorage > 0 && rq.TemporaryStorage > lm.TemporaryStorage {
		c.errorf(reqNodes[2], reqObj.at("temporaryStorage"), "temporaryStorage request "+rq.TemporaryStorage.String()+" exceeds the temporaryStorage limit "+lm.TemporaryStorage.String())
	}
	return r
}

func (c *checker) amounts(o object) (ResourceAmounts, [3]*yaml.Node) {
	var a ResourceAmounts
	var nodes [3]*yaml.Node
	if v := o.get("cpu"); v != nil {
		nodes[0] = v
		a.CPU, _ = c.cpu(v, o.at("cpu"))
	}
	if v := o.get("memory"); v != nil {
		nodes[1] = v
		a.Memory, _ = c.byteSize(v, o.at("memory"))
	}
	if v := o.get("temporaryStorage"); v != nil {
		nodes[2] = v
		a.TemporaryStorage, _ = c.byteSize(v, o.at("temporaryStorage"))
	}
	return a, nodes
}

// scaling checks the replica range and the autoscaling policy, which are
// declared together or not at all.
func (c *checker) scaling(n *yaml.Node, p pathT, s *Scaling) (object, *yaml.Node) {
	o, ok := c.object(n, p, scalingFields)
	if !ok {
		return o, nil
	}
	var maxNode *yaml.Node
	minOK, maxOK := true, true
	maxSet := false
	replicas := o
	if v := o.get("replicas"); v != nil {
		ro, ok := c.object(v, o.at("replicas"), replicaFields)
		if ok {
			replicas = ro
			if m := ro.get("min"); m != nil {
				if x, ok := c.intRange(m, ro.at("min"), 1, 1<<31-1, "use at least 1 replica"); ok {
					s.Min = x
				} else {
					minOK = false
				}
			}
			if m := ro.get("max"); m != nil {
				maxNode = m
				if x, ok := c.intRange(m, ro.at("max"), 1, 1<<31-1, "use at least 1 replica"); ok {
					s.Max, maxSet = x, true
				} else {
					maxOK = false
				}
			}
		}
	}
	if !maxSet {
		s.Max = s.Min
	} else if minOK && s.Max < s.Min {
		c.errorf(maxNode, replicas.at("max"), "max "+strconv.Itoa(s.Max)+" is below min "+strconv.Itoa(s.Min)+"; max must be at least min")
		maxOK = false
	}

	target, targetPath := 0, pathT{}
	var targetNode *yaml.Node
	deepest := o
	if v := o.get("autoscaling"); v != nil {
		if ao, ok := c.object(v, o.at("autoscaling"), []string{"cpu"}); ok {
			deepest = ao
			if cv := ao.get("cpu"); cv != nil {
				if co, ok := c.object(cv, ao.at("cpu"), []string{"targetUtilization"}); ok {
					deepest = co
					if t := co.get("targetUtilization"); t != nil {
						targetNode, targetPath = t, co.at("targetUtilization")
						if x, ok := c.intRange(t, targetPath, 1, 100, "targetUtilization is a percentage from 1 to 100"); ok {
							target = x
						} else {
							target = -1
						}
					}
				}
			}
		}
	}
	if !minOK || !maxOK {
		return o, maxNode
	}
	switch {
	case s.Max > s.Min && targetNode == nil:
		// A missing required key is reported at the line of its parent:
		// the deepest of scaling, autoscaling and cpu that is written.
		c.errorf(c.parentKey(deepest), join(p, "autoscaling.cpu.targetUtilization"),
			"max "+strconv.Itoa(s.Max)+" above min "+strconv.Itoa(s.Min)+" requires CPU autoscaling; declare scaling.autoscaling.cpu.targetUtilization, or set max equal to min for a fixed count")
	case s.Max == s.Min && targetNode != nil:
		c.errorf(targetNode, targetPath, "autoscaling needs a replica range; set replicas.max above replicas.min ("+strconv.Itoa(s.Min)+") or remove autoscaling for a fixed count")
	case target > 0:
		s.TargetCPUUtilization = target
	}
	return o, maxNode
}

// placement checks the spread policy.
func (c *checker) placement(n *yaml.Node, p pathT, pl *Placement) {
	o, ok := c.object(n, p, placementFields)
	if !ok {
		return
	}
	v := o.get("spread")
	if v == nil {
		return
	}
	so, ok := c.object(v, o.at("spread"), spreadFields)
	if !ok {
		return
	}
	if v := so.get("across"); v != nil {
		if s, ok := c.enum(v, so.at("across"), []string{"nodes", "zones"}); ok {
			pl.Across = s
		}
	}
	if v := so.get("minimum"); v != nil {
		if x, ok := c.intRange(v, so.at("minimum"), 0, 1<<31-1, "minimum is a nonnegative integer"); ok {
			pl.Minimum = x
		}
	}
	if v := so.get("enforcement"); v != nil {
		if s, ok := c.enum(v, so.at("enforcement"), []string{"preferred", "required"}); ok {
			pl.Enforcement = s
		}
	}
}

// deployment checks the release hook and the rollout policy. With volumes
// the strategy must be recreate (and defaults to it).
func (c *checker) deployment(n *yaml.Node, p pathT, hasVolumes bool) Deployment {
	d := Deployment{Rollout: Rollout{Strategy: "blue-green", Timeout: defaultRolloutTimeout}}
	if hasVolumes {
		d.Rollout.Strategy = "recreate"
	}
	if n == nil {
		return d
	}
	o, ok := c.object(n, p, deployFields)
	if !ok {
		return d
	}
	if v := o.get("releaseCommand"); v != nil {
		if ro, ok := c.object(v, o.at("releaseCommand"), releaseFields); ok {
			rc := &ReleaseCommand{Timeout: defaultReleaseTimeout}
			if cv := ro.get("command"); cv != nil {
				rc.Command = c.argv(cv, ro.at("command"), false)
			}
			if tv := ro.get("timeout"); tv != nil {
				if x, ok := c.duration(tv, ro.at("timeout"), true); ok {
					rc.Timeout = x
				}
			}
			if len(rc.Command) > 0 {
				d.ReleaseCommand = rc
			}
		}
	}
	v := o.get("rollout")
	if v == nil {
		return d
	}
	ro, ok := c.object(v, o.at("rollout"), rolloutFields)
	if !ok {
		return d
	}
	if sv := ro.get("strategy"); sv != nil {
		if s, ok := c.enum(sv, ro.at("strategy"), strategies); ok {
			if hasVolumes && s != "recreate" {
				c.errorf(sv, ro.at("strategy"), "an application with volumes must use the recreate strategy; `"+s+"` is rejected there")
				// The strategy is the one mistake: fields that fit the
				// written strategy are not reported again.
				d.Rollout.Strategy = ""
			} else {
				d.Rollout.Strategy = s
			}
		} else {
			d.Rollout.Strategy = ""
		}
	}
	mu, ms := ro.get("maxUnavailable"), ro.get("maxSurge")
	if d.Rollout.Strategy == "rolling" {
		u, s := 0, 1
		okU, okS := true, true
		if mu != nil {
			u, okU = c.intRange(mu, ro.at("maxUnavailable"), 0, 1<<31-1, "maxUnavailable is a nonnegative integer")
		}
		if ms != nil {
			s, okS = c.intRange(ms, ro.at("maxSurge"), 0, 1<<31-1, "maxSurge is a nonnegative integer")
		}
		if okU && okS && u == 0 && s == 0 {
			// The reference states this rule in maxUnavailable's entry
			// ("Cannot be zero together with maxSurge"), so it is reported
			// there; only when maxUnavailable is left at its default does
			// the written maxSurge: 0 carry it.
			at, atPath := mu, ro.at("maxUnavailable")
			if at == nil {
				at, atPath = ms, ro.at("maxSurge")
			}
			c.errorf(at, atPath, "maxUnavailable and maxSurge cannot both be zero; a rolling update must be allowed to replace replicas")
		}
		d.Rollout.MaxUnavailable, d.Rollout.MaxSurge = &u, &s
	} else if d.Rollout.Strategy != "" {
		for _, k := range []string{"maxUnavailable", "maxSurge"} {
			if kv := ro.get(k); kv != nil {
				c.errorf(kv, ro.at(k), "`"+k+"` is valid only with `strategy: rolling`; the strategy here is "+d.Rollout.Strategy)
			}
		}
	}
	if tv := ro.get("timeout"); tv != nil {
		if x, ok := c.duration(tv, ro.at("timeout"), true); ok {
			d.Rollout.Timeout = x
		}
	}
	return d
}

// volumes checks persistent volumes.
func (c *checker) volumes(n *yaml.Node, p pathT) map[string]*Volume {
	fs, _ := c.entries(n, p)
	var out map[string]*Volume
	mounts := map[string]bool{}
	for _, f := range c.keyedEntries(fs, p, "volume name") {
		vp := join(p, f.key.Value)
		o, ok := c.object(f.val, vp, volumeFields)
		if !ok {
			continue
		}
		vol := &Volume{}
		valid := true
		if v := o.get("mountPath"); v == nil {
			c.missing(o, "mountPath", "an absolute container path")
			valid = false
		} else if s, ok := c.str(v, o.at("mountPath")); ok {
			switch {
			case !strings.HasPrefix(s, "/"):
				c.errorf(v, o.at("mountPath"), "mountPath `"+s+"` must be an absolute container path")
				valid = false
			case hasControl(s):
				c.errorf(v, o.at("mountPath"), "mountPath must not contain control characters")
				valid = false
			case mounts[path.Clean(s)]:
				c.errorf(v, o.at("mountPath"), "mountPath `"+s+"` is already used by another volume of this application")
				valid = false
			default:
				mounts[path.Clean(s)] = true
				vol.MountPath = s
			}
		} else {
			valid = false
		}
		if v := o.get("size"); v == nil {
			c.missing(o, "size", "a positive byte quantity such as 5GB")
			valid = false
		} else if x, ok := c.byteSize(v, o.at("size")); ok {
			vol.Size = x
		} else {
			valid = false
		}
		if valid {
			if out == nil {
				out = map[string]*Volume{}
			}
			out[f.key.Value] = vol
		}
	}
	return out
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
