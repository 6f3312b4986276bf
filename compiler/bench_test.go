package compiler_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
	"go.yaml.in/yaml/v3"
)

// largeManifest generates a valid manifest with n applications, each with a
// route, probes, environment and a database reference.
func largeManifest(n int) []byte {
	var b strings.Builder
	b.WriteString("name: big-project\napplications:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `  app-%d:
    image: ghcr.io/acme/app-%d:1.0.0
    environment:
      DATABASE_URL: "{{databases.data.url}}"
      LOG_LEVEL: "${LOG_LEVEL:-info}"
      SECRET_%d: "${SECRET_%d}"
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: "app-%d.${BASE_DOMAIN}"
        port: http
        aliases: ["www.app-%d.${BASE_DOMAIN}"]
    health:
      readiness:
        http: {port: http, path: /healthz}
      liveness:
        http: {port: http, path: /healthz}
    resources:
      requests: {cpu: 0.25, memory: 256MB}
      limits: {cpu: 1, memory: 1GB}
    scaling:
      replicas: {min: 2, max: 4}
      autoscaling:
        cpu: {targetUtilization: 70}
`, i, i, i, i, i, i)
	}
	b.WriteString("databases:\n  data:\n    engine: postgres\n    version: 18\n")
	return []byte(b.String())
}

func benchInputs(b *testing.B) map[string][]byte {
	prod, err := os.ReadFile("testdata/production.skali.yaml")
	if err != nil {
		b.Fatal(err)
	}
	return map[string][]byte{"production": prod, "50-applications": largeManifest(50)}
}

// BenchmarkCompile measures the whole compile: parse, every check, the
// definition and its hash.
func BenchmarkCompile(b *testing.B) {
	for _, name := range []string{"production", "50-applications"} {
		src := benchInputs(b)[name]
		b.Run(name, func(b *testing.B) {
			if r := compiler.Compile(src); !r.Valid() {
				b.Fatalf("benchmark input invalid: %v", r.Diagnostics)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				compiler.Compile(src)
			}
		})
	}
}

// BenchmarkParseNode is the baseline: only yaml.Unmarshal of the same bytes
// into a yaml.Node.
func BenchmarkParseNode(b *testing.B) {
	for _, name := range []string{"production", "50-applications"} {
		src := benchInputs(b)[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				var n yaml.Node
				if err := yaml.Unmarshal(src, &n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCompileLargeMappings compiles largeMappings at two sizes: linear
// work shows as about three times the time per op at three times the size,
// quadratic work as nine.
func BenchmarkCompileLargeMappings(b *testing.B) {
	for _, n := range []int{1000, 3000} {
		src := largeMappings(n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				compiler.Compile(src)
			}
		})
	}
}

// BenchmarkCanonical measures the canonical encoding (encoding/json) that
// every compile hashes; compare it with BenchmarkCompile.
func BenchmarkCanonical(b *testing.B) {
	for _, name := range []string{"production", "50-applications"} {
		def := compiler.Compile(benchInputs(b)[name]).Definition
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				def.Canonical()
			}
		})
	}
}
