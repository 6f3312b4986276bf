package compiler_test

import (
	"strings"
	"testing"
)

func TestTopLevelRules(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "name required", cite: "name: my-project # required",
			src: `
applications:
  web: {image: nginx}
`, want: []want{errAt("name", 1, 1)}, contains: "missing required field `name`"},
		{name: "root key missing after leading comments is at the first key", cite: "name: my-project # required",
			src: `
# my project
applications:
  web: {image: nginx}
`, want: []want{errAt("name", 2, 1)}, contains: "missing required field `name`"},
		{name: "missing key is at the parent's key, also through an alias", cite: "ports.*.port Required integer",
			src: `
name: x
applications:
  a:
    image: nginx
    ports:
      http: &p {protocol: tcp}
  b:
    image: nginx
    ports:
      web: *p
`, want: []want{errAt("applications.a.ports.http.port", 6, 7), errAt("applications.b.ports.web.port", 10, 7)}, contains: "missing required field `port`"},
		{name: "missing key is at the parent's key, also through a merge", cite: "ports.*.port Required integer",
			src: `
name: x
applications:
  a:
    <<: {image: nginx, ports: {http: {protocol: tcp}}}
`, want: []want{errAt("applications.a.ports.http.port", 4, 32)}, contains: "missing required field `port`"},
		{name: "name shape", cite: "name ... matches ^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$",
			src: `
name: My_Project
applications:
  web: {image: nginx}
`, want: []want{errAt("name", 1, 7)}},
		{name: "at least one service", cite: "At least one application, database, or bucket must be declared.",
			src: `
name: empty
`, want: []want{errAt("", 1, 1)}},
		{name: "unknown top-level field suggests", cite: "Parsing is strict: unknown fields are rejected with file, line, column, and the field's path.",
			src: `
name: x
aplications: {}
databases:
  data: {engine: postgres, version: 17}
`, want: []want{errAt("aplications", 2, 1)}, contains: "did you mean `applications`?"},
		{name: "removed version", cite: "Revision 1: removed version ... run skali manifest upgrade to remove the obsolete version field",
			src: `
version: 2
name: x
applications:
  web: {image: nginx}
`, want: []want{errAt("version", 1, 1)}, contains: "skali manifest upgrade"},
		{name: "removed backups", cite: "Revision 4: removed backups ... skali backup schedule set",
			src: `
name: x
applications:
  web: {image: nginx}
backups:
  daily: {}
`, want: []want{errAt("backups", 4, 1)}, contains: "skali backup schedule set"},
		{name: "removed skali watermark", cite: "Revision 5: removed skali ... run skali manifest upgrade to remove it",
			src: `
name: x
skali: v0.1.0
applications:
  web: {image: nginx}
`, want: []want{errAt("skali", 2, 1)}, contains: "watermark"},
		{name: "duplicate key at second occurrence", cite: "Parsing is strict",
			src: `
name: x
applications:
  web: {image: nginx}
  web: {image: redis}
`, want: []want{errAt("applications.web", 4, 3)}, contains: "duplicate key"},
		{name: "service key shape", cite: "Keys in service, port, route, volume, and named-command collections are stable identifiers matching ^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$.",
			src: `
name: x
applications:
  Web: {image: nginx}
`, want: []want{errAt("applications.Web", 3, 3)}},
		{name: "unknown field deep with suggestion", cite: "unknown fields are rejected with file, line, column, and the field's path",
			src: `
name: x
applications:
  web:
    image: nginx
    ports:
      http: {port: 80}
    routes:
      public:
        domian: example.com
        port: http
`, want: []want{errAt("applications.web.routes.public.domain", 8, 7), errAt("applications.web.routes.public.domian", 9, 9)}, contains: "missing required field `domain`"},
	})
}

