package release_test

import (
	"os"
	"testing"

	"github.com/skali-dev/studio/compiler/release"
)

// TestReferenceExamples: the reference's complete example ("a real, valid
// bundle") and its secret schema validate without a diagnostic.
func TestReferenceExamples(t *testing.T) {
	src, err := os.ReadFile("testdata/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := release.CheckManifest(src)
	if len(res.Diagnostics) != 0 {
		t.Errorf("manifest.yaml: got diagnostics %v, want none", res.Diagnostics)
	}
	if len(res.NotChecked) == 0 {
		t.Errorf("manifest.yaml: got no not-checked rules, want the declared paths")
	}
	for _, n := range res.NotChecked {
		t.Logf("not checked: %d:%d %s: %s", n.Line, n.Column, n.Path, n.Message)
	}
	if s := res.Summary; s.Name != "demo" || s.Version != "1.2.0" || len(s.Images) != 2 || len(s.Parameters) != 2 {
		t.Errorf("summary: got %+v", s)
	}
	src, err = os.ReadFile("testdata/secrets.schema.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sres := release.CheckSecretSchema(src)
	if len(sres.Diagnostics) != 0 {
		t.Errorf("secrets.schema.yaml: got diagnostics %v, want none", sres.Diagnostics)
	}
	if len(sres.Secrets) != 3 {
		t.Errorf("secrets: got %+v, want 3", sres.Secrets)
	}
}
