package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const validManifest = `name: shop
applications:
  web:
    image: nginx
    environment: {LOG_LEVEL: "${LOG_LEVEL:-info}"}
    ports: {http: {port: 80}}
    routes:
      public: {domain: "${APP_DOMAIN}", port: http}
`

const invalidManifest = `name: shop
applications:
  web:
    image: nginx
    ports: {http: {port: 80}}
    routes:
      public: {domain: "${APP_DOMAIN}", port: http, tls: automatc}
buckets:
  files: {visibility: public-read}
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestValidateText follows DESIGN.md: "Exit status: 0 all valid, 1 at least
// one invalid, 2 usage or I/O error. Text output is one line per diagnostic,
// FILE:LINE:COLUMN: error: PATH: MESSAGE (or warning:), then a summary."
func TestValidateText(t *testing.T) {
	t.Parallel()
	good := writeFile(t, "skali.yaml", validManifest)
	bad := writeFile(t, "skali.yml", invalidManifest)
	var out, errOut bytes.Buffer
	if code := runValidate([]string{good}, nil, &out, &errOut); code != 0 {
		t.Fatalf("valid file: got exit %d, want 0; stderr %s", code, errOut.String())
	}
	out.Reset()
	code := runValidate([]string{good, bad}, nil, &out, &errOut)
	if code != 1 {
		t.Fatalf("invalid file: got exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	wantPrefixes := []string{
		bad + ":7:58: error: applications.web.routes.public.tls: ",
		bad + ":9:23: warning: buckets.files.visibility: ",
		"2 files checked: 1 valid, 1 invalid; 1 error, 1 warning",
	}
	if len(lines) != len(wantPrefixes) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(wantPrefixes), out.String())
	}
	for i, p := range wantPrefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("line %d: got %q, want prefix %q", i, lines[i], p)
		}
	}
}

func TestValidateExitCodes(t *testing.T) {
	t.Parallel()
	good := writeFile(t, "skali.yaml", validManifest)
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"no files", nil, 2},
		{"unknown flag", []string{"--yaml", good}, 2},
		{"missing file", []string{filepath.Join(t.TempDir(), "nope.yaml")}, 2},
		{"missing file wins over valid", []string{good, "/nonexistent/skali.yaml"}, 2},
		{"json valid", []string{"--json", good}, 0},
	}
	for _, tc := range cases {
		var out, errOut bytes.Buffer
		if got := runValidate(tc.args, nil, &out, &errOut); got != tc.want {
			t.Errorf("%s: got exit %d, want %d (stderr %q)", tc.name, got, tc.want, errOut.String())
		}
	}
}

// TestValidateJSON checks the JSON shape: one array, an object per file with
// file, kind, valid, hash (only when valid), diagnostics (always an array)
// and values {required: [], optional: {}}.
func TestValidateJSON(t *testing.T) {
	t.Parallel()
	good := writeFile(t, "skali.yaml", validManifest)
	var out, errOut bytes.Buffer
	code := runValidate([]string{"--json", good, "-"}, strings.NewReader(invalidManifest), &out, &errOut)
	if code != 1 {
		t.Fatalf("got exit %d, want 1 (stderr %q)", code, errOut.String())
	}
	var got []map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, out.String())
	}
	if len(got) != 2 {
		t.Fatalf("got %d objects, want 2", len(got))
	}
	first, second := got[0], got[1]
	if first["file"] != good || first["kind"] != "skali" || first["valid"] != true {
		t.Errorf("first object: got %v", first)
	}
	if h, _ := first["hash"].(string); !strings.HasPrefix(h, "sha256:") {
		t.Errorf("valid file hash: got %v, want sha256:...", first["hash"])
	}
	if d, ok := first["diagnostics"].([]any); !ok || len(d) != 0 {
		t.Errorf("valid file diagnostics: got %#v, want []", first["diagnostics"])
	}
	values := first["values"].(map[string]any)
	if req := values["required"].([]any); len(req) != 1 || req[0] != "APP_DOMAIN" {
		t.Errorf("required: got %v, want [APP_DOMAIN]", req)
	}
	if opt := values["optional"].(map[string]any); opt["LOG_LEVEL"] != "info" {
		t.Errorf("optional: got %v, want LOG_LEVEL=info", opt)
	}
	if second["file"] != "-" || second["valid"] != false {
		t.Errorf("stdin object: got %v", second)
	}
	if _, ok := second["hash"]; ok {
		t.Errorf("invalid file has a hash: %v", second["hash"])
	}
	diags := second["diagnostics"].([]any)
	d0 := diags[0].(map[string]any)
	if d0["severity"] != "error" || d0["path"] != "applications.web.routes.public.tls" || d0["line"] != float64(7) || d0["column"] != float64(58) {
		t.Errorf("first diagnostic: got %v", d0)
	}
}

// TestValidateKinds: "studio validate --json reports it in kind (skali,
// release, release-secrets, recipe, plan), and --kind forces one"; other
// kinds omit hash and values.
func TestValidateKinds(t *testing.T) {
	t.Parallel()
	release := writeFile(t, "manifest.yaml", "api_version: selfhost/v1alpha1\nmetadata: {name: demo, version: 1.0.0}\nruntimes: {compose: {files: [compose.yaml]}}\n")
	schema := writeFile(t, "secrets.schema.yaml", "api_version: selfhost/v1alpha1\nsecrets:\n  - {name: k, owner: \"65532\"}\n")
	recipe := writeFile(t, "api.toml", "[metadata]\nname = \"api\"\nversion = \"1.0.0\"\n[[artifacts]]\nuri = \"https://x/a\"\n")
	plan := writeFile(t, "plan.toml", "[[components]]\nname = \"api\"\nrecipe = \"api.toml\"\n")
	var out, errOut bytes.Buffer
	code := runValidate([]string{"--json", release, schema, recipe, plan}, nil, &out, &errOut)
	if code != 1 {
		t.Fatalf("got exit %d, want 1 (stderr %q)", code, errOut.String())
	}
	var got []map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, out.String())
	}
	wantKinds := []string{"release", "release-secrets", "recipe", "plan"}
	wantValid := []bool{true, false, false, true}
	for i, obj := range got {
		if obj["kind"] != wantKinds[i] || obj["valid"] != wantValid[i] {
			t.Errorf("%s: got kind %v valid %v, want %s %v", obj["file"], obj["kind"], obj["valid"], wantKinds[i], wantValid[i])
		}
		if _, ok := obj["hash"]; ok {
			t.Errorf("%s: has a hash", obj["file"])
		}
		if _, ok := obj["values"]; ok {
			t.Errorf("%s: has values", obj["file"])
		}
	}
	if nc, _ := got[0]["not_checked"].([]any); len(nc) != 1 {
		t.Errorf("release not_checked: got %v, want the compose file", got[0]["not_checked"])
	}
	// The schema's owner needs 0.6.0 and the manifest declares nothing.
	d := got[1]["diagnostics"].([]any)[0].(map[string]any)
	if d["path"] != "secrets[0].owner" || d["line"] != float64(3) {
		t.Errorf("owner diagnostic: got %v", d)
	}
	d = got[2]["diagnostics"].([]any)[0].(map[string]any)
	if d["path"] != "artifacts[0].sha256" || d["line"] != float64(4) || d["column"] != float64(3) {
		t.Errorf("sha256 diagnostic: got %v", d)
	}

	out.Reset()
	if code := runValidate([]string{"--json", "--insecure-skip-verify", "--kind=recipe", recipe}, nil, &out, &errOut); code != 0 {
		t.Errorf("--insecure-skip-verify: got exit %d, want 0\n%s", code, out.String())
	}
	out.Reset()
	if code := runValidate([]string{"--kind", "plan", recipe}, nil, &out, &errOut); code != 1 {
		t.Errorf("--kind plan on a recipe: got exit %d, want 1", code)
	}
	if code := runValidate([]string{"--kind", "helm", recipe}, nil, &out, &errOut); code != 2 {
		t.Errorf("unknown kind: got exit %d, want 2", code)
	}
	if code := runValidate([]string{recipe, "--kind"}, nil, &out, &errOut); code != 2 {
		t.Errorf("--kind without a value: got exit %d, want 2", code)
	}
}

// TestValidateReferenceReleaseExamples: the complete example of the release
// manifest reference and its secret schema validate, as their kinds.
func TestValidateReferenceReleaseExamples(t *testing.T) {
	t.Parallel()
	manifest := filepath.Join("..", "..", "compiler", "release", "testdata", "manifest.yaml")
	schema := filepath.Join("..", "..", "compiler", "release", "testdata", "secrets.schema.yaml")
	var out, errOut bytes.Buffer
	if code := runValidate([]string{"--json", manifest, schema}, nil, &out, &errOut); code != 0 {
		t.Fatalf("got exit %d, want 0\n%s%s", code, out.String(), errOut.String())
	}
	var got []map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got[0]["kind"] != "release" || got[1]["kind"] != "release-secrets" {
		t.Errorf("kinds: got %v and %v", got[0]["kind"], got[1]["kind"])
	}
	for _, obj := range got {
		if d := obj["diagnostics"].([]any); len(d) != 0 {
			t.Errorf("%s: got diagnostics %v, want none", obj["file"], d)
		}
	}
}

// TestSchemaCommand: `studio schema --kind skali` prints the compiler's
// JSON Schema; another kind is a usage error that says what to do instead.
func TestSchemaCommand(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := run([]string{"schema", "--kind", "skali"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	props, _ := doc["properties"].(map[string]any)
	if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" || props["applications"] == nil {
		t.Errorf("schema = %.300s", out.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"schema", "--kind", "plan"}, nil, &out, &errOut); code != 2 || out.Len() != 0 || !strings.Contains(errOut.String(), "studio validate --kind plan") {
		t.Errorf("schema --kind plan: exit %d, out %q, err %q", code, out.String(), errOut.String())
	}
}
