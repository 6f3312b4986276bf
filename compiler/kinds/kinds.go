// Package kinds tells the manifest kinds the Studio validates apart and
// validates a document as its kind: skali.yaml (package compiler), the
// selfhost/v1alpha1 release manifest and its secret schema (package
// release), and the edge agent's TOML recipe and plan (package recipe).
package kinds

import (
	"path"
	"regexp"
	"strings"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/recipe"
	"github.com/skali-dev/studio/compiler/release"
)

// Kind names a manifest kind as `studio validate --json` reports it.
type Kind string

// The kinds.
const (
	Skali          Kind = "skali"
	Release        Kind = "release"
	ReleaseSecrets Kind = "release-secrets"
	Recipe         Kind = "recipe"
	Plan           Kind = "plan"
)

// All lists every kind, in the order the Studio offers them.
var All = []Kind{Skali, Release, ReleaseSecrets, Recipe, Plan}

// Label is how the Studio names a kind to people.
func (k Kind) Label() string {
	switch k {
	case Release:
		return "Release manifest (selfhost/v1alpha1)"
	case ReleaseSecrets:
		return "Secret schema (selfhost/v1alpha1)"
	case Recipe:
		return "Recipe (TOML)"
	case Plan:
		return "Plan (TOML)"
	}
	return "skali.yaml manifest"
}

// Parse reads a kind name as given to --kind.
func Parse(s string) (Kind, bool) {
	for _, k := range All {
		if string(k) == s {
			return k, true
		}
	}
	return "", false
}

// Options changes how a document is validated.
type Options struct {
	// Kind forces a kind; "" detects it.
	Kind Kind
	// InsecureSkipVerify records that the edge agent runs with
	// --insecure-skip-verify, so a recipe's artifacts may omit sha256.
	InsecureSkipVerify bool
	// DiagnosticsOnly asks for the kind and the diagnostics alone: a
	// skali.yaml manifest is then checked by every rule but not compiled
	// into its definition, hash and value contract (Result.Skali stays
	// nil). The other kinds are validated whole.
	DiagnosticsOnly bool
}

// Result is the outcome of validating one document.
type Result struct {
	Kind Kind
	// Diagnostics holds every problem, sorted by line, column and path.
	Diagnostics []compiler.Diagnostic
	// NotChecked lists rules that need more than the document.
	NotChecked []compiler.NotChecked
	// Exactly one of these is set, by Kind (none for a skali.yaml
	// validated with Options.DiagnosticsOnly).
	Skali   *compiler.Result
	Release *release.ManifestResult
	Secrets *release.SecretsResult
	// Recipe is set for both recipes and plans.
	Recipe *recipe.Result
}

// Valid reports whether the document has no error-severity diagnostic.
func (r *Result) Valid() bool {
	for _, d := range r.Diagnostics {
		if d.Severity == compiler.SeverityError {
			return false
		}
	}
	return true
}

// Validate detects the kind of src (unless opts.Kind forces one) and
// validates it as that kind. filename, "" or "-" when there is none, helps
// detection only.
func Validate(filename string, src []byte, opts Options) *Result {
	k := opts.Kind
	if k == "" {
		k = Detect(filename, src)
	}
	r := &Result{Kind: k}
	switch k {
	case Release:
		r.Release = release.CheckManifest(src)
		r.Diagnostics, r.NotChecked = r.Release.Diagnostics, r.Release.NotChecked
	case ReleaseSecrets:
		r.Secrets = release.CheckSecretSchema(src)
		r.Diagnostics, r.NotChecked = r.Secrets.Diagnostics, r.Secrets.NotChecked
	case Recipe:
		r.Recipe = recipe.CheckRecipe(src, recipe.Options{InsecureSkipVerify: opts.InsecureSkipVerify})
		r.Diagnostics = r.Recipe.Diagnostics
	case Plan:
		r.Recipe = recipe.CheckPlan(src)
		r.Diagnostics = r.Recipe.Diagnostics
	default:
		r.Kind = Skali
		if opts.DiagnosticsOnly {
			r.Diagnostics = compiler.Diagnose(src)
			break
		}
		r.Skali = compiler.Compile(src)
		r.Diagnostics = r.Skali.Diagnostics
	}
	if r.NotChecked == nil {
		r.NotChecked = []compiler.NotChecked{}
	}
	return r
}

// LinkSecretSchemas decides, for secret schemas validated together with
// their release manifest, the rule that needs both: an owner needs the
// manifest's min_manager_version to be 0.6.0 or later. A schema belongs to
// the manifest whose secrets.schema names its file; when no manifest names
// it and exactly one manifest is given, to that one.
func LinkSecretSchemas(files []string, results []*Result) {
	var manifests []int
	for i, r := range results {
		if r != nil && r.Kind == Release {
			manifests = append(manifests, i)
		}
	}
	if len(manifests) == 0 {
		return
	}
	for i, r := range results {
		if r == nil || r.Kind != ReleaseSecrets {
			continue
		}
		owner := -1
		for _, m := range manifests {
			if s := results[m].Release.Summary.SecretSchema; s != "" && path.Base(s) == path.Base(files[i]) {
				owner = m
				break
			}
		}
		if owner < 0 && len(manifests) == 1 {
			owner = manifests[0]
		}
		if owner < 0 {
			continue
		}
		release.CheckOwnerVersion(r.Secrets, results[owner].Release)
		r.Diagnostics, r.NotChecked = r.Secrets.Diagnostics, r.Secrets.NotChecked
	}
}