func TestApplicationSourceRules(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "image xor build: neither", cite: "exactly one of nonempty image or build is required",
			src: `
name: x
applications:
  web:
    command: [run]
`, want: []want{errAt("applications.web.image", 3, 3)}},
		{name: "image xor build: both", cite: "build ... mutually exclusive with image",
			src: `
name: x
applications:
  web:
    image: nginx
    build: {context: .}
`, want: []want{errAt("applications.web.build", 5, 12)}},
		{name: "empty image", cite: "exactly one of nonempty image or build is required",
			src: `
name: x
applications:
  web:
    image: ""
`, want: []want{errAt("applications.web.image", 4, 12)}},
		{name: "build requires context", cite: "applications.*.build.context Required string when using build",
			src: `
name: x
applications:
  web:
    build: {target: runtime}
`, want: []want{errAt("applications.web.build.context", 4, 5)}},
		{name: "absolute context", cite: "Build contexts may not be absolute paths and may not escape the project root.",
			src: `
name: x
applications:
  web:
    build: {context: /srv/app}
`, want: []want{errAt("applications.web.build.context", 4, 22)}},
		{name: "escaping context", cite: "Build contexts may not be absolute paths and may not escape the project root.",
			src: `
name: x
applications:
  web:
    build: {context: web/../../other}
`, want: []want{errAt("applications.web.build.context", 4, 22)}},
		{name: "dockerfile may leave context but not root", cite: "The dockerfile ... may step outside it with .., but never outside the project root",
			src: `
name: x
applications:
  web:
    build: {context: web, dockerfile: ../deploy/Dockerfile}
  api:
    build: {context: api, dockerfile: ../../Dockerfile}
`, want: []want{errAt("applications.api.build.dockerfile", 6, 39)}},
		{name: "platforms enum and duplicates", cite: "Allowed values are linux/amd64 and linux/arm64, without duplicates.",
			src: `
name: x
applications:
  web:
    image: nginx
    platforms: [linux/arm64, linux/arm64, linux/386]
`, want: []want{errAt("applications.web.platforms[1]", 5, 30), errAt("applications.web.platforms[2]", 5, 43)}},
		{name: "environment names and values", cite: "Names match ^[A-Za-z_][A-Za-z0-9_]*$. ... Null, lists, and objects are invalid values.",
			src: `
name: x
applications:
  web:
    image: nginx
    environment:
      GOOD: 1
      ALSO_GOOD: true
      9BAD: x
      NULL_VALUE:
      LIST: [a]
      MAP: {a: b}
`, want: []want{errAt("applications.web.environment.9BAD", 8, 7), errAt("applications.web.environment.NULL_VALUE", 9, 18), errAt("applications.web.environment.LIST", 10, 13), errAt("applications.web.environment.MAP", 11, 12)}},
		{name: "command must be argv", cite: "applications.*.command Argv array",
			src: `
name: x
applications:
  web:
    image: nginx
    command: /app/web serve
`, want: []want{errAt("applications.web.command", 5, 14)}},
	})
}

// imageCase is a manifest whose one application uses image, written as a
// double-quoted YAML scalar at line 4, column 12.
func imageCase(name, cite, image string, want []want, contains string) ruleCase {
	return ruleCase{name: name, cite: cite, src: `
name: x
applications:
  web:
    image: "` + image + `"
`, want: want, contains: contains}
}

