package kinds_test

import (
	"os"
	"slices"
	"testing"

	"github.com/skali-dev/studio/compiler/kinds"
)

func read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDetect follows the issue: "Kind detection: by content (an
// api_version: selfhost/v1alpha1 document, a secret schema, a TOML recipe
// with [metadata], a TOML plan with [[components]], otherwise skali.yaml)
// and by file name where one is given".
func TestDetect(t *testing.T) {
	manifest := read(t, "../release/testdata/manifest.yaml")
	schema := read(t, "../release/testdata/secrets.schema.yaml")
	rec := read(t, "../recipe/testdata/recipe.toml")
	plan := read(t, "../recipe/testdata/plan.toml")
	cases := []struct {
		name, file, src string
		want            kinds.Kind
	}{
		{"release manifest by content", "-", string(manifest), kinds.Release},
		{"secret schema by content", "", string(schema), kinds.ReleaseSecrets},
		{"recipe by [metadata]", "", string(rec), kinds.Recipe},
		{"plan by [[components]]", "-", string(plan), kinds.Plan},
		{"plan by an inline array of tables", "-", "components = [ {name = \"api\", recipe = \"api.toml\"} ]\n", kinds.Plan},
		{"plan by an inline array, named like a recipe", "device.toml", "# the device\ncomponents = [\n  {name = \"api\", recipe = \"api.toml\"},\n]\n", kinds.Plan},
		{"recipe by dotted keys", "", "metadata.name = \"x\"\nmetadata.version = \"1.0.0\"\n", kinds.Recipe},
		{"skali by default", "", "name: shop\napplications:\n  web: {image: nginx}\n", kinds.Skali},
		{"content wins over the name", "skali.yaml", string(plan), kinds.Plan},
		{"release without api_version by name", "release/manifest.yaml", "metadata: {name: x}\n", kinds.Release},
		{"secrets by name", "secrets.schema.yaml", "secrets: []\n", kinds.ReleaseSecrets},
		{"plan by name", "edge-plan.toml", "# empty\n", kinds.Plan},
		{"recipe by name", "api.toml", "", kinds.Recipe},
		{"recipe by a TOML key", "", "# x\nname = \"y\"\n", kinds.Recipe},
		{"other api_version is still a release", "", "api_version: selfhost/v2\nmetadata: {}\n", kinds.Release},
		{"a manifest whose secrets block is a mapping", "", "api_version: selfhost/v1alpha1\nsecrets:\n  source: /x\n", kinds.Release},
		{"inline secrets list", "", "api_version: selfhost/v1alpha1\nsecrets: [{name: a}]\n", kinds.ReleaseSecrets},
		{"release fields without api_version", "release.yaml", "metadata: {name: x}\nruntimes: {}\n", kinds.Release},
		{"secrets list without api_version", "", "secrets:\n  - name: a\n", kinds.ReleaseSecrets},
		{"skali fields win over release-looking ones", "", "name: x\nimages: {}\n", kinds.Skali},
	}
	for _, tc := range cases {
		if got := kinds.Detect(tc.file, []byte(tc.src)); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestValidateForcedKind(t *testing.T) {
	r := kinds.Validate("skali.yaml", read(t, "../release/testdata/manifest.yaml"), kinds.Options{Kind: kinds.Release})
	if r.Kind != kinds.Release || !r.Valid() || r.Release == nil {
		t.Errorf("got kind %s valid %v: %v", r.Kind, r.Valid(), r.Diagnostics)
	}
	r = kinds.Validate("x", read(t, "../release/testdata/manifest.yaml"), kinds.Options{Kind: kinds.Skali})
	if r.Kind != kinds.Skali || r.Valid() {
		t.Errorf("forced skali: got kind %s valid %v", r.Kind, r.Valid())
	}
}

// TestLinkSecretSchemas: an owner in a schema validated with its manifest
// is checked against the manifest's min_manager_version.
func TestLinkSecretSchemas(t *testing.T) {
	m := kinds.Validate("manifest.yaml", read(t, "../release/testdata/manifest.yaml"), kinds.Options{})
	s := kinds.Validate("secrets.schema.yaml", []byte("api_version: selfhost/v1alpha1\nsecrets:\n  - {name: k, owner: \"65532\"}\n"), kinds.Options{})
	if !s.Valid() || len(s.NotChecked) != 1 {
		t.Fatalf("alone: got %v, not checked %v", s.Diagnostics, s.NotChecked)
	}
	kinds.LinkSecretSchemas([]string{"release/manifest.yaml", "release/secrets.schema.yaml"}, []*kinds.Result{m, s})
	if s.Valid() || len(s.Diagnostics) != 1 || s.Diagnostics[0].Path != "secrets[0].owner" || s.Diagnostics[0].Line != 3 {
		t.Errorf("linked: got %v", s.Diagnostics)
	}
}

// TestInlinePlan follows issue 26: "A plan written with an inline array of
// tables (components = [ {name = "api", recipe = "…"} ]) is a plan, not a
// recipe: kind detection looks at the parsed tables, not at the spelling;
// its duplicate-name rule is then reported at components[1].name."
func TestInlinePlan(t *testing.T) {
	src := "components = [\n  {name = \"api\", recipe = \"api.toml\"},\n  {name = \"api\", recipe = \"com.example.api:1.4.2\"},\n]\n"
	r := kinds.Validate("", []byte(src), kinds.Options{})
	if r.Kind != kinds.Plan {
		t.Fatalf("got kind %s, want plan (%v)", r.Kind, r.Diagnostics)
	}
	if len(r.Diagnostics) != 1 || r.Diagnostics[0].Path != "components[1].name" || r.Diagnostics[0].Line != 3 {
		t.Errorf("got %v, want one error at components[1].name on line 3", r.Diagnostics)
	}
}

// TestDiagnosticsOnly: the live editor's check (DiagnosticsOnly) detects
// the same kind and answers the same diagnostics as a whole validation,
// for every kind, valid or not.
func TestDiagnosticsOnly(t *testing.T) {
	typo := []byte("name: shop\napplications:\n  web:\n    image: nginx\n    replicas: 2\n")
	invalid := 0
	for _, tc := range []struct {
		name string
		src  []byte
	}{
		{"production.skali.yaml", read(t, "../testdata/production.skali.yaml")},
		{"rest-of-surface.skali.yaml", read(t, "../testdata/rest-of-surface.skali.yaml")},
		{"skali.yaml", typo},
		{"skali.yaml", []byte("name: shop\n\tport: 80\n")},
		{"manifest.yaml", read(t, "../release/testdata/manifest.yaml")},
		{"secrets.schema.yaml", read(t, "../release/testdata/secrets.schema.yaml")},
		{"recipe.toml", read(t, "../recipe/testdata/recipe.toml")},
		{"plan.toml", read(t, "../recipe/testdata/plan.toml")},
	} {
		whole := kinds.Validate(tc.name, tc.src, kinds.Options{})
		only := kinds.Validate(tc.name, tc.src, kinds.Options{DiagnosticsOnly: true})
		if only.Kind != whole.Kind || only.Valid() != whole.Valid() || !slices.Equal(only.Diagnostics, whole.Diagnostics) {
			t.Errorf("%s: diagnostics only gave %s %v, the whole validation %s %v", tc.name, only.Kind, only.Diagnostics, whole.Kind, whole.Diagnostics)
		}
		if !whole.Valid() {
			invalid++
		}
	}
	if invalid != 2 {
		t.Errorf("%d of the documents are invalid, want the 2 skali.yaml with mistakes", invalid)
	}
}
