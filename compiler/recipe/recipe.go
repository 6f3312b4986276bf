// Package recipe validates the TOML recipes and plans of the edge device
// agent (reference: ../shared/seeds/004_0e71162b5fd9637b.txt) the way its
// dry run does: every table of the schema with its types, defaults and
// enums, and every key the agent does not recognise refused. TOML is read
// with go-toml's unstable parser, which keeps the position of every key and
// value, and the rules TOML itself has and that parser leaves to its
// caller (a key or a table defined twice, a table extended after it was
// closed) are checked here, so each problem carries a line, a column and a
// path such as artifacts[0].delta.server.
//
// Choices where the reference is ambiguous:
//   - "sha256 ... Mandatory unless --insecure-skip-verify": the flag belongs
//     to the agent's command line, not to the recipe, so it is recorded
//     with Options.InsecureSkipVerify; with it a missing sha256 is a
//     warning, without it an error.
//   - A recipe name and a dataset name share an allow-list the reference
//     names but does not spell out: letters, digits, '.', '_' and '-',
//     starting and ending with a letter or digit (reverse-DNS names pass).
//   - [lifecycle.run] of a process component needs [lifecycle.run.exec]
//     (its command is required), a container component needs
//     [lifecycle.run.container]; the tables of the other type are refused.
//   - [lifecycle.reload] with both signal and script is refused: script
//     runs "instead of a signal", so declaring both says two things.
//   - An unrecognised [artifacts.delta] format is "not an error": it is a
//     warning, since the agent falls back to the whole download.
//   - [lifecycle.run.health] needs check or exec: a health table that
//     checks nothing is a mistake.
//   - A plan's recipe is "a path to a TOML file, or "name:version" from the
//     store": a path is recognised by its .toml extension, a store
//     reference by a recipe name, a colon and a semantic version.
//   - Dataset names are unique in a recipe (each becomes a directory and a
//     variable), and a max_age shorter than refresh is a warning: the
//     dataset would report stale between two looks.
//   - memory_swap below memory_mb is refused: it is "MB of memory plus
//     swap", so it cannot be less than the memory alone (-1 is unlimited).
package recipe

import (
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/internal/check"
)

// Options changes how a recipe is checked.
type Options struct {
	// InsecureSkipVerify records that the agent runs with
	// --insecure-skip-verify, so an artifact may omit sha256.
	InsecureSkipVerify bool
}

// Result is the outcome of checking a recipe or a plan.
type Result struct {
	// Diagnostics holds every problem, sorted by position.
	Diagnostics []compiler.Diagnostic
	// Recipe describes a recipe; nil for a plan.
	Recipe *Summary
	// Plan describes a plan; nil for a recipe.
	Plan *PlanSummary
}

// Summary is what the Studio shows about a recipe.
type Summary struct {
	Name        string
	Version     string
	Description string
	Publisher   string
	// RunType is "process" or "container", or "" without [lifecycle.run].
	RunType string
	// Runs is the command of a process or the image of a container.
	Runs         string
	Artifacts    int
	Datasets     []string
	Dependencies []string
}

// PlanSummary is what the Studio shows about a plan.
type PlanSummary struct {
	Components []Component
}

// Component is one [[components]] entry.
type Component struct {
	Name   string
	Recipe string
}