func TestImageReferenceRules(t *testing.T) {
	const (
		ref     = "applications.*.image OCI image reference; exactly one of nonempty image or build is required. Imported into the managed registry and pinned by digest"
		literal = "applications.*.image ... literal, with no interpolation. (Other deployed string fields are literal: image, ... A ${...} there passes through verbatim)"
		hex64   = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	)
	bad := []want{errAt("applications.web.image", 4, 12)}
	var cases []ruleCase
	for _, img := range []string{
		"nginx",
		"nginx:1.27",
		"library/nginx:latest",
		"ghcr.io/acme/app:v1.2.3",
		"localhost:5000/app",
		"localhost",
		"localhost:5000",
		"registry.example.com:443/team/app@sha256:" + hex64,
		"app:v1@sha256:" + hex64,
		"app@sha512:" + hex64 + hex64,
		"app@blake3:Q2xvdWQ=_-x",
		"[::1]:5000/app",
		"[2001:db8::1]/team/app:v1",
		"Registry.Example.com/app",
		"my-registry/app",
		"a/b/c/d:_tag",
		"my_team/app__x.y---z:1.0-rc_1",
		"ghcr.io/acme/app:" + strings.Repeat("t", 128),
		strings.Repeat("a", 255),
	} {
		cases = append(cases, imageCase("valid: "+clipName(img), ref, img, nil, ""))
	}
	for _, c := range []struct{ image, contains string }{
		{"Nginx:1", "repository names are lowercase: `Nginx`"},
		{"ghcr.io/Acme/app", "repository names are lowercase: `Acme`"},
		{"Acme/app", "repository names are lowercase: `Acme`"},
		{"nginx:", "the tag after `:` is empty"},
		{"nginx::1", "`:` is not allowed in tag `:1`"},
		{"nginx:.1", "tag `.1` must start with a letter, digit or `_`"},
		{"nginx:1+x", "`+` is not allowed in tag `1+x`"},
		{"nginx:" + strings.Repeat("t", 129), "at most 128"},
		{"-nginx", "repository name `-nginx` must start and end with a lowercase letter or digit"},
		{"nginx-", "must start and end with a lowercase letter or digit"},
		{"acme/-app", "repository name `-app` must start"},
		{"a._b", "separator `._`"},
		{"a___b", "separator `___`"},
		{"ngin!x", "`!` is not allowed in repository name `ngin!x`"},
		{"acme/café", "`é` is not allowed in repository name `café`"},
		{"/app", "must not start with `/`"},
		{"ghcr.io/acme/", "must not end with `/`"},
		{"ghcr.io//app", "empty part between slashes"},
		{":latest", "the repository name before `:` is empty"},
		{"@sha256:" + hex64, "the repository name before `@` is empty"},
		{"ghcr.io/acme/app@sha256:abc", "a sha256 digest has 64 hex digits; `abc` has 3"},
		{"app@sha256:" + strings.ToUpper(hex64), "a sha256 digest is lowercase hex"},
		{"app@sha512:" + hex64, "a sha512 digest has 128 hex digits"},
		{"app@", "the digest after `@` is empty"},
		{"app@" + hex64, "must be `algorithm:encoded`"},
		{"app@:" + hex64, "the digest algorithm before `:` is empty"},
		{"app@SHA256:" + hex64, "digest algorithm `SHA256`"},
		{"app@sha256:", "the digest after `sha256:` is empty"},
		{"app@sha256:" + hex64 + "@sha256:" + hex64, "`@` may appear only once"},
		{"app@x:a/b", "`/` is not allowed in digest"},
		{"ghcr.io:/app", "the port after `:` in registry host `ghcr.io:` is empty"},
		{"ghcr.io:44x/app", "port `44x` of registry host `ghcr.io` must be a number"},
		{"ghcr-.io/app", "`ghcr-` must start and end with a letter or digit"},
		{"ghcr..io/app", "empty part between dots"},
		{"[::1]:5000", "must be followed by `/` and a repository path"},
		{"[::1/app", "does not close it with `]`"},
		{"[1:2]/app", "`[1:2]` is not an IPv6 address"},
		{"[::1]x/app", "continues after `]`"},
		{strings.Repeat("a", 256), "256 characters; at most 255"},
	} {
		cases = append(cases, imageCase("invalid: "+clipName(c.image), ref, c.image, bad, c.contains))
	}
	for _, img := range []string{"ghcr.io/acme/web:${TAG}", "${IMAGE}", "Acme/${X:-y}::"} {
		cases = append(cases, imageCase("expression is literal, warned, not checked: "+img, literal, img,
			[]want{warnAt("applications.web.image", 4, 12)}, "image is literal, with no interpolation: `${"))
	}
	cases = append(cases, imageCase("whitespace is an error before the expression warning", ref, "app:${TAG} x", bad, "whitespace"))
	runRules(t, cases)
}

