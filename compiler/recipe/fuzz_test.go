package recipe_test

import (
	"os"
	"testing"

	"github.com/skali-dev/studio/compiler/recipe"
)

// FuzzCheck: no input makes the checker panic or report a diagnostic
// without a position.
func FuzzCheck(f *testing.F) {
	for _, name := range []string{"recipe.toml", "container.toml", "plan.toml"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("a.b.c = 1\n[a]\nb.d = [1, [2, {x = 3}]]\n[[a.e]]\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, res := range []*recipe.Result{recipe.CheckRecipe(src, recipe.Options{}), recipe.CheckPlan(src)} {
			for _, d := range res.Diagnostics {
				if d.Line < 1 || d.Column < 1 || d.Message == "" {
					t.Fatalf("diagnostic without a position or message: %+v", d)
				}
				if d.Message == "internal validator error; please report this recipe" || d.Message == "internal validator error; please report this plan" {
					t.Fatalf("checker panicked on %q", src)
				}
			}
		}
	})
}
