package recipe

// [lifecycle]: install and shutdown scripts, [lifecycle.run] for a process
// component (exec, security), its health check and [lifecycle.reload].
// A container's [lifecycle.run.container] is in container.go.

import (
	"net/url"
	"regexp"
	"strings"
)

// userRE is the user a process runs as: user, uid, user:group or uid:gid.
var userRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$`)

func (r *recipeChecker) lifecycle(v *value) {
	t, ok := r.table(v, "lifecycle", tableKeys["lifecycle"], "lifecycle")
	if !ok {
		return
	}
	if n := t.get("install"); n != nil {
		if it, ok := r.table(n, t.at("install"), tableKeys["lifecycle.install"], "lifecycle.install"); ok {
			if s := it.get("script"); s != nil {
				r.nonEmpty(s, it.at("script"))
			}
			if s := it.get("require_privilege"); s != nil {
				r.boolean(s, it.at("require_privilege"))
			}
		}
	}
	if n := t.get("run"); n != nil {
		r.run(n, t.at("run"))
	}
	if n := t.get("reload"); n != nil {
		r.reload(n, t.at("reload"))
	}
	if n := t.get("shutdown"); n != nil {
		if st, ok := r.table(n, t.at("shutdown"), tableKeys["lifecycle.shutdown"], "lifecycle.shutdown"); ok {
			if s := st.get("script"); s != nil {
				r.nonEmpty(s, st.at("script"))
			}
		}
	}
}

var (
	runTypes       = []string{"process", "container"}
	restartPolices = []string{"always", "on-failure", "never"}
)

func (r *recipeChecker) run(v *value, p string) {
	t, ok := r.table(v, p, tableKeys["lifecycle.run"], "lifecycle.run")
	if !ok {
		return
	}
	typ := "process"
	if n := t.get("type"); n != nil {
		if s, ok := r.enum(n, t.at("type"), runTypes); ok {
			typ = s
		} else {
			typ = ""
		}
	}
	r.sum.RunType = typ
	policy := "always"
	if n := t.get("restart_policy"); n != nil {
		policy, _ = r.enum(n, t.at("restart_policy"), restartPolices)
	}
	if n := t.get("max_retries"); n != nil {
		if _, ok := r.integer(n, t.at("max_retries"), 0, 1<<31-1); ok && policy == "never" {
			r.warnAt(n.keyPos, t.at("max_retries"), "`max_retries` has no effect with `restart_policy = \"never\"`")
		}
	}
	switch typ {
	case "process":
		if n := t.get("container"); n != nil {
			r.errorAt(n.keyPos, t.at("container"), "[lifecycle.run.container] is for container components; this component is a process (set `type = \"container\"` in [lifecycle.run])")
		}
		if n := t.get("exec"); n == nil {
			r.missing(t, "exec", "a process component needs [lifecycle.run.exec] with its command")
		} else {
			r.exec(n, t.at("exec"))
		}
		if n := t.get("security"); n != nil {
			r.security(n, t.at("security"))
		}
	case "container":
		for _, k := range []string{"exec", "security"} {
			if n := t.get(k); n != nil {
				r.errorAt(n.keyPos, t.at(k), "[lifecycle.run."+k+"] is for process components; this component is a container")
			}
		}
		if n := t.get("container"); n == nil {
			r.missing(t, "container", "a container component needs [lifecycle.run.container] with its image")
		} else {
			r.container(n, t.at("container"))
		}
	}
	if n := t.get("state"); n != nil {
		if st, ok := r.table(n, t.at("state"), tableKeys["lifecycle.run.state"], "lifecycle.run.state"); ok {
			if x := st.get("version"); x != nil {
				r.integer(x, st.at("version"), 0, 1<<31-1)
			}
		}
	}
	if n := t.get("health"); n != nil {
		r.health(n, t.at("health"))
	}
}

