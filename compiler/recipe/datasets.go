package recipe

// [[datasets]]: signed data the agent keeps fresh beside the component.

import (
	"strings"
	"time"
)

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
