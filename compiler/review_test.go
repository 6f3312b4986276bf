package compiler_test

import (
	"strings"
	"testing"
)

// Cases found by an adversarial review of the compiler against the
// reference; each cites the sentence it enforces.

func TestReviewUnitRules(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "fractional units are exact decimals", cite: "Durations: a number plus ms, s, m, h, d (24h), or w (7d). Byte quantities: decimal B, KB, MB, GB, TB",
			src: `
name: x
applications:
  web:
    image: nginx
    shutdown: {gracePeriod: 1.001s}
    resources:
      requests: {memory: 1.1KB, temporaryStorage: 4.35KB}
      limits: {memory: 0.7MB, temporaryStorage: 2.3GB}
`},
		{name: "fractions of a byte are refused", cite: "A quantity is a positive byte value such as 256MB",
			src: `
name: x
applications:
  web:
    image: nginx
    resources: {limits: {memory: 0.0001KB}}
`, want: []want{errAt("applications.web.resources.limits.memory", 5, 34)}},
		{name: "CPU trailing zeros keep at most three decimals", cite: "CPU: decimal cores with at most three decimals, such as 0.25 or 1.",
			src: `
name: x
applications:
  web:
    image: nginx
    resources:
      requests: {cpu: 0.2500}
      limits: {cpu: "1.0000"}
`},
		{name: "CPU with a fourth significant decimal", cite: "CPU: decimal cores with at most three decimals",
			src: `
name: x
applications:
  web:
    image: nginx
    resources: {requests: {cpu: 0.2501}}
`, want: []want{errAt("applications.web.resources.requests.cpu", 5, 33)}},
	})
}

func TestReviewRouteRules(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "routes and probes cannot target a udp port", cite: "A udp port is exposed over UDP ... Routes publish HTTP traffic, not arbitrary public TCP/UDP listeners. Probes are HTTP only.",
			src: `
name: x
applications:
  web:
    image: nginx
    ports:
      dns: {port: 53, protocol: udp}
      raw: {port: 9000, protocol: tcp}
    routes:
      a: {domain: a.example.com, port: dns}
      b: {domain: b.example.com, port: raw}
    health:
      liveness:
        http: {port: dns, path: /}
`, want: []want{errAt("applications.web.routes.a.port", 9, 40), errAt("applications.web.health.liveness.http.port", 13, 22)}},
		{name: "an invalid path is not also a duplicate of /", cite: "applications.*.routes.*.path ... must start with /",
			src: `
name: x
applications:
  web:
    image: nginx
    routes:
      a: {domain: a.example.com, port: 80}
      b: {domain: a.example.com, port: 80, path: api}
      c: {domain: a.example.com, port: 80, path: "/x?y"}
`, want: []want{errAt("applications.web.routes.b.path", 7, 50), errAt("applications.web.routes.c.path", 8, 50)}},
		{name: "domains compare case-insensitively", cite: "Each route's domain and path pair must be unique across the whole project",
			src: `
name: x
applications:
  web:
    image: nginx
    routes:
      a: {domain: A.Example.com, port: 80, path: /api/}
  api:
    image: nginx
    routes:
      a: {domain: a.example.COM, port: 80, path: /api}
`, want: []want{errAt("applications.api.routes.a.domain", 10, 19)}},
	})
}

func TestReviewScalingAndRollout(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "missing targetUtilization is at the scaling key", cite: "max > min requires a target utilization",
			src: `
name: x
applications:
  web:
    image: nginx
    scaling:
      replicas:
        min: 1
        max: 3
`, want: []want{errAt("applications.web.scaling.autoscaling.cpu.targetUtilization", 5, 5)}},
		{name: "a strategy refused for volumes is the only error", cite: "recreate: ... Required and default for applications with volumes:; the other two strategies are rejected there.",
			src: `
name: x
applications:
  web:
    image: nginx
    volumes:
      v: {mountPath: /data, size: 1GB}
    deployment:
      rollout: {strategy: rolling, maxSurge: 1}
`, want: []want{errAt("applications.web.deployment.rollout.strategy", 8, 27)}},
	})
}