var (
	// nameRE is the allow-list of recipe and dataset names (see the
	// package comment).
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	sha256RE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	userRE   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$`)
	uidGidRE = regexp.MustCompile(`^[0-9]+(:[0-9]+)?$`)
	// constraintRE is a semver constraint: terms of an optional operator
	// and a version, separated by spaces or commas, or ||.
	constraintRE = regexp.MustCompile(`^\s*((>=|<=|!=|==|>|<|=|~>|~|\^)?\s*v?(\*|x|[0-9]+)(\.(\*|x|[0-9]+)){0,2}(-[0-9A-Za-z.-]+)?\s*(,|\|\||\s)\s*)*((>=|<=|!=|==|>|<|=|~>|~|\^)?\s*v?(\*|x|[0-9]+)(\.(\*|x|[0-9]+)){0,2}(-[0-9A-Za-z.-]+)?)\s*$`)
)

// tableKeys are the keys of each table of the recipe schema, by header.
var tableKeys = map[string][]string{
	"metadata":                          {"name", "version", "description", "publisher", "type"},
	"lifecycle":                         {"install", "run", "reload", "shutdown"},
	"lifecycle.install":                 {"script", "require_privilege"},
	"lifecycle.shutdown":                {"script"},
	"lifecycle.run":                     {"type", "restart_policy", "max_retries", "exec", "security", "container", "state", "health"},
	"lifecycle.run.state":               {"version"},
	"lifecycle.run.exec":                {"command", "args", "working_dir", "env"},
	"lifecycle.run.security":            {"user", "no_new_privileges", "capabilities"},
	"lifecycle.run.container.resources": {"memory_mb", "memory_swap", "cpu_shares", "cpu_quota", "cpu_period", "pids_limit"},
	"lifecycle.run.health":              {"check", "exec", "interval", "timeout", "failure_threshold"},
	"lifecycle.reload":                  {"signal", "script", "grace"},
	"resources":                         {"open_files", "memory_limit", "cpu_quota"},
	"":                                  recipeKeys,
	"artifacts":                         artifactKeys,
	"artifacts.delta":                   {"server", "sha256", "format"},
	"datasets":                          datasetKeys,
	"dependencies":                      {"name", "version", "type"},
	"lifecycle.run.container":           containerKeys,
	"lifecycle.run.container.mounts":    {"source", "target", "type", "read_only"},
	"lifecycle.run.container.ports":     {"host_ip", "host_port", "container_port", "protocol"},
}

var recipeKeys = []string{"metadata", "artifacts", "lifecycle", "datasets", "resources", "dependencies"}

// CheckRecipe checks a recipe.
func CheckRecipe(src []byte, opts Options) (res *Result) {
	c := &checker{}
	res = &Result{Recipe: &Summary{}}
	defer func() {
		if r := recover(); r != nil {
			c.errorAt(pos{1, 1}, "", "internal validator error; please report this recipe")
		}
		res.Diagnostics = compiler.SortDiagnostics(c.diags)
	}()
	root := c.parse(src, "recipe")
	if root == nil {
		return res
	}
	r := &recipeChecker{checker: c, opts: opts, sum: res.Recipe}
	r.check(root)
	return res
}

type recipeChecker struct {
	*checker
	opts    Options
	sum     *Summary
	runType string
}

func (r *recipeChecker) check(root *value) {
	t, _ := r.table(root, "", tableKeys[""], "")
	if v := t.get("metadata"); v == nil {
		r.errorAt(pos{1, 1}, "metadata", "missing required table `[metadata]` with the recipe's name and version")
	} else {
		r.metadata(v)
	}
	// The run type decides which tables apply, so it is read first.
	r.runType = "process"
	var run *value
	if lc := t.get("lifecycle"); lc != nil && lc.kind == kindTable {
		run = lc.get("run")
		if run != nil && run.kind == kindTable {
			if tv := run.get("type"); tv != nil && tv.kind == kindString {
				r.runType = tv.str
			}
		}
	}
	if v := t.get("artifacts"); v != nil {
		for i, a := range r.tables(v, "artifacts", "artifacts") {
			r.artifact(a, check.Index("artifacts", i))
			r.sum.Artifacts++
		}
	}
	if v := t.get("lifecycle"); v != nil {
		r.lifecycle(v)
	}
	if v := t.get("datasets"); v != nil {
		names := map[string]bool{}
		for i, d := range r.tables(v, "datasets", "datasets") {
			r.dataset(d, check.Index("datasets", i), names)
		}
	}
	if v := t.get("resources"); v != nil {
		r.resources(v)
	}
	if v := t.get("dependencies"); v != nil {
		for i, d := range r.tables(v, "dependencies", "dependencies") {
			r.dependency(d, check.Index("dependencies", i))
		}
	}
}

func (r *recipeChecker) metadata(v *value) {
	t, ok := r.table(v, "metadata", tableKeys["metadata"], "metadata")
	if !ok {
		return
	}
	if n := t.get("name"); n == nil {
		r.missing(t, "name", "the recipe's name, reverse-DNS by convention")
	} else if s, ok := r.nonEmpty(n, t.at("name")); ok {
		if !nameRE.MatchString(s) {
			r.errorAt(n.pos, t.at("name"), "recipe name `"+s+"` may use letters, digits, `.`, `_` and `-`, starting and ending with a letter or digit")
		}
		r.sum.Name = s
	}
	if n := t.get("version"); n == nil {
		r.missing(t, "version", "the recipe's semantic version, such as \"1.4.2\"")
	} else if s, ok := r.nonEmpty(n, t.at("version")); ok {
		if !check.Semver.MatchString(s) {
			r.errorAt(n.pos, t.at("version"), "`"+s+"` is not a semantic version such as \"1.4.2\"")
		}
		r.sum.Version = s
	}
	if n := t.get("description"); n != nil {
		r.sum.Description, _ = r.str(n, t.at("description"))
	}
	if n := t.get("publisher"); n != nil {
		r.sum.Publisher, _ = r.str(n, t.at("publisher"))
	}
	if n := t.get("type"); n != nil {
		r.str(n, t.at("type"))
	}
}

var artifactKeys = []string{"uri", "sha256", "sig_uri", "cert_uri", "unpack", "github_token", "headers", "delta"}

// deltaFormats are the patch encodings the agent knows.
var deltaFormats = []string{"bsdiff+zstd"}

func (r *recipeChecker) artifact(v *value, p string) {
	t, _ := r.table(v, p, tableKeys["artifacts"], "artifacts")
	if n := t.get("uri"); n == nil {
		r.missing(t, "uri", "where to download the artifact from")
	} else {
		r.nonEmpty(n, t.at("uri"))
	}
	if n := t.get("sha256"); n == nil {
		if r.opts.InsecureSkipVerify {
			r.warnAt(t.v.keyPos, t.at("sha256"), "no `sha256`: the artifact is not verified (--insecure-skip-verify)")
		} else {
			r.missing(t, "sha256", "the artifact's digest; it may be omitted only with --insecure-skip-verify")
		}
	} else {
		r.sha256(n, t.at("sha256"))
	}
	for _, k := range []string{"sig_uri", "cert_uri", "github_token"} {
		if n := t.get(k); n != nil {
			r.nonEmpty(n, t.at(k))
		}
	}
	unpack := false
	if n := t.get("unpack"); n != nil {
		unpack, _ = r.boolean(n, t.at("unpack"))
	}
	if n := t.get("headers"); n != nil {
		r.stringTable(n, t.at("headers"))
	}
	if n := t.get("delta"); n != nil {
		dp := t.at("delta")
		d, ok := r.table(n, dp, tableKeys["artifacts.delta"], "artifacts.delta")
		if !ok {
			return
		}
		// Reference: "Requires unpack = true."
		if !unpack {
			r.errorAt(n.keyPos, dp, "`delta` requires `unpack = true` on the artifact: a patch applies to the extracted archive")
		}
		if s := d.get("server"); s == nil {
			r.missing(d, "server", "the base URL of the delta server")
		} else if u, ok := r.nonEmpty(s, d.at("server")); ok {
			if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				r.errorAt(s.pos, d.at("server"), "`"+u+"` is not an http:// or https:// URL")
			}
		}
		if s := d.get("sha256"); s == nil {
			r.missing(d, "sha256", "the digest of the uncompressed archive after patching, which the result is verified against")
		} else {
			r.sha256(s, d.at("sha256"))
		}
		if f := d.get("format"); f != nil {
			if s, ok := r.str(f, d.at("format")); ok && !slices.Contains(deltaFormats, s) {
				r.warnAt(f.pos, d.at("format"), "patch format `"+s+"` is not one the agent knows (`bsdiff+zstd`); it will log it and download the whole artifact")
			}
		}
	}
}

func (r *recipeChecker) sha256(v *value, p string) {
	if s, ok := r.nonEmpty(v, p); ok && !sha256RE.MatchString(s) {
		r.errorAt(v.pos, p, "a sha256 digest is 64 hexadecimal digits")
	}
}

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

var datasetKeys = []string{"name", "manifest", "sig_uri", "cert_uri", "refresh", "max_age", "keep", "required", "headers"}

func (r *recipeChecker) dataset(v *value, p string, names map[string]bool) {
	t, _ := r.table(v, p, tableKeys["datasets"], "datasets")
	if n := t.get("name"); n == nil {
		r.missing(t, "name", "it becomes a directory and KEYSTONE_DATASET_<NAME>")
	} else if s, ok := r.nonEmpty(n, t.at("name")); ok {
		if !nameRE.MatchString(s) {
			r.errorAt(n.pos, t.at("name"), "dataset name `"+s+"` may use letters, digits, `.`, `_` and `-`, starting and ending with a letter or digit (the recipe name allow-list)")
		}
		folded := strings.ToUpper(s)
		if names[folded] {
			r.errorAt(n.pos, t.at("name"), "dataset `"+s+"` is declared twice; each becomes its own directory and KEYSTONE_DATASET_<NAME>")
		}
		names[folded] = true
		r.sum.Datasets = append(r.sum.Datasets, s)
	}
	if n := t.get("manifest"); n == nil {
		r.missing(t, "manifest", "the URL or local path of the signed manifest naming the current version")
	} else {
		r.nonEmpty(n, t.at("manifest"))
	}
	for _, k := range []string{"sig_uri", "cert_uri"} {
		if n := t.get(k); n != nil {
			r.nonEmpty(n, t.at(k))
		}
	}
	if n := t.get("refresh"); n != nil {
		// "Minimum 1m — a dataset is not a poll loop"
		if d, ok := r.duration(n, t.at("refresh")); ok && d < time.Minute {
			r.errorAt(n.pos, t.at("refresh"), "`refresh` must be at least 1m; a dataset is not a poll loop")
		}
	}
	refresh := 24 * time.Hour
	if n := t.get("refresh"); n != nil && n.kind == kindString {
		if d, err := time.ParseDuration(n.str); err == nil && d > 0 {
			refresh = d
		}
	}
	if n := t.get("max_age"); n != nil {
		// "Past this the dataset reports stale": shorter than refresh, it
		// would report stale between two looks.
		if d, ok := r.duration(n, t.at("max_age")); ok && d < refresh {
			r.warnAt(n.pos, t.at("max_age"), "`max_age` ("+d.String()+") is shorter than `refresh` ("+refresh.String()+"), so the dataset reports stale between two looks")
		}
	}
	if n := t.get("keep"); n != nil {
		// "Minimum 2: below that there is no rollback target"
		if x, ok := r.integer(n, t.at("keep"), -1<<63, 1<<63-1); ok && x < 2 {
			r.errorAt(n.pos, t.at("keep"), "`keep` must be at least 2; below that there is no rollback target")
		}
	}
	if n := t.get("required"); n != nil {
		r.boolean(n, t.at("required"))
	}
	if n := t.get("headers"); n != nil {
		r.stringTable(n, t.at("headers"))
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

func (r *recipeChecker) resources(v *value) {
	t, ok := r.table(v, "resources", tableKeys["resources"], "resources")
	if !ok {
		return
	}
	if n := t.get("open_files"); n != nil {
		r.integer(n, t.at("open_files"), 0, 1<<63-1)
	}
	// "Refused. Use [lifecycle.run.container.resources] memory_mb" and the
	// same for cpu_quota.
	if n := t.get("memory_limit"); n != nil {
		r.errorAt(n.keyPos, t.at("memory_limit"), "`[resources] memory_limit` is refused; use `memory_mb` in [lifecycle.run.container.resources]")
	}
	if n := t.get("cpu_quota"); n != nil {
		r.errorAt(n.keyPos, t.at("cpu_quota"), "`[resources] cpu_quota` is refused; use `cpu_quota` in [lifecycle.run.container.resources]")
	}
}

var dependencyTypes = []string{"hard", "soft", "ordering"}

func (r *recipeChecker) dependency(v *value, p string) {
	t, _ := r.table(v, p, tableKeys["dependencies"], "dependencies")
	if n := t.get("name"); n == nil {
		r.missing(t, "name", "another recipe's metadata.name")
	} else if s, ok := r.nonEmpty(n, t.at("name")); ok {
		r.sum.Dependencies = append(r.sum.Dependencies, s)
	}
	if n := t.get("version"); n != nil {
		if s, ok := r.nonEmpty(n, t.at("version")); ok && !constraintRE.MatchString(s) {
			r.errorAt(n.pos, t.at("version"), "`"+s+"` is not a semver constraint such as \">=1.2.0\" or \"^1.4\"")
		}
	}
	if n := t.get("type"); n != nil {
		r.enum(n, t.at("type"), dependencyTypes)
	}
}

// CheckPlan checks a plan: "[[components]] name = ... recipe = ...
// That is the entire plan schema."
func CheckPlan(src []byte) (res *Result) {
	c := &checker{}
	res = &Result{Plan: &PlanSummary{}}
	defer func() {
		if r := recover(); r != nil {
			c.errorAt(pos{1, 1}, "", "internal validator error; please report this plan")
		}
		res.Diagnostics = compiler.SortDiagnostics(c.diags)
	}()
	root := c.parse(src, "plan")
	if root == nil {
		return res
	}
	t, _ := c.table(root, "", []string{"components"}, "")
	v := t.get("components")
	if v == nil {
		c.errorAt(pos{1, 1}, "components", "missing `[[components]]`: a plan lists its components, each with a name and a recipe")
		return res
	}
	seen := map[string]int{}
	for i, it := range c.tables(v, "components", "components") {
		p := check.Index("components", i)
		ct, _ := c.table(it, p, []string{"name", "recipe"}, "")
		var comp Component
		if n := ct.get("name"); n == nil {
			c.missing(ct, "name", "unique in the plan")
		} else if s, ok := c.nonEmpty(n, ct.at("name")); ok {
			// "string, required, unique in the plan"
			if line, dup := seen[s]; dup {
				c.errorAt(n.pos, ct.at("name"), "component name `"+s+"` is already used at line "+strconv.Itoa(line)+"; names are unique in the plan")
			} else {
				seen[s] = n.pos.line
			}
			comp.Name = s
		}
		if n := ct.get("recipe"); n == nil {
			c.missing(ct, "recipe", "a path to a TOML file, or \"name:version\" from the store")
		} else if s, ok := c.nonEmpty(n, ct.at("recipe")); ok {
			comp.Recipe = s
			if !validRecipeRef(s) {
				c.errorAt(n.pos, ct.at("recipe"), "recipe `"+s+"` must be a path to a TOML file (ending in .toml) or \"name:version\" from the store, such as \"com.example.api:1.4.2\"")
			}
		}
		res.Plan.Components = append(res.Plan.Components, comp)
	}
	return res
}

// validRecipeRef accepts the two spellings of a plan's recipe: "path to a
// TOML file, or "name:version" from the store". A path is recognised by
// its .toml extension; a store reference is a recipe name, a colon and a
// semantic version.
func validRecipeRef(s string) bool {
	if strings.HasSuffix(strings.ToLower(s), ".toml") {
		return true
	}
	name, ver, ok := strings.Cut(s, ":")
	return ok && nameRE.MatchString(name) && check.Semver.MatchString(ver)
}
