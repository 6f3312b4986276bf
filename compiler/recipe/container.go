package recipe

// [lifecycle.run.container]: the image a container component runs, its
// mounts, ports and resource limits.

import (
	"net"
	"regexp"
	"slices"
	"strconv"

	"github.com/skali-dev/studio/compiler/internal/check"
)

// uidGidRE is the user inside a container, uid or uid:gid.
var uidGidRE = regexp.MustCompile(`^[0-9]+(:[0-9]+)?$`)

var (
	containerRuntimes = []string{"auto", "containerd", "cli", "nerdctl", "docker", "podman"}
	pullPolicies      = []string{"always", "never", "if-not-present"}
	mountTypes        = []string{"bind", "volume", "tmpfs"}
	protocols         = []string{"tcp", "udp"}
	containerKeys     = []string{"image", "runtime", "pull_policy", "network_mode", "network_aliases", "user", "privileged", "hostname", "env", "labels", "mounts", "ports", "resources"}
)

func (r *recipeChecker) container(v *value, p string) {
	t, ok := r.table(v, p, tableKeys["lifecycle.run.container"], "lifecycle.run.container")
	if !ok {
		return
	}
	if n := t.get("image"); n == nil {
		r.missing(t, "image", "the image to run")
	} else if s, ok := r.nonEmpty(n, t.at("image")); ok {
		r.sum.Runs = s
	}
	runtime := "auto"
	if n := t.get("runtime"); n != nil {
		runtime, _ = r.enum(n, t.at("runtime"), containerRuntimes)
	}
	if n := t.get("pull_policy"); n != nil {
		r.enum(n, t.at("pull_policy"), pullPolicies)
	}
	if n := t.get("network_mode"); n != nil {
		// "or the name of a user-defined network (CLI runtimes only)"
		if s, ok := r.nonEmpty(n, t.at("network_mode")); ok && !slices.Contains([]string{"host", "bridge", "none"}, s) && runtime == "containerd" {
			r.errorAt(n.pos, t.at("network_mode"), "a user-defined network (`"+s+"`) works with the CLI runtimes only; under `runtime = \"containerd\"` use `host`, `bridge` or `none`")
		}
	}
	if n := t.get("network_aliases"); n != nil {
		if _, ok := r.stringList(n, t.at("network_aliases")); ok && runtime == "containerd" {
			r.errorAt(n.keyPos, t.at("network_aliases"), "`network_aliases` is refused on `runtime = \"containerd\"`")
		}
	}
	if n := t.get("user"); n != nil {
		if s, ok := r.nonEmpty(n, t.at("user")); ok && !uidGidRE.MatchString(s) {
			r.errorAt(n.pos, t.at("user"), "user `"+s+"` must be `uid:gid` inside the container, such as \"1000:1000\"")
		}
	}
	if n := t.get("privileged"); n != nil {
		r.boolean(n, t.at("privileged"))
	}
	if n := t.get("hostname"); n != nil {
		r.nonEmpty(n, t.at("hostname"))
	}
	for _, k := range []string{"env", "labels"} {
		if n := t.get(k); n != nil {
			r.stringTable(n, t.at(k))
		}
	}
	if n := t.get("mounts"); n != nil {
		for i, m := range r.tables(n, t.at("mounts"), "lifecycle.run.container.mounts") {
			r.mount(m, check.Index(t.at("mounts"), i))
		}
	}
	if n := t.get("ports"); n != nil {
		for i, m := range r.tables(n, t.at("ports"), "lifecycle.run.container.ports") {
			r.port(m, check.Index(t.at("ports"), i))
		}
	}
	if n := t.get("resources"); n != nil {
		r.containerResources(n, t.at("resources"))
	}
}

func (r *recipeChecker) mount(v *value, p string) {
	t, _ := r.table(v, p, tableKeys["lifecycle.run.container.mounts"], "lifecycle.run.container.mounts")
	typ := ""
	if n := t.get("type"); n != nil {
		typ, _ = r.enum(n, t.at("type"), mountTypes)
	}
	if n := t.get("target"); n == nil {
		r.missing(t, "target", "where the mount appears in the container")
	} else {
		r.nonEmpty(n, t.at("target"))
	}
	if n := t.get("source"); n == nil {
		if typ != "tmpfs" {
			r.missing(t, "source", "the host path or volume to mount")
		}
	} else {
		r.nonEmpty(n, t.at("source"))
	}
	if n := t.get("read_only"); n != nil {
		r.boolean(n, t.at("read_only"))
	}
}

func (r *recipeChecker) port(v *value, p string) {
	t, _ := r.table(v, p, tableKeys["lifecycle.run.container.ports"], "lifecycle.run.container.ports")
	if n := t.get("container_port"); n == nil {
		r.missing(t, "container_port", "the port inside the container")
	} else {
		r.integer(n, t.at("container_port"), 1, 65535)
	}
	if n := t.get("host_port"); n != nil {
		r.integer(n, t.at("host_port"), 0, 65535)
	}
	if n := t.get("host_ip"); n != nil {
		if s, ok := r.nonEmpty(n, t.at("host_ip")); ok && net.ParseIP(s) == nil {
			r.errorAt(n.pos, t.at("host_ip"), "`"+s+"` is not an IP address")
		}
	}
	if n := t.get("protocol"); n != nil {
		r.enum(n, t.at("protocol"), protocols)
	}
}

// containerResources: "memory_swap is MB of memory plus swap (-1
// unlimited) and needs memory_mb; cpu_period defaults to 100000 µs and
// needs cpu_quota. A recipe breaking either rule is refused."
func (r *recipeChecker) containerResources(v *value, p string) {
	t, ok := r.table(v, p, tableKeys["lifecycle.run.container.resources"], "lifecycle.run.container.resources")
	if !ok {
		return
	}
	const maxInt = 1<<63 - 1
	var memory int64
	memoryOK := false
	if n := t.get("memory_mb"); n != nil {
		memory, memoryOK = r.integer(n, t.at("memory_mb"), 1, maxInt)
	}
	if n := t.get("memory_swap"); n != nil {
		if t.get("memory_mb") == nil {
			r.errorAt(n.keyPos, t.at("memory_swap"), "`memory_swap` needs `memory_mb`: it is MB of memory plus swap")
		} else if x, ok := r.integer(n, t.at("memory_swap"), -1, maxInt); ok && x != -1 && memoryOK && x < memory {
			r.errorAt(n.pos, t.at("memory_swap"), "`memory_swap` is memory plus swap, so it cannot be less than `memory_mb` ("+strconv.FormatInt(memory, 10)+"); use -1 for unlimited swap")
		}
	}
	if n := t.get("cpu_quota"); n != nil {
		r.integer(n, t.at("cpu_quota"), 1, maxInt)
	}
	if n := t.get("cpu_period"); n != nil {
		if t.get("cpu_quota") == nil {
			r.errorAt(n.keyPos, t.at("cpu_period"), "`cpu_period` needs `cpu_quota`: the period is what the quota is measured against")
		} else {
			r.integer(n, t.at("cpu_period"), 1, maxInt)
		}
	}
	for _, k := range []string{"cpu_shares", "pids_limit"} {
		if n := t.get(k); n != nil {
			r.integer(n, t.at(k), 1, maxInt)
		}
	}
}
