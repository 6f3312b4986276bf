package views_test

import (
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler/kinds"
	"github.com/skali-dev/studio/views"
)

// TestKindReports: each kind's report names the kind and, when valid,
// shows a summary that fits it; an invalid one lists its diagnostics.
func TestKindReports(t *testing.T) {
	cases := []struct {
		name, src string
		valid     bool
		want      []string
	}{
		{"release", "api_version: selfhost/v1alpha1\nmetadata: {name: demo, version: 1.2.0}\nruntimes: {compose: {files: [compose.yaml]}}\n", true,
			[]string{"Release manifest (selfhost/v1alpha1)", "Valid release manifest", "<strong>demo 1.2.0</strong>", `data-count="not-checked"`, "compose.yaml"}},
		{"secrets", "api_version: selfhost/v1alpha1\nsecrets:\n  - {name: k, generator: {kind: hex}}\n", true,
			[]string{"Secret schema (selfhost/v1alpha1)", "Valid secret schema", ">k<", "generated"}},
		{"recipe", "[metadata]\nname = \"api\"\nversion = \"1.0.0\"\n[lifecycle.run.exec]\ncommand = \"./api\"\n", true,
			[]string{"Recipe (TOML)", "Valid recipe", "<strong>api 1.0.0</strong>", "./api"}},
		{"plan", "[[components]]\nname = \"api\"\nrecipe = \"api.toml\"\n", true,
			[]string{"Plan (TOML)", "Valid plan", "api.toml"}},
		{"invalid plan", "[[components]]\nname = \"api\"\n", false,
			[]string{"Plan (TOML)", "1 error", "components[0].recipe", `href="#L1"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := kinds.Validate("", []byte(tc.src), kinds.Options{})
			r := views.NewKindReport([]byte(tc.src), res)
			if r.Valid != tc.valid {
				t.Fatalf("valid: got %v, want %v (%v)", r.Valid, tc.valid, res.Diagnostics)
			}
			html := render(t, views.ManifestReportView(r))
			for _, w := range tc.want {
				if !strings.Contains(html, w) {
					t.Errorf("report lacks %q", w)
				}
			}
			if strings.Contains(html, "Definition hash") {
				t.Errorf("a %s report shows a definition hash", tc.name)
			}
		})
	}
}