// TestReviewHashEquality: spellings of the same deployment share a hash.
func TestReviewHashEquality(t *testing.T) {
	base := mustCompile(t, `
name: x
applications:
  web:
    build: {context: ., dockerfile: Dockerfile}
    ports: {http: {port: 80}}
    routes:
      r: {domain: www.example.com, port: http}
    resources: {requests: {cpu: 0.25, memory: 1GB}}
    shutdown: {gracePeriod: 90s}
buckets:
  b: {route: {domain: files.example.com}}
`).Hash
	same := []string{`
name: x
applications:
  web:
    build: {context: ./, dockerfile: ./Dockerfile}
    ports: {http: {port: 80}}
    routes:
      r: {domain: WWW.Example.com, port: http}
    resources: {requests: {cpu: "0.2500", memory: 1000MB}}
    shutdown: {gracePeriod: 1.5m}
buckets:
  b: {route: {domain: Files.Example.COM}}
`}
	for _, src := range same {
		if got := mustCompile(t, src).Hash; got != base {
			t.Errorf("got hash %s, want %s for\n%s", got, base, src)
		}
	}
	// Value names keep their case: ${A} and ${a} are not the same expression.
	res := mustCompile(t, "name: x\napplications:\n  web:\n    image: nginx\n    routes:\n      r: {domain: \"WWW.${APP_DOMAIN}\", port: 80}\n")
	if d := res.Definition.Applications["web"].Routes["r"].Domain; d != "www.${APP_DOMAIN}" {
		t.Errorf("domain: got %q, want www.${APP_DOMAIN}", d)
	}
	if strings.Join(res.Values.Required, ",") != "APP_DOMAIN" {
		t.Errorf("required: got %v", res.Values.Required)
	}
}

func TestReviewScalarValues(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "dates and other plain scalars are text in build arguments and environment", cite: "applications.*.build.arguments Map of build-argument names to string, number, or boolean scalars, converted to strings.",
			src: `
name: x
applications:
  web:
    build:
      context: .
      arguments: {RELEASED: 2024-01-01, N: 0x10, ON: yes}
    environment: {RELEASED: 2024-01-01, N: 1e3, B: false}
`},
		{name: "tagged values are not plain scalars", cite: "Null, lists, and objects are invalid values.",
			src: `
name: x
applications:
  web:
    image: nginx
    environment:
      A: !secret value
      B: ~
`, want: []want{errAt("applications.web.environment.A", 6, 10), errAt("applications.web.environment.B", 7, 10)}},
	})
}

func TestReviewDocumentsAndPorts(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "a stray trailing document marker is not a second manifest", cite: "multi-document input refused (issue 3); the file is one manifest",
			src: `
name: x
applications:
  web: {image: nginx}
---
`},
		{name: "a second document with content is refused", cite: "multi-document input refused (issue 3)",
			src: `
name: x
applications:
  web: {image: nginx}
---
name: y
`, want: []want{errAt("", 4, 1)}},
		{name: "a numeric string port is decimal", cite: "routes.*.port Required named port from this application or integer/numeric string in 1–65535",
			src: `
name: x
applications:
  web:
    image: nginx
    routes: {r: {domain: a.example.com, port: "08080"}}
`},
	})
}

func TestReviewInvalidServiceKeyReportedOnce(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "a reference to an invalid service key is not a second error", cite: "Keys in service ... collections are stable identifiers matching ^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$",
			src: `
name: x
applications:
  web:
    image: nginx
    environment: {U: "{{databases.Data.url}}"}
databases:
  Data: {engine: postgres, version: 17}
`, want: []want{errAt("databases.Data", 7, 3)}},
	})
}

func TestProblemsWithABlockValuePointAtItsKey(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "image and build together: at the build key", cite: "applications.*.image: exactly one of nonempty image or build is required (DESIGN.md: a missing required key is reported at the line of its parent; a field's block value is reported where the field is named)",
			src: `
name: x
applications:
  web:
    image: nginx
    build:
      context: .
`, want: []want{errAt("applications.web.build", 5, 5)}},
		{name: "a list as an environment value: at its name", cite: "applications.*.environment: Null, lists, and objects are invalid values.",
			src: `
name: x
applications:
  web:
    image: nginx
    environment:
      LIST:
        - a
`, want: []want{errAt("applications.web.environment.LIST", 6, 7)}},
		{name: "a build argument whose name has a dot: at its name", cite: "applications.*.build.arguments Map of build-argument names to string, number, or boolean scalars (DESIGN.md: a field's block value is reported where the field is named)",
			src: `
name: x
applications:
  web:
    build:
      context: .
      arguments:
        "A.B":
          x: 1
        C.D.E:
          - x
`, want: []want{errAt("applications.web.build.arguments.A.B", 7, 9), errAt("applications.web.build.arguments.C.D.E", 9, 9)}},
		{name: "a flow value keeps its own position", cite: "applications.*.environment: Null, lists, and objects are invalid values.",
			src: `
name: x
applications:
  web:
    image: nginx
    environment: {LIST: [a]}
`, want: []want{errAt("applications.web.environment.LIST", 5, 25)}},
	})
}
