package compiler

// Checks of the reference section "Ports and probes": ports, the port a
// route or probe names, and the startup, readiness and liveness probes.

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler/internal/check"
	"go.yaml.in/yaml/v3"
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
	if !ok && len(ports) > check.MaxSuggestCandidates {
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
		} else {
			msg += check.Suggestion(s, names, "declared ports")
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
