package recipe

// [metadata]: the recipe's name, version and description.

import (
	"github.com/skali-dev/studio/compiler/internal/check"
)

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