func clipName(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func TestPortAndRouteRules(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "port range and protocol", cite: "port: 8080 # required, 1 to 65535; protocol: http # http | https | tcp | udp",
			src: `
name: x
applications:
  web:
    image: nginx
    ports:
      a: {port: 0}
      b: {port: 65536, protocol: sctp}
      c: {protocol: tcp}
`, want: []want{errAt("applications.web.ports.a.port", 6, 17), errAt("applications.web.ports.b.port", 7, 17), errAt("applications.web.ports.b.protocol", 7, 34), errAt("applications.web.ports.c.port", 8, 7)}},
		{name: "tls enum quotes the word", cite: "tls: automatic # automatic | optional | disabled",
			src: `
name: x
applications:
  web:
    image: nginx
    ports: {http: {port: 80}}
    routes:
      public: {domain: example.com, port: http, tls: automatc}
`, want: []want{errAt("applications.web.routes.public.tls", 7, 54)}, contains: "`automatc` is not allowed; expected `automatic`, `optional` or `disabled`"},
		{name: "strategy and compress", cite: "strategy: round-robin # round-robin | least-requests; compress: true # true | false",
			src: `
name: x
applications:
  web:
    image: nginx
    ports: {http: {port: 80}}
    routes:
      public: {domain: example.com, port: http, strategy: random, compress: "yes"}
`, want: []want{errAt("applications.web.routes.public.strategy", 7, 59), errAt("applications.web.routes.public.compress", 7, 77)}},
		{name: "route port must exist or be numeric", cite: "port: http # named port from this app, or a number",
			src: `
name: x
applications:
  web:
    image: nginx
    ports: {http: {port: 80}}
    routes:
      a: {domain: a.example.com, port: web}
      b: {domain: b.example.com, port: "8080"}
      c: {domain: c.example.com, port: 99999}
      d: {domain: d.example.com}
`, want: []want{errAt("applications.web.routes.a.port", 7, 40), errAt("applications.web.routes.c.port", 9, 40), errAt("applications.web.routes.d.port", 10, 7)}},
		{name: "domain shape", cite: "Required nonempty hostname string; no scheme, path, port, or wildcard.",
			src: `
name: x
applications:
  web:
    image: nginx
    ports: {http: {port: 80}}
    routes:
      a: {domain: "https://a.example.com", port: http}
      b: {domain: "b.example.com/x", port: http}
      c: {domain: "c.example.com:8443", port: http}
      d: {domain: "*.example.com", port: http}
      e: {domain: "", port: http}
      f: {domain: "www.${BASE_DOMAIN}", port: http}
      g: {domain: "${HOST:-localhost}:80", port: http}
`, want: []want{errAt("applications.web.routes.a.domain", 7, 19), errAt("applications.web.routes.b.domain", 8, 19), errAt("applications.web.routes.c.domain", 9, 19), errAt("applications.web.routes.d.domain", 10, 19), errAt("applications.web.routes.e.domain", 11, 19), errAt("applications.web.routes.g.domain", 13, 19)}},
		{name: "route path shape", cite: "Literal path prefix beginning with / ... Queries, fragments, and control characters are invalid; the edge reserves its ACME and identity endpoints.",
			src: `
name: x
applications:
  web:
    image: nginx
    ports: {http: {port: 80}}
    routes:
      a: {domain: a.example.com, path: api, port: http}
      b: {domain: b.example.com, path: "/api?x=1", port: http}
      c: {domain: c.example.com, path: "/api#top", port: http}
      d: {domain: d.example.com, path: "/.well-known/acme-challenge/", port: http}
      e: {domain: e.example.com, path: "/.well-known/skali-edge", port: http}
      f: {domain: f.example.com, path: "/a\tb", port: http}
`, want: []want{errAt("applications.web.routes.a.path", 7, 40), errAt("applications.web.routes.b.path", 8, 40), errAt("applications.web.routes.c.path", 9, 40), errAt("applications.web.routes.d.path", 10, 40), errAt("applications.web.routes.e.path", 11, 40), errAt("applications.web.routes.f.path", 12, 40)}},
		{name: "domain and path unique after cleaning", cite: "Each route's domain and path pair must be unique across the whole project; ... Dot segments, repeated slashes, and trailing slashes are cleaned before matching and duplicate checking.",
			src: `
name: x
applications:
  web:
    image: nginx
    ports: {http: {port: 80}}
    routes:
      a: {domain: "${APP_DOMAIN}", path: /api, port: http}
  api:
    image: nginx
    ports: {http: {port: 80}}
    routes:
      b: {domain: "${app_domain}", path: "//api/v1/../", port: http}
      c: {domain: "${APP_DOMAIN}", path: /other, port: http}
`, want: []want{errAt("applications.api.routes.b.domain", 12, 19)}},
		{name: "aliases unique and not route domains", cite: "A hostname is either a route domain or an alias, project-wide: it cannot also be a route's domain on any path, a bucket route, or another route's alias.",
			src: `
name: x
applications:
  web:
    image: nginx
    ports: {http: {port: 80}}
    routes:
      a: {domain: "${APP_DOMAIN}", port: http, aliases: ["www.${APP_DOMAIN}", "${APP_DOMAIN}", "files.example.com"]}
      b: {domain: "other.example.com", port: http, aliases: ["WWW.${APP_DOMAIN}"]}
buckets:
  files:
    route: {domain: files.example.com}
`, want: []want{errAt("applications.web.routes.a.aliases[1]", 7, 79), errAt("applications.web.routes.a.aliases[2]", 7, 96), errAt("applications.web.routes.b.aliases[0]", 8, 62)}},
		{name: "bucket route domain vs application domain", cite: "May be shared by buckets in one environment, but not with application domains or aliases.",
			src: `
name: x
applications:
  web:
    image: nginx
    ports: {http: {port: 80}}
    routes:
      a: {domain: "${APP_DOMAIN}", port: http}
buckets:
  one:
    route: {domain: "${STORAGE_DOMAIN}"}
  two:
    route: {domain: "${STORAGE_DOMAIN}", tls: optional}
  three:
    route: {domain: "${APP_DOMAIN}"}
`, want: []want{errAt("buckets.three.route.domain", 14, 21)}},
		{name: "bucket route takes only domain and tls", cite: "No route path, aliases, compression, or strategy keys are supported here.",
			src: `
name: x
buckets:
  files:
    route: {domain: files.example.com, path: /files}
`, want: []want{errAt("buckets.files.route.path", 4, 40)}},
	})
}

