package web_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

func readFile(tb testing.TB, parts ...string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(parts...))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// TestValidateOtherKinds follows issue 14: "The /validate page shows the
// detected kind and the same line-anchored diagnostics and a summary
// fitting the kind."
func TestValidateOtherKinds(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	c := s.NewClient()
	manifest := readFile(t, "..", "compiler", "release", "testdata", "manifest.yaml")

	resp, body := s.PostForm(t, c, "/validate", url.Values{"manifest": {manifest}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /validate release manifest = %d, want 200", resp.StatusCode)
	}
	for _, want := range []string{
		`data-kind="release"`, "Release manifest (selfhost/v1alpha1)", "Valid release manifest", "<strong>demo 1.2.0</strong>",
		"registry.example/demo/app@sha256:", ">http_port<", "Not checked", `href="#L29"`, "compose/compose.yaml",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("release page lacks %q", want)
		}
	}
	if strings.Contains(body, "Definition hash") {
		t.Errorf("a release manifest shows a definition hash")
	}

	schema := readFile(t, "..", "compiler", "release", "testdata", "secrets.schema.yaml")
	resp, body = s.PostForm(t, c, "/validate", url.Values{"manifest": {schema}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Secret schema (selfhost/v1alpha1)") || !strings.Contains(body, ">db_password<") {
		t.Errorf("POST /validate secret schema = %d or lacks its summary", resp.StatusCode)
	}

	broken := strings.Replace(readFile(t, "..", "compiler", "recipe", "testdata", "recipe.toml"), "keep = 2", "keep = 1", 1)
	resp, body = s.PostForm(t, c, "/validate", url.Values{"manifest": {strings.ReplaceAll(broken, "\n", "\r\n")}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("POST /validate broken recipe = %d, want 422", resp.StatusCode)
	}
	for _, want := range []string{`data-kind="recipe"`, "Recipe (TOML)", "1 error", `href="#L54"`, "datasets[0].keep", `id="L54" class="source-line has-error"`} {
		if !strings.Contains(body, want) {
			t.Errorf("recipe page lacks %q", want)
		}
	}

	plan := readFile(t, "..", "compiler", "recipe", "testdata", "plan.toml")
	resp, body = s.PostForm(t, c, "/validate", url.Values{"manifest": {plan}, "kind": {"recipe"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `<option value="recipe" selected>`) {
		t.Errorf("a forced kind: got %d, or the choice is not kept", resp.StatusCode)
	}
	resp, body = s.PostForm(t, c, "/validate", url.Values{"manifest": {plan}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Valid plan") || !strings.Contains(body, "com.example.proxy:2.0.0") {
		t.Errorf("POST /validate plan = %d or lacks its summary", resp.StatusCode)
	}
}
