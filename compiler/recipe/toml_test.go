package recipe_test

import (
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler/recipe"
)

// TestTOMLStructure covers the TOML rules a tokenizer leaves to its caller
// ("which mistakes the parser stays quiet about") and the input bounds.
func TestTOMLStructure(t *testing.T) {
	sha := "sha256 = \"" + strings.Repeat("a", 64) + "\"\n"
	runRules(t, false, []ruleCase{
		{name: "a sub-table belongs to the last array item", cite: "which tables repeat",
			src:  head + "[[artifacts]]\nuri = \"a\"\n" + sha + "[[artifacts]]\nuri = \"b\"\n" + sha + "[artifacts.delta]\nserver = \"https://d\"\n" + sha,
			want: []want{errAt("artifacts[1].delta", 10, 12)}},
		{name: "dotted keys then a header", cite: "what the dots mean",
			src:  "lifecycle.run.type = \"process\"\n" + head + "[lifecycle.run]\n",
			want: []want{errAt("lifecycle.run.exec", 1, 11), errAt("lifecycle.run", 5, 12)}},
		{name: "header onto a value", cite: "what the dots mean",
			src: head + "[metadata.name]\n", want: []want{errAt("metadata.name", 4, 11)}},
		{name: "array of tables onto a table", cite: "which tables repeat",
			src: head + "[[metadata]]\n", want: []want{errAt("metadata", 4, 3)}},
		{name: "inline tables are closed", cite: "which tables repeat",
			src:  head + "[[artifacts]]\nuri = \"a\"\n" + sha + "headers = { A = \"b\" }\n[artifacts.headers]\nC = \"d\"\n",
			want: []want{errAt("artifacts[0].headers", 8, 12)}},
		{name: "duplicate key in an inline table has its path", cite: "line, column and path",
			src:  head + "[[artifacts]]\nuri = \"a\"\n" + sha + "headers = { A = \"b\", A = \"c\" }\nunpack = 99999999999999999999\n",
			want: []want{errAt("artifacts[0].headers.A", 7, 22), errAt("artifacts[0].unpack", 8, 10), errAt("artifacts[0].unpack", 8, 10)}},
		{name: "columns count characters", cite: "line, column and path",
			src:  "[metadata]\ndescription = \"ünïcödé\"\nname = \"x\"\nversion = \"1.0.0\"\npublisher = \"é\"\ntype = 1\n",
			want: []want{errAt("metadata.type", 6, 8)}},
		{name: "nesting bound", cite: "bound TOML input size and nesting",
			src: head + "x = " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n", want: []want{errAt("", 4, 1)}},
		{name: "size bound", cite: "bound TOML input size",
			src: head + "# " + strings.Repeat("x", recipe.MaxSize) + "\n", want: []want{errAt("", 1, 1)}},
		{name: "empty", cite: "invalid input is rejected", src: "\n \n", want: []want{errAt("", 1, 1)}},
	})
}