func TestHealthResourcesScalingRules(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "probe requires http with port and path", cite: "HTTP check object, required for a declared startup probe ... Required literal HTTP path starting with /; no default.",
			src: `
name: x
applications:
  web:
    image: nginx
    ports: {http: {port: 80}}
    health:
      startup: {interval: 5s}
      readiness:
        http: {port: http, path: healthz}
      liveness:
        http: {port: 8080}
`, want: []want{errAt("applications.web.health.startup.http", 7, 7), errAt("applications.web.health.readiness.http.path", 9, 34), errAt("applications.web.health.liveness.http.path", 11, 9)}},
		{name: "probe durations and thresholds", cite: "failureThreshold ... Use a positive value; Durations: a number plus ms, s, m, h, d (24h), or w (7d).",
			src: `
name: x
applications:
  web:
    image: nginx
    health:
      readiness:
        http: {port: 80, path: /}
        interval: 10
        timeout: 5sec
        failureThreshold: 0
`, want: []want{errAt("applications.web.health.readiness.interval", 8, 19), errAt("applications.web.health.readiness.timeout", 9, 18), errAt("applications.web.health.readiness.failureThreshold", 10, 27)}},
		{name: "cpu and byte units", cite: "CPU: decimal cores with at most three decimals ... Bare suffixes like 1G are invalid; write 1GB or 1GiB.",
			src: `
name: x
applications:
  web:
    image: nginx
    resources:
      requests: {cpu: 0.0001, memory: 1G, temporaryStorage: 512MiB}
      limits: {cpu: "1.5", memory: 2GiB, temporaryStorage: -1GB}
`, want: []want{errAt("applications.web.resources.requests.cpu", 6, 23), errAt("applications.web.resources.requests.memory", 6, 39), errAt("applications.web.resources.limits.temporaryStorage", 7, 60)}},
		{name: "request above limit", cite: "Each request must not exceed its corresponding declared limit.",
			src: `
name: x
applications:
  web:
    image: nginx
    resources:
      requests: {cpu: 2, memory: 2GB}
      limits: {cpu: 1, memory: 1.5GiB}
`, want: []want{errAt("applications.web.resources.requests.cpu", 6, 23), errAt("applications.web.resources.requests.memory", 6, 34)}},
		{name: "replicas min and max", cite: "min ... use at least 1; max ... must be at least min",
			src: `
name: x
applications:
  a:
    image: nginx
    scaling: {replicas: {min: 0}}
  b:
    image: nginx
    scaling: {replicas: {min: 3, max: 2}}
`, want: []want{errAt("applications.a.scaling.replicas.min", 5, 31), errAt("applications.b.scaling.replicas.max", 8, 39)}},
		{name: "autoscaling with range, both ways", cite: "Autoscaling requires max > min, and max > min requires a target utilization; the two are declared together or not at all.",
			src: `
name: x
applications:
  a:
    image: nginx
    scaling:
      replicas: {min: 1, max: 3}
  b:
    image: nginx
    resources: {requests: {cpu: 1}}
    scaling:
      replicas: {min: 2}
      autoscaling: {cpu: {targetUtilization: 50}}
  c:
    image: nginx
    resources: {requests: {cpu: 1}}
    scaling:
      replicas: {min: 2, max: 4}
      autoscaling: {cpu: {targetUtilization: 101}}
`, want: []want{errAt("applications.a.scaling.autoscaling.cpu.targetUtilization", 5, 5), errAt("applications.b.scaling.autoscaling.cpu.targetUtilization", 12, 46), errAt("applications.c.scaling.autoscaling.cpu.targetUtilization", 18, 46)}},
		{name: "placement enums", cite: "across: nodes | zones; minimum Nonnegative integer; enforcement: preferred | required",
			src: `
name: x
applications:
  web:
    image: nginx
    placement:
      spread: {across: racks, minimum: -1, enforcement: strict}
`, want: []want{errAt("applications.web.placement.spread.across", 6, 24), errAt("applications.web.placement.spread.minimum", 6, 40), errAt("applications.web.placement.spread.enforcement", 6, 57)}},
	})
}

