package release_test

import (
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
)

// TestLimits: release documents are parsed under the same limits as
// skali.yaml (size, depth, aliases).
func TestLimits(t *testing.T) {
	deep := "api_version: selfhost/v1alpha1\nextensions:\n  a.b: " + strings.Repeat("[", compiler.MaxDepth+1) + strings.Repeat("]", compiler.MaxDepth+1) + "\n"
	var aliases strings.Builder
	aliases.WriteString("api_version: selfhost/v1alpha1\nextensions:\n  a.b:\n    x: &x 1\n    l: [")
	for i := 0; i <= compiler.MaxAliases; i++ {
		aliases.WriteString("*x, ")
	}
	aliases.WriteString("]\n")
	runRules(t, manifestDiags, []ruleCase{
		{name: "size", cite: "MaxManifestSize", src: base + "# " + strings.Repeat("x", compiler.MaxManifestSize) + "\n",
			want: []want{errAt("", 1, 1)}, contains: "the release manifest is"},
		{name: "depth", cite: "MaxDepth", src: deep, want: []want{errAt("", 3, 70)}, contains: "nests deeper"},
		{name: "aliases", cite: "MaxAliases", src: aliases.String(), want: []want{errAt("", 5, 409)}, contains: "aliases"},
		{name: "empty", cite: "the document must be a mapping", src: "# nothing\n", want: []want{errAt("", 1, 1)}, contains: "the release manifest is empty"},
		{name: "not a mapping", cite: "the document must be a mapping", src: "- a\n", want: []want{errAt("", 1, 1)}, contains: "must be a mapping"},
		{name: "runtime alone", cite: "A manifest carrying it is refused, naming what to write instead",
			src: "api_version: selfhost/v1alpha1\nmetadata: {name: demo, version: 1.2.0}\nruntime: {files: [c.yaml]}\n", want: []want{errAt("runtime", 3, 1)}},
	})
	runRules(t, schemaDiags, []ruleCase{
		{name: "schema size", cite: "MaxManifestSize", src: "secrets: []\n# " + strings.Repeat("x", compiler.MaxManifestSize) + "\n",
			want: []want{errAt("", 1, 1)}, contains: "the secret schema is"},
	})
}