func (r *recipeChecker) exec(v *value, p string) {
	t, ok := r.table(v, p, tableKeys["lifecycle.run.exec"], "lifecycle.run.exec")
	if !ok {
		return
	}
	if n := t.get("command"); n == nil {
		r.missing(t, "command", "what to run; `./x` is relative to the working directory")
	} else if s, ok := r.nonEmpty(n, t.at("command")); ok {
		r.sum.Runs = s
	}
	if n := t.get("args"); n != nil {
		r.stringList(n, t.at("args"))
	}
	if n := t.get("working_dir"); n != nil {
		r.nonEmpty(n, t.at("working_dir"))
	}
	if n := t.get("env"); n != nil {
		r.stringTable(n, t.at("env"))
	}
}

func (r *recipeChecker) security(v *value, p string) {
	t, ok := r.table(v, p, tableKeys["lifecycle.run.security"], "lifecycle.run.security")
	if !ok {
		return
	}
	if n := t.get("user"); n != nil {
		if s, ok := r.nonEmpty(n, t.at("user")); ok && !userRE.MatchString(s) {
			r.errorAt(n.pos, t.at("user"), "user `"+s+"` must be \"user\", \"uid\", \"user:group\" or \"uid:gid\"")
		}
	}
	if n := t.get("no_new_privileges"); n != nil {
		r.boolean(n, t.at("no_new_privileges"))
	}
	if n := t.get("capabilities"); n != nil {
		r.stringList(n, t.at("capabilities"))
	}
}

func (r *recipeChecker) health(v *value, p string) {
	t, ok := r.table(v, p, tableKeys["lifecycle.run.health"], "lifecycle.run.health")
	if !ok {
		return
	}
	probe, exec := t.get("check"), t.get("exec")
	switch {
	case probe != nil && exec != nil:
		// Reference: exec is "Mutually exclusive with check".
		r.errorAt(exec.keyPos, t.at("exec"), "`exec` and `check` are mutually exclusive; keep one")
	case probe == nil && exec == nil:
		r.errorAt(t.v.keyPos, t.at("check"), "declare `check` (http://, https://, tcp:// or cmd:) or `exec` (an argv list)")
	}
	if probe != nil {
		if s, ok := r.nonEmpty(probe, t.at("check")); ok {
			switch {
			case strings.HasPrefix(s, "http://"), strings.HasPrefix(s, "https://"), strings.HasPrefix(s, "tcp://"):
				if u, err := url.Parse(s); err != nil || u.Host == "" {
					r.errorAt(probe.pos, t.at("check"), "`"+s+"` is not a URL with a host")
				}
			case strings.HasPrefix(s, "cmd:"):
				if strings.TrimSpace(strings.TrimPrefix(s, "cmd:")) == "" {
					r.errorAt(probe.pos, t.at("check"), "`cmd:` needs a command after it")
				}
			default:
				r.errorAt(probe.pos, t.at("check"), "check `"+s+"` must start with http://, https://, tcp:// or cmd:")
			}
		}
	}
	if exec != nil {
		if args, ok := r.stringList(exec, t.at("exec")); ok && len(args) == 0 {
			r.errorAt(exec.keyPos, t.at("exec"), "`exec` needs at least the program to run")
		}
	}
	for _, k := range []string{"interval", "timeout"} {
		if n := t.get(k); n != nil {
			r.duration(n, t.at(k))
		}
	}
	if n := t.get("failure_threshold"); n != nil {
		r.integer(n, t.at("failure_threshold"), 1, 1<<31-1)
	}
}

var signals = []string{"SIGHUP", "SIGUSR1", "SIGUSR2"}

func (r *recipeChecker) reload(v *value, p string) {
	t, ok := r.table(v, p, tableKeys["lifecycle.reload"], "lifecycle.reload")
	if !ok {
		return
	}
	sig, script := t.get("signal"), t.get("script")
	if sig != nil {
		if _, ok := r.enum(sig, t.at("signal"), signals); ok && r.runType == "container" {
			r.errorAt(sig.keyPos, t.at("signal"), "`signal` is for process components: a container has no PID to signal; reload it with `script`")
		}
	}
	if script != nil {
		r.nonEmpty(script, t.at("script"))
		if sig != nil {
			r.errorAt(script.keyPos, t.at("script"), "`script` runs instead of a signal; declare `signal` or `script`, not both")
		}
	}
	if n := t.get("grace"); n != nil {
		r.duration(n, t.at("grace"))
	}
}