func TestDeploymentAndVolumeRules(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "maxSurge only with rolling", cite: "maxUnavailable and maxSurge are errors under any other strategy.",
			src: `
name: x
applications:
  a:
    image: nginx
    deployment:
      rollout: {maxSurge: 0}
  b:
    image: nginx
    deployment:
      rollout: {strategy: recreate, maxUnavailable: 1}
`, want: []want{errAt("applications.a.deployment.rollout.maxSurge", 6, 27), errAt("applications.b.deployment.rollout.maxUnavailable", 10, 53)}},
		{name: "rolling cannot have both zero", cite: "rolling: replicas are replaced a few at a time within maxUnavailable and maxSurge (default 1), which cannot both be zero.",
			src: `
name: x
applications:
  a:
    image: nginx
    deployment:
      rollout: {strategy: rolling, maxSurge: 0}
`, want: []want{errAt("applications.a.deployment.rollout.maxSurge", 6, 46)}},
		{name: "both zero is reported at maxUnavailable", cite: "applications.*.deployment.rollout.maxUnavailable ... Cannot be zero together with maxSurge.",
			src: `
name: x
applications:
  a:
    image: nginx
    deployment:
      rollout:
        strategy: rolling
        maxSurge: 0
        maxUnavailable: 0
`, want: []want{errAt("applications.a.deployment.rollout.maxUnavailable", 9, 25)}},
		{name: "strategy enum", cite: "strategy: blue-green # blue-green | rolling | recreate",
			src: `
name: x
applications:
  a:
    image: nginx
    deployment:
      rollout: {strategy: canary}
`, want: []want{errAt("applications.a.deployment.rollout.strategy", 6, 27)}},
		{name: "volumes need recreate and one replica", cite: "Required and default for applications with volumes:; the other two strategies are rejected there. ... Volumes require one replica.",
			src: `
name: x
applications:
  a:
    image: nginx
    volumes:
      data: {mountPath: /data, size: 1GB}
    deployment:
      rollout: {strategy: rolling}
    scaling:
      replicas: {min: 2}
`, want: []want{errAt("applications.a.deployment.rollout.strategy", 8, 27), errAt("applications.a.scaling.replicas.min", 10, 23)}},
		{name: "volume fields", cite: "mountPath Required absolute container path ... size Required positive byte quantity.",
			src: `
name: x
applications:
  a:
    image: nginx
    volumes:
      data: {mountPath: data, size: 0MB}
      logs: {size: 1GB}
      Cache: {mountPath: /c, size: 1GB}
`, want: []want{errAt("applications.a.volumes.data.mountPath", 6, 25), errAt("applications.a.volumes.data.size", 6, 37), errAt("applications.a.volumes.logs.mountPath", 7, 7), errAt("applications.a.volumes.Cache", 8, 7)}},
		{name: "commands and dev are validated", cite: "applications.*.dev ... requires command ... still validated; dev.ports Map of declared application port names to integer host ports in 1–65535",
			src: `
name: x
applications:
  a:
    image: nginx
    ports: {http: {port: 80}}
    commands:
      seed: []
      Migrate: [run]
    dev:
      ports: {http: 70000, web: 3000}
`, want: []want{errAt("applications.a.commands.seed", 7, 13), errAt("applications.a.commands.Migrate", 8, 7), errAt("applications.a.dev.command", 9, 5), errAt("applications.a.dev.ports.http", 10, 21), errAt("applications.a.dev.ports.web", 10, 28)}},
	})
}

func TestDatabaseAndBucketRules(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "engine, version, enums", cite: "engine Required string; only postgres is supported. version Required major number or string; supported values are 17 and 18.",
			src: `
name: x
databases:
  a: {engine: mysql, version: 16, isolation: private, availability: high}
  b: {engine: postgres, version: "18"}
  c: {}
`, want: []want{errAt("databases.a.engine", 3, 15), errAt("databases.a.version", 3, 31), errAt("databases.a.isolation", 3, 46), errAt("databases.a.availability", 3, 69), errAt("databases.c.engine", 5, 3), errAt("databases.c.version", 5, 3)}},
		{name: "extensions catalog and duplicates", cite: "unknown names and duplicates fail validation ... postgis is not supported yet",
			src: `
name: x
databases:
  a:
    engine: postgres
    version: 17
    extensions: [vector, pg_trgm, vector, postgis]
`, want: []want{errAt("databases.a.extensions[2]", 6, 35), errAt("databases.a.extensions[3]", 6, 43)}},
		{name: "storage and recovery units", cite: "storage.size Positive byte quantity; recovery.pointInTime Duration",
			src: `
name: x
databases:
  a:
    engine: postgres
    version: 17
    storage: {size: 10G}
    recovery: {pointInTime: 7days}
`, want: []want{errAt("databases.a.storage.size", 6, 21), errAt("databases.a.recovery.pointInTime", 7, 29)}},
		{name: "refused-at-deploy vocabulary warns", cite: "visibility: public-read, versioning: enabled, lifecycle.expireNoncurrentVersionsAfter, quotas.objects, and quotas.maxObjectSize are valid vocabulary already but are rejected at deploy",
			src: `
name: x
buckets:
  files:
    visibility: public-read
    versioning: enabled
    quotas: {storage: 1GB, objects: 10, maxObjectSize: 10MB}
    lifecycle: {expireNoncurrentVersionsAfter: 30d}
`, want: []want{warnAt("buckets.files.visibility", 4, 17), warnAt("buckets.files.versioning", 5, 17), warnAt("buckets.files.quotas.objects", 6, 37), warnAt("buckets.files.quotas.maxObjectSize", 6, 56), warnAt("buckets.files.lifecycle.expireNoncurrentVersionsAfter", 7, 48)}},
		{name: "zero object quota is no limit", cite: "quotas.objects Nonnegative integer; unset/0 means no limit.",
			src: `
name: x
buckets:
  files:
    quotas: {objects: 0}
`, want: nil},
		{name: "bucket enums", cite: "visibility String: private (default) or public-read; versioning String: disabled (default) or enabled",
			src: `
name: x
buckets:
  files: {visibility: public, versioning: on}
`, want: []want{errAt("buckets.files.visibility", 3, 23), errAt("buckets.files.versioning", 3, 43)}},
		{name: "cors origins and methods", cite: "Literal HTTP(S) scheme and host, optionally a port, without path/query/fragment; * permits every origin. ... Allowed values: GET, PUT, POST, DELETE, HEAD; normalized to uppercase.",
			src: `
name: x
buckets:
  files:
    cors:
      allowedOrigins: ["https://app.example.com:8443", "*", "app.example.com", "https://a.example.com/x", "https://${APP_DOMAIN}"]
      allowedMethods: [get, Put, OPTIONS]
      maxAge: 10m
`, want: []want{errAt("buckets.files.cors.allowedOrigins[2]", 5, 61), errAt("buckets.files.cors.allowedOrigins[3]", 5, 80), errAt("buckets.files.cors.allowedOrigins[4]", 5, 107), errAt("buckets.files.cors.allowedMethods[2]", 6, 34)}},
		{name: "cors requires origins", cite: "allowedOrigins Required nonempty array when CORS is declared.",
			src: `
name: x
buckets:
  a:
    cors: {allowedMethods: [GET]}
  b:
    cors: {allowedOrigins: []}
`, want: []want{errAt("buckets.a.cors.allowedOrigins", 4, 5), errAt("buckets.b.cors.allowedOrigins", 6, 28)}},
	})
}

