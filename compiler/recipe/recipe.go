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
	"regexp"

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

// nameRE is the allow-list of recipe and dataset names (see the package
// comment).
var nameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

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
