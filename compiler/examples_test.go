package compiler_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var examples = []string{"minimal", "two-applications", "production", "rest-of-surface"}

// TestReferenceExamples compiles the four example manifests of the
// reference ("A minimal manifest", "Two applications sharing a database",
// "A production-shaped manifest", "The rest of the surface") and compares
// their canonical definitions with golden files.
func TestReferenceExamples(t *testing.T) {
	for _, name := range examples {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", name+".skali.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			res := compiler.Compile(src)
			if !res.Valid() || len(res.Diagnostics) != 0 {
				t.Fatalf("got diagnostics, want none:\n%s", messages(res))
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, res.Definition.Canonical(), "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			golden := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Errorf("canonical definition differs from %s (run go test -update after checking):\ngot\n%s", golden, pretty.Bytes())
			}
			if !strings.HasPrefix(res.Hash, "sha256:") || len(res.Hash) != 7+64 {
				t.Errorf("hash: got %q, want sha256:<64 hex>", res.Hash)
			}
		})
	}
}

func TestValueContract(t *testing.T) {
	// "Requiredness derives from use: any ${NAME} reference without an inline
	// default makes the value required before deployment."
	src := `name: x
applications:
  web:
    image: "ghcr.io/acme/${NOT_A_VALUE}"
    command: ["${ALSO_LITERAL}"]
    environment:
      A: "${APP_DOMAIN}"
      B: "${LOG_LEVEL:-info}"
      C: "${REGION:-eu}"
      D: "x-${REGION}"
      E: "${EMPTY:-}"
    ports: {http: {port: 80}}
    routes:
      r: {domain: "${APP_DOMAIN}", port: http, aliases: ["www.${ALIAS_BASE:-example.com}"]}
buckets:
  files:
    route: {domain: "${STORAGE_DOMAIN}"}
`
	res := compiler.Compile([]byte(src))
	if !res.Valid() {
		t.Fatalf("unexpected diagnostics:\n%s", messages(res))
	}
	want := compiler.ValueContract{
		Required: []string{"APP_DOMAIN", "REGION", "STORAGE_DOMAIN"},
		Optional: map[string]string{"LOG_LEVEL": "info", "ALIAS_BASE": "example.com", "EMPTY": ""},
	}
	if !reflect.DeepEqual(res.Values, want) {
		t.Errorf("values: got %+v, want %+v", res.Values, want)
	}
	empty := compiler.Compile([]byte("name: x\nbuckets: {files: {}}\n"))
	if empty.Values.Required == nil || empty.Values.Optional == nil {
		t.Errorf("values: got nil slice or map, want empty ones: %+v", empty.Values)
	}
}

func TestExpandValues(t *testing.T) {
	cases := []struct {
		expr    string
		values  map[string]string
		want    string
		missing []string
	}{
		{"${APP_DOMAIN}", map[string]string{"APP_DOMAIN": "example.com"}, "example.com", nil},
		{"www.${APP_DOMAIN}", map[string]string{"APP_DOMAIN": "example.com"}, "www.example.com", nil},
		{"${LOG_LEVEL:-info}", nil, "info", nil},
		{"${LOG_LEVEL:-info}", map[string]string{"LOG_LEVEL": "debug"}, "debug", nil},
		{"${A}-${B}-${A}", map[string]string{}, "--", []string{"A", "B"}},
		{"no refs $HOME", nil, "no refs $HOME", nil},
	}
	for _, tc := range cases {
		got, missing := compiler.ExpandValues(tc.expr, tc.values)
		if got != tc.want || !reflect.DeepEqual(missing, tc.missing) {
			t.Errorf("ExpandValues(%q): got %q %v, want %q %v", tc.expr, got, missing, tc.want, tc.missing)
		}
	}
}

func mustCompile(t *testing.T, src string) *compiler.Result {
	t.Helper()
	res := compiler.Compile([]byte(src))
	if !res.Valid() {
		t.Fatalf("unexpected diagnostics:\n%s\n%s", messages(res), src)
	}
	return res
}

const hashBase = `# comment
name: shop
applications:
  web:
    image: ghcr.io/acme/web:1.0
    environment: {A: "1", B: "${APP_DOMAIN}"}
    ports:
      http: {port: 8080}
    routes:
      public: {domain: "${APP_DOMAIN}", port: http, aliases: ["www.${APP_DOMAIN}", "old.example.com"]}
    commands:
      seed: [bun, run, seed]
    dev:
      command: [bun, run, dev]
databases:
  data: {engine: postgres, version: 17, extensions: [vector, citext]}
buckets:
  files: {quotas: {storage: 1GB}}
`