func TestExpressionRules(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "service output must be whole value and declared", cite: "A {{...}} service output may appear only in an application's environment: block and must occupy the entire value.",
			src: `
name: x
applications:
  web:
    image: nginx
    environment:
      A: "postgres://{{databases.data.host}}/x"
      B: "{{databases.nope.url}}"
      C: "{{databases.data.uri}}"
      D: "{{buckets.data.name}}"
      E: "{{ databases.data.url }}"
databases:
  data: {engine: postgres, version: 18}
`, want: []want{errAt("applications.web.environment.A", 6, 10), errAt("applications.web.environment.B", 7, 10), errAt("applications.web.environment.C", 8, 10), errAt("applications.web.environment.D", 9, 10)}},
		{name: "service output outside environment", cite: "route domain: ${} expressions allowed, service outputs not",
			src: `
name: x
applications:
  web:
    image: nginx
    ports: {http: {port: 80}}
    routes:
      r: {domain: "{{buckets.files.endpoint}}", port: http}
buckets:
  files: {}
`, want: []want{errAt("applications.web.routes.r.domain", 7, 19)}},
		{name: "conflicting inline defaults", cite: "The same name with two different inline defaults is an error.",
			src: `
name: x
applications:
  web:
    image: nginx
    environment:
      A: "${LOG_LEVEL:-info}"
      B: "${LOG_LEVEL:-info}"
      C: "${LOG_LEVEL:-debug}"
`, want: []want{errAt("applications.web.environment.C", 8, 10)}},
		{name: "malformed expressions", cite: "Malformed ${ or {{ inside an expression-bearing field is an error, so typos never pass through silently.",
			src: `
name: x
applications:
  web:
    image: nginx
    environment:
      A: "${APP_DOMAIN"
      B: "${app_domain}"
      C: "${}"
      D: "{{databases.data.url"
      E: "${NAME:=x}"
    ports: {http: {port: 80}}
    routes:
      r: {domain: "www.${APP_DOMAIN", port: http}
`, want: []want{errAt("applications.web.environment.A", 6, 10), errAt("applications.web.environment.B", 7, 10), errAt("applications.web.environment.C", 8, 10), errAt("applications.web.environment.D", 9, 10), errAt("applications.web.environment.E", 10, 10), errAt("applications.web.routes.r.domain", 13, 19)}},
		{name: "literal fields pass expressions verbatim", cite: "Other deployed string fields are literal: image, command, build target and arguments, route and probe paths, volume mount paths. A ${...} there passes through verbatim",
			src: `
name: x
applications:
  web:
    image: "ghcr.io/acme/web:${TAG"
    command: [sh, -c, "echo ${HOME} {{x"]
    volumes:
      data: {mountPath: "/data/${X}", size: 1GB}
`, want: []want{warnAt("applications.web.image", 4, 12)}, contains: "image is literal"},
	})
}

