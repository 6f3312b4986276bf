package recipe

// Plans: the [[components]] a device runs, each naming its recipe.

import (
	"strconv"
	"strings"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/internal/check"
)

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

// TopLevelKeys parses src as TOML and returns the keys of its root table,
// in document order; ok is false when src is not a TOML document (a syntax
// error, or past the size limit). Kind detection looks at these parsed
// tables, so a plan spelled with an inline array of tables
// (components = [ {name = ..., recipe = ...} ]) is told apart from a recipe
// as surely as one spelled with [[components]] headers.
func TopLevelKeys(src []byte) (keys []string, ok bool) {
	c := &checker{}
	defer func() {
		if recover() != nil {
			keys, ok = nil, false
		}
	}()
	root := c.parse(src, "document")
	if root == nil {
		return nil, false
	}
	return root.keys, true
}
