package recipe

// [resources] and [[dependencies]]: what a component asks of its host and
// of other components.

import (
	"regexp"
)

// constraintRE is a semver constraint: terms of an optional operator and a
// version, separated by spaces or commas, or ||.
var constraintRE = regexp.MustCompile(`^\s*((>=|<=|!=|==|>|<|=|~>|~|\^)?\s*v?(\*|x|[0-9]+)(\.(\*|x|[0-9]+)){0,2}(-[0-9A-Za-z.-]+)?\s*(,|\|\||\s)\s*)*((>=|<=|!=|==|>|<|=|~>|~|\^)?\s*v?(\*|x|[0-9]+)(\.(\*|x|[0-9]+)){0,2}(-[0-9A-Za-z.-]+)?)\s*$`)

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