var (
	apiVersionLine = regexp.MustCompile(`^api_version\s*:`)
	topKeyLine     = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)\s*:(.*)$`)
	tomlHeaderLine = regexp.MustCompile(`^\s*(\[\[?)\s*([A-Za-z0-9_-]+)(\s*\.\s*[A-Za-z0-9_"'-]+)*\s*\]\]?\s*(#.*)?$`)
	tomlKeyLine    = regexp.MustCompile(`^\s*[A-Za-z0-9_"'-]+(\s*\.\s*[A-Za-z0-9_"'-]+)*\s*=`)
)

// Detect tells a document's kind, by content first and by file name when
// the content does not say:
//   - a top-level api_version (selfhost/v1alpha1, or any other: skali.yaml
//     has none) is a release document; it is a secret schema when its
//     top-level secrets is a list and it has no metadata, kind or runtimes;
//   - without api_version, top-level fields only a release manifest has
//     (metadata, runtimes, images, operations, ...) and none of skali.yaml's
//     (name, applications, databases, buckets) make a release manifest, and
//     a top-level list of secrets a secret schema, so the missing
//     api_version is reported by the right checker;
//   - a document that parses as TOML is a plan when its root table has
//     components and none of a recipe's tables, and a recipe when it has a
//     recipe's tables (metadata, artifacts, ...) and no components, however
//     the tables are spelled ([[components]] headers or an inline array);
//   - otherwise a TOML table header [[components]] is a plan and [metadata]
//     (or another recipe table) a recipe, whichever comes first;
//   - otherwise the file name decides: *.toml is a recipe (a plan when the
//     name contains "plan"), manifest.yaml a release manifest, a YAML file
//     whose name contains "secrets" a secret schema;
//   - otherwise a document whose first line is a TOML key = value is a
//     recipe, and anything else a skali.yaml manifest.
func Detect(filename string, src []byte) Kind {
	if len(src) <= compiler.MaxManifestSize {
		if k := detectContent(string(src)); k != "" {
			return k
		}
	}
	base := strings.ToLower(path.Base(strings.ReplaceAll(filename, "\\", "/")))
	ext := path.Ext(base)
	switch {
	case ext == ".toml" && strings.Contains(base, "plan"):
		return Plan
	case ext == ".toml":
		return Recipe
	case base == "skali.yaml" || base == "skali.yml":
		return Skali
	case (ext == ".yaml" || ext == ".yml") && strings.Contains(base, "secrets"):
		return ReleaseSecrets
	case base == "manifest.yaml" || base == "manifest.yml":
		return Release
	}
	if len(src) <= compiler.MaxManifestSize && firstLineIsTOMLKey(string(src)) {
		return Recipe
	}
	return Skali
}

func detectContent(s string) Kind {
	if k := detectTOML([]byte(s)); k != "" {
		return k
	}
	lines := strings.Split(s, "\n")
	api := false
	secretsList, manifestKeys, skaliKeys := false, false, false
	for i, l := range lines {
		l = strings.TrimRight(l, "\r")
		if m := tomlHeaderLine.FindStringSubmatch(l); m != nil {
			switch {
			case m[1] == "[[" && m[2] == "components":
				return Plan
			case m[2] == "metadata" || m[2] == "artifacts" || m[2] == "lifecycle" || m[2] == "datasets" || m[2] == "dependencies" || m[2] == "resources":
				return Recipe
			}
		}
		if apiVersionLine.MatchString(l) {
			api = true
		}
		m := topKeyLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		switch m[1] {
		case "name", "applications", "databases", "buckets":
			skaliKeys = true
		case "metadata", "kind", "runtimes", "runtime", "images", "operations", "providers", "requirements",
			"parameters", "configuration", "tasks", "compatibility", "retention", "extensions":
			manifestKeys = true
		case "secrets":
			rest := strings.TrimSpace(m[2])
			if strings.HasPrefix(rest, "[") {
				secretsList = true
			} else if rest == "" || strings.HasPrefix(rest, "#") {
				for _, n := range lines[i+1:] {
					t := strings.TrimSpace(n)
					if t == "" || strings.HasPrefix(t, "#") {
						continue
					}
					secretsList = strings.HasPrefix(t, "- ") || t == "-"
					break
				}
			}
		}
	}
	switch {
	case api && secretsList && !manifestKeys:
		return ReleaseSecrets
	case api:
		return Release
	case skaliKeys:
		return ""
	case manifestKeys:
		return Release
	case secretsList:
		return ReleaseSecrets
	}
	return ""
}

func firstLineIsTOMLKey(s string) bool {
	for _, l := range strings.Split(s, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		return tomlKeyLine.MatchString(t)
	}
	return false
}

// detectTOML tells a plan from a recipe by the parsed root table, or
// returns "" when src is not TOML or its tables do not say.
func detectTOML(src []byte) Kind {
	keys, ok := recipe.TopLevelKeys(src)
	if !ok {
		return ""
	}
	components, recipeTables := false, false
	for _, k := range keys {
		switch k {
		case "components":
			components = true
		case "metadata", "artifacts", "lifecycle", "datasets", "dependencies", "resources":
			recipeTables = true
		}
	}
	switch {
	case components && !recipeTables:
		return Plan
	case recipeTables && !components:
		return Recipe
	}
	return ""
}
