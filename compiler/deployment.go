package compiler

// Checks of the reference section "Deployment, shutdown, volumes": the
// release command, the rollout strategy and its timeouts, and volumes.

import (
	"path"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Effective defaults the compiler writes into the definition.
const (
	defaultReleaseTimeout = 10 * time.Minute
	defaultRolloutTimeout = 10 * time.Minute
	defaultGracePeriod    = 30 * time.Second
)

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