// TestHashStability: "key order, comments, formatting and the client-only
// commands and dev blocks do not change it; any deployed change does."
func TestHashStability(t *testing.T) {
	base := mustCompile(t, hashBase).Hash
	same := map[string]string{
		"reordered and reformatted": `buckets:
  files:
    quotas:
      storage: 1000MB
databases:
  data:
    extensions: [citext, vector]
    version: "17"
    engine: postgres
applications:
  web:
    routes:
      public:
        aliases: ["old.example.com", "www.${APP_DOMAIN}"]
        port: http
        domain: "${APP_DOMAIN}"
    ports:
      http:
        port: 8080
    environment:
      B: "${APP_DOMAIN}"
      A: 1
    image: ghcr.io/acme/web:1.0
name: shop
`,
		"commands and dev changed": strings.Replace(strings.Replace(hashBase, "seed: [bun, run, seed]", "migrate: [bun, run, migrate]", 1), "[bun, run, dev]", "[npm, start]", 1),
		"defaults written explicitly": strings.Replace(strings.Replace(strings.Replace(hashBase, "files: {quotas: {storage: 1GB}}", "files:\n    quotas: {storage: 1GB}", 1), "port: http, aliases", "port: http, path: /, tls: automatic, strategy: round-robin, compress: true, aliases", 1),
			"{port: 8080}", "{port: 8080, protocol: http}", 1) + "    visibility: private\n    versioning: disabled\n    lifecycle: {abortIncompleteUploadsAfter: 1d}\n",
		"no client-only blocks": strings.Replace(hashBase, "    commands:\n      seed: [bun, run, seed]\n    dev:\n      command: [bun, run, dev]\n", "", 1),
	}
	for name, src := range same {
		if got := mustCompile(t, src).Hash; got != base {
			t.Errorf("%s: got hash %s, want %s", name, got, base)
		}
	}
	different := map[string][2]string{
		"image":         {"web:1.0", "web:1.1"},
		"env value":     {`A: "1"`, `A: "2"`},
		"port":          {"port: 8080}", "port: 8081}"},
		"tls":           {"port: http, aliases", "port: http, tls: optional, aliases"},
		"path":          {"port: http, aliases", "port: http, path: /api, aliases"},
		"alias":         {"old.example.com", "older.example.com"},
		"db version":    {"version: 17", "version: 18"},
		"extension":     {"[vector, citext]", "[vector]"},
		"bucket quota":  {"storage: 1GB", "storage: 2GB"},
		"description":   {"name: shop\n", "name: shop\ndescription: a shop\n"},
		"replicas":      {"    image: ghcr.io/acme/web:1.0\n", "    image: ghcr.io/acme/web:1.0\n    scaling: {replicas: {min: 2}}\n"},
		"domain case":   {`domain: "${APP_DOMAIN}"`, `domain: "app.${APP_DOMAIN}"`},
		"new bucket":    {"buckets:\n", "buckets:\n  more: {}\n"},
		"grace period":  {"    image: ghcr.io/acme/web:1.0\n", "    image: ghcr.io/acme/web:1.0\n    shutdown: {gracePeriod: 45s}\n"},
		"release hook":  {"    image: ghcr.io/acme/web:1.0\n", "    image: ghcr.io/acme/web:1.0\n    deployment: {releaseCommand: {command: [migrate]}}\n"},
		"probe":         {"    image: ghcr.io/acme/web:1.0\n", "    image: ghcr.io/acme/web:1.0\n    health: {readiness: {http: {port: http, path: /}}}\n"},
		"volume":        {"    image: ghcr.io/acme/web:1.0\n", "    image: ghcr.io/acme/web:1.0\n    volumes: {data: {mountPath: /data, size: 1GB}}\n"},
		"cors declared": {"files: {quotas: {storage: 1GB}}", "files: {quotas: {storage: 1GB}, cors: {allowedOrigins: ['*']}}"},
	}
	for name, r := range different {
		src := strings.Replace(hashBase, r[0], r[1], 1)
		if src == hashBase {
			t.Fatalf("%s: replacement %q not found", name, r[0])
		}
		if got := mustCompile(t, src).Hash; got == base {
			t.Errorf("%s: hash did not change", name)
		}
	}
}

func TestSummarize(t *testing.T) {
	a := mustCompile(t, hashBase).Definition
	if got := compiler.Summarize(nil, a); got != "first revision" {
		t.Errorf("got %q, want first revision", got)
	}
	b := mustCompile(t, strings.Replace(hashBase, "    dev:\n", "    dev:\n      ports: {http: 3000}\n", 1)).Definition
	if got := compiler.Summarize(a, b); got != "no deployed change" {
		t.Errorf("got %q, want no deployed change", got)
	}
	c := mustCompile(t, strings.Replace(strings.Replace(hashBase, "web:1.0", "web:2.0", 1), "  files: {quotas: {storage: 1GB}}\n", "  photos: {}\n", 1)).Definition
	want := "web: image changed; added bucket photos; removed bucket files"
	if got := compiler.Summarize(a, c); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestSecretsNeverQuoted: "Messages may quote a mistyped word ... but never the
// content of environment values or build arguments."
func TestSecretsNeverQuoted(t *testing.T) {
	src := `name: x
applications:
  web:
    build:
      context: .
      arguments: {TOKEN: [hunter2-secret]}
    environment:
      A: "sk_live_secret_${BROKEN"
      B: "sk_live_secret2 {{databases.none.url}}"
      C: "{{databases.sk_live_secret3.url}}"
      D: "${sk_live_secret4}"
`
	res := compiler.Compile([]byte(src))
	if len(res.Errors()) != 5 {
		t.Errorf("got %d errors, want 5:\n%s", len(res.Errors()), messages(res))
	}
	for _, d := range res.Diagnostics {
		if strings.Contains(d.Message, "secret") || strings.Contains(d.Message, "hunter2") {
			t.Errorf("message quotes a secret: %s", d)
		}
	}
}