// TestAuditRules holds cases from an audit of the compiler against the
// reference, one per disagreement found; each cites the sentence it enforces.
func TestAuditRules(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "a lone }} in an environment value is text", cite: "A {{...}} service output may appear only in an application's environment: block and must occupy the entire value. ... Malformed ${ or {{ inside an expression-bearing field is an error",
			src: `
name: x
applications:
  web:
    image: nginx
    environment:
      CONFIG: '{"a":{"b":1}}'
      TEMPLATE: "a }} b"
`},
		{name: "a nested ${ in a default is reported as such, not as a service output", cite: "Malformed ${ or {{ inside an expression-bearing field is an error",
			src: `
name: x
applications:
  web:
    image: nginx
    environment:
      A: "${A:-${B}}"
`, want: []want{errAt("applications.web.environment.A", 6, 10)}, contains: "nested"},
		{name: "a duplicate platform after an invalid item keeps its own index", cite: "Allowed values are linux/amd64 and linux/arm64, without duplicates. (DESIGN.md: sequence items as [i])",
			src: `
name: x
applications:
  web:
    image: nginx
    platforms: [~, linux/amd64, linux/amd64]
`, want: []want{errAt("applications.web.platforms[0]", 5, 17), errAt("applications.web.platforms[2]", 5, 33)}},
		{name: "conflicting defaults are reported at the later one in the file: bucket before application", cite: "The same name with two different inline defaults is an error.",
			src: `
name: x
buckets:
  f:
    route: {domain: "${D:-a.example.com}"}
applications:
  web:
    image: nginx
    environment:
      A: "${D:-b.example.com}"
`, want: []want{errAt("applications.web.environment.A", 9, 10)}, contains: "two different inline defaults"},
		{name: "conflicting defaults are reported at the later one in the file: routes before environment", cite: "The same name with two different inline defaults is an error.",
			src: `
name: x
applications:
  web:
    image: nginx
    routes:
      r: {domain: "${D:-a.example.com}", port: 80}
    environment:
      A: "${D:-b.example.com}"
`, want: []want{errAt("applications.web.environment.A", 8, 10)}, contains: "two different inline defaults"},
		{name: "the literal text around expressions in a hostname still forms labels", cite: "applications.*.routes.*.domain Required nonempty hostname string; no scheme, path, port, or wildcard. Supports ${NAME} and inline defaults",
			src: `
name: x
applications:
  web:
    image: nginx
    routes:
      a: {domain: "www..${D}", port: 80}
      b: {domain: ".${D}", port: 80}
      c: {domain: "${D}-", port: 80, aliases: ["-www.${D}"]}
      d: {domain: "${A}-${B}.example.com", port: 80, aliases: ["${P:-www.}example.com"]}
`, want: []want{errAt("applications.web.routes.a.domain", 6, 19), errAt("applications.web.routes.b.domain", 7, 19), errAt("applications.web.routes.c.domain", 8, 19), errAt("applications.web.routes.c.aliases[0]", 8, 48)}, contains: "empty label"},
		{name: "only paths under the reserved ACME prefix are refused", cite: "HTTP routers reserve /.well-known/acme-challenge/ for cert-manager's solver and /.well-known/skali-edge for the installation's own edge identity",
			src: `
name: x
applications:
  web:
    image: nginx
    routes:
      a: {domain: a.example.com, port: 80, path: /.well-known/acme-challenges}
      b: {domain: a.example.com, port: 80, path: /.well-known}
      c: {domain: a.example.com, port: 80, path: /.well-known/acme-challenge/token}
      d: {domain: a.example.com, port: 80, path: /.well-known/skali-edge-x}
`, want: []want{errAt("applications.web.routes.c.path", 8, 50), errAt("applications.web.routes.d.path", 9, 50)}, contains: "reserved"},
	})
}

// TestAuditHashEquality: spellings of the same deployment found by the
// audit share a hash.
func TestAuditHashEquality(t *testing.T) {
	// "buckets.*.cors.allowedMethods Array; defaults to GET, PUT."
	base := mustCompile(t, "name: x\nbuckets:\n  f: {cors: {allowedOrigins: ['*']}}\n").Hash
	for _, src := range []string{
		"name: x\nbuckets:\n  f: {cors: {allowedOrigins: ['*'], allowedMethods: []}}\n",
		"name: x\nbuckets:\n  f: {cors: {allowedOrigins: ['*'], allowedMethods: [put, GET]}}\n",
	} {
		if got := mustCompile(t, src).Hash; got != base {
			t.Errorf("got hash %s, want %s for\n%s", got, base, src)
		}
	}
}
