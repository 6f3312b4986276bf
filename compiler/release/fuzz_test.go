package release_test

import (
	"os"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler/release"
)

// FuzzCheck: no input makes the checkers panic or report a diagnostic
// without a position.
func FuzzCheck(f *testing.F) {
	for _, name := range []string{"manifest.yaml", "secrets.schema.yaml"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		ds := append(release.CheckManifest(src).Diagnostics, release.CheckSecretSchema(src).Diagnostics...)
		for _, d := range ds {
			if d.Line < 1 || d.Column < 1 || d.Message == "" {
				t.Fatalf("diagnostic without a position or message: %+v", d)
			}
			if strings.HasPrefix(d.Message, "internal validator error") {
				t.Fatalf("checker panicked on %q", src)
			}
		}
	})
}
