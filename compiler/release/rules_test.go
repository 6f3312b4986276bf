package release_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/release"
)

type want struct {
	sev  compiler.Severity
	path string
	line int
	col  int
}

func (w want) String() string { return fmt.Sprintf("%s %s %d:%d", w.sev, w.path, w.line, w.col) }

func errAt(path string, line, col int) want {
	return want{compiler.SeverityError, path, line, col}
}

// ruleCase is one document and every diagnostic it must produce; cite
// quotes the sentence of the reference the case enforces.
type ruleCase struct {
	name     string
	cite     string
	src      string
	want     []want
	contains string
}

// base is a minimal valid manifest that cases extend.
const base = `api_version: selfhost/v1alpha1
kind: application-release
metadata: {name: demo, version: 1.2.0}
runtimes:
  compose:
    files: [compose.yaml]
`

func runRules(t *testing.T, check func([]byte) []compiler.Diagnostic, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := check([]byte(strings.TrimPrefix(tc.src, "\n")))
			var got []want
			var msgs []string
			for _, d := range ds {
				got = append(got, want{d.Severity, d.Path, d.Line, d.Column})
				msgs = append(msgs, d.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("(reference: %s)\ngot  %v\nwant %v\n%s", tc.cite, got, tc.want, strings.Join(msgs, "\n"))
			}
			if tc.contains != "" && (len(ds) == 0 || !strings.Contains(ds[0].Message, tc.contains)) {
				t.Errorf("first message: got %q, want it to contain %q", msgs, tc.contains)
			}
		})
	}
}

func manifestDiags(src []byte) []compiler.Diagnostic { return release.CheckManifest(src).Diagnostics }

func schemaDiags(src []byte) []compiler.Diagnostic { return release.CheckSecretSchema(src).Diagnostics }

func TestManifestRules(t *testing.T) {
	runRules(t, manifestDiags, []ruleCase{
		{name: "minimal manifest is valid", cite: "api_version: selfhost/v1alpha1", src: base},
		{name: "unknown top-level field", cite: "an unknown field is an error ... enforced by the loader",
			src: base + "imagez: {}\n", want: []want{errAt("imagez", 7, 1)}, contains: "did you mean `images`?"},
		{name: "unknown nested field", cite: "an unknown field is an error",
			src: base + "metadata2: x\n", want: []want{errAt("metadata2", 7, 1)}},
		{name: "api_version required and known", cite: "manifest.yaml       api_version: selfhost/v1alpha1",
			src:  "api_version: selfhost/v2\nmetadata: {name: demo, version: 1.2.0}\nruntimes: {compose: {files: [c.yaml]}}\n",
			want: []want{errAt("api_version", 1, 14)}},
		{name: "runtime removed in 0.3.0", cite: "A manifest carrying it is refused, naming what to write instead",
			src: base + "runtime:\n  files: [compose.yaml]\n  project: demo\n", want: []want{errAt("runtime", 7, 1)}, contains: "runtimes.compose.files"},
		{name: "project left behind beside runtimes", cite: "A project: left behind beside runtimes: is refused with the rest of the old block",
			src: base + "project: demo\n", want: []want{errAt("project", 7, 1)}, contains: "runtimes.compose.options.project"},
		{name: "project beside files", cite: "move project to runtimes.compose.options.project",
			src: base + "    project: demo\n", want: []want{errAt("runtimes.compose.project", 7, 5)}, contains: "runtimes.compose.options.project"},
		{name: "compose options understood", cite: "The compose runtime understands one ... A mistyped option is an error",
			src: base + "    options: {projct: demo}\n", want: []want{errAt("runtimes.compose.options.projct", 7, 15)}},
		{name: "option value one line of 200", cite: "a value is one line of at most 200 characters",
			src: base + "    options: {project: " + strings.Repeat("a", 201) + "}\n", want: []want{errAt("runtimes.compose.options.project", 7, 24)}},
		{name: "files required", cite: "One files field for every runtime",
			src:  "api_version: selfhost/v1alpha1\nmetadata: {name: demo, version: 1.2.0}\nruntimes:\n  compose:\n    profiles: {a: [x.yaml]}\n",
			want: []want{errAt("runtimes.compose.files", 4, 3)}},
		{name: "an empty runtime still needs files", cite: "One files field for every runtime",
			src:  "api_version: selfhost/v1alpha1\nmetadata: {name: demo, version: 1.2.0}\nruntimes:\n  compose:\n",
			want: []want{errAt("runtimes.compose.files", 4, 3)}},
		{name: "paths stay in the release", cite: "paths may not escape the release root",
			src: base + "    profiles:\n      a: [../x.yaml, /etc/y.yaml]\n", want: []want{errAt("runtimes.compose.profiles.a[0]", 8, 11), errAt("runtimes.compose.profiles.a[1]", 8, 22)}},
		{name: "support_url https", cite: "support_url must be https.",
			src:  "api_version: selfhost/v1alpha1\nmetadata:\n  name: demo\n  version: 1.2.0\n  support_url: http://support.example\nruntimes: {compose: {files: [c.yaml]}}\n",
			want: []want{errAt("metadata.support_url", 5, 16)}},
		{name: "metadata name and version required", cite: "metadata",
			src:  "api_version: selfhost/v1alpha1\nmetadata:\n  vendor: x\nruntimes: {compose: {files: [c.yaml]}}\n",
			want: []want{errAt("metadata.name", 2, 1), errAt("metadata.version", 2, 1)}},
		{name: "images pinned by digest", cite: "Every reference must be pinned by digest ... A bare tag is rejected.",
			src:  base + "images:\n  app: registry.example/demo/app:1.2\n  db: postgres@sha256:" + strings.Repeat("0", 64) + "\n",
			want: []want{errAt("images.app", 8, 8)}},
		{name: "image key shape", cite: "The key is lowercase letters, digits and hyphens ... Dots and underscores are refused",
			src:  base + "images:\n  web.ui: a@sha256:" + strings.Repeat("0", 64) + "\n  web_ui: a@sha256:" + strings.Repeat("0", 64) + "\n  Web: a@sha256:" + strings.Repeat("0", 64) + "\n",
			want: []want{errAt("images.web.ui", 8, 3), errAt("images.web_ui", 9, 3), errAt("images.Web", 10, 3)}},
		{name: "from bundle only", cite: "An unrecognised from is refused rather than defaulted.",
			src:  base + "images:\n  app:\n    ref: a@sha256:" + strings.Repeat("0", 64) + "\n    from: bundled\n",
			want: []want{errAt("images.app.from", 10, 11)}, contains: "did you mean `bundle`?"},
		{name: "from under the wrong image", cite: "The two plausible typos — bundled, and from under the wrong image",
			src:  base + "images:\n  app:\n    ref: a@sha256:" + strings.Repeat("0", 64) + "\n  from: bundle\n",
			want: []want{errAt("images.from", 10, 3)}},
		{name: "mapping image needs ref", cite: "ref stays a real image reference in both spellings",
			src: base + "images:\n  app: {from: bundle}\n", want: []want{errAt("images.app.ref", 8, 3)}},
		{name: "unquoted mode", cite: "Unquoted modes are refused rather than applied",
			src:  base + "configuration:\n  - template: t.tmpl\n    target: /etc/x\n    mode: 0640\n",
			want: []want{errAt("configuration[0].mode", 10, 11)}, contains: "416"},
		{name: "mode shape and template required", cite: "A list of templates rendered onto the host.",
			src:  base + "configuration:\n  - target: /etc/x\n    mode: \"rw\"\n",
			want: []want{errAt("configuration[0].template", 8, 5), errAt("configuration[0].mode", 9, 11)}},
		{name: "required with default", cite: "required: true and a default is refused.",
			src:  base + "parameters:\n  admin_email:\n    type: string\n    required: true\n    default: ops@example\n",
			want: []want{errAt("parameters.admin_email.required", 10, 15)}},
		{name: "enum values and default", cite: "for an enum — the values it accepts",
			src:  base + "parameters:\n  log_level:\n    type: enum\n    values: [debug, info]\n    default: trace\n  mode:\n    type: enum\n",
			want: []want{errAt("parameters.log_level.default", 11, 14), errAt("parameters.mode.values", 12, 3)}},
		{name: "parameter types", cite: "Each entry declares a type, an optional default",
			src:  base + "parameters:\n  http_port: {type: port, default: 70000}\n  workers: {type: int, default: many}\n  debug: {type: flag}\n  other: {default: 1}\n",
			want: []want{errAt("parameters.http_port.default", 8, 36), errAt("parameters.workers.default", 9, 33), errAt("parameters.debug.type", 10, 17), errAt("parameters.other.type", 11, 3)}},
		{name: "parameter names fold to one variable", cite: "web-ui and web.ui would name the same variable",
			src:  base + "parameters:\n  http_port: {type: port}\n  http-port: {type: port}\n",
			want: []want{errAt("parameters.http-port", 9, 3)}},
		{name: "operation names", cite: "refuses a manifest that declares any other name",
			src:  base + "operations:\n  migrat: {kind: hook, command: [hooks/migrate]}\n  smoke_test: {kind: script}\n",
			want: []want{errAt("operations.migrat", 8, 3), errAt("operations.smoke_test.kind", 9, 22)}, contains: "did you mean `migrate`?"},
		{name: "migrate list needs 0.4.0", cite: "A list needs min_manager_version: \"0.4.0\" or later, and a manifest with a list that declares less is refused.",
			src:  base + "compatibility: {min_manager_version: \"0.3.0\"}\noperations:\n  migrate:\n    - {kind: runtime-service, service: flyway}\n",
			want: []want{errAt("operations.migrate", 9, 3), {compiler.SeverityWarning, "operations.migrate", 9, 3}}, contains: "0.4.0"},
		{name: "migrate list with 0.4.0", cite: "A list needs min_manager_version: \"0.4.0\" or later",
			src: base + "compatibility: {min_manager_version: \"0.4.0\", database_schema_produces: 14}\noperations:\n  migrate:\n    - {kind: runtime-service, service: flyway, timeout: 15m}\n    - {kind: runtime-service, service: bootstrap}\n"},
		{name: "runtime-service migration without database_schema_produces", cite: "without it they skip their schema checks, and release verify warns",
			src:  base + "compatibility: {min_manager_version: \"0.4.0\"}\noperations:\n  migrate:\n    - {kind: runtime-service, service: flyway}\n    - {kind: runtime-service, service: bootstrap}\n",
			want: []want{{compiler.SeverityWarning, "operations.migrate", 9, 3}}},
		{name: "only migrate is a list", cite: "migrate alone may list several steps",
			src:  base + "compatibility: {min_manager_version: \"0.4.0\"}\noperations:\n  backup:\n    - {kind: hook, command: [hooks/backup]}\n",
			want: []want{errAt("operations.backup", 9, 3)}},
		{name: "step fields", cite: "a hook runs on the host ... a runtime service runs on the application network",
			src:  base + "operations:\n  migrate: {kind: hook}\n  restore: {kind: runtime-service, timeout: soon}\n",
			want: []want{errAt("operations.migrate.command", 8, 3), errAt("operations.restore.service", 9, 3), errAt("operations.restore.timeout", 9, 45)}},
		{name: "tasks need 0.8.0", cite: "Tasks need min_manager_version: \"0.8.0\" or later, and a manifest declaring tasks with less is refused.",
			src: base + "tasks:\n  seed: {service: backend}\n", want: []want{errAt("tasks", 7, 1)}, contains: "0.8.0"},
		{name: "task names and modes", cite: "Names are lowercase letters, digits and dashes, starting with a letter",
			src:  base + "compatibility: {min_manager_version: \"0.8.0\"}\ntasks:\n  Seed_data: {service: backend, modes: [dev, dev]}\n  1st: {command: [x]}\n  seed:\n    description: Fill\n    service: backend\n    command: [seed]\n    args: true\n    modes: [dev]\n    timeout: 10m\n",
			want: []want{errAt("tasks.Seed_data", 9, 3), errAt("tasks.Seed_data.modes[1]", 9, 46), errAt("tasks.1st", 10, 3), errAt("tasks.1st.service", 10, 3)}},
		{name: "backup volumes need consistency", cite: "an entry that names a volume without saying anything about it is refused at load",
			src:  base + "backup:\n  volumes:\n    uploads: {}\n    pgdata:\n    caddy: {consistency: warm}\n",
			want: []want{errAt("backup.volumes.uploads.consistency", 9, 5), errAt("backup.volumes.pgdata.consistency", 10, 5), errAt("backup.volumes.caddy.consistency", 11, 26)}},
		{name: "health checks", cite: "each entry has a unique name, a type, a timeout (default 120s) and an optional start_period",
			src:  base + "health:\n  checks:\n    - {name: api, type: http, url: \"http://127.0.0.1/health\", start_period: 90s}\n    - {name: api, type: command, command: [hooks/check], start_period: -5s}\n    - {type: tcp}\n",
			want: []want{errAt("health.checks[1].name", 10, 14), errAt("health.checks[1].start_period", 10, 72), errAt("health.checks[2].name", 11, 7), errAt("health.checks[2].type", 11, 14)}},
		{name: "extension namespaces", cite: "The namespace must contain a . or a /",
			src: base + "extensions:\n  telemetry: {a: 1}\n  example.com/x: {a: 1}\n", want: []want{errAt("extensions.telemetry", 8, 3)}},
		{name: "compatibility fields", cite: "compatibility: rollback_safe, database_schema_min, database_schema_max",
			src:  base + "compatibility:\n  rollback_safe: yes\n  database_schema_min: 14\n  database_schema_max: 12\n  min_manager_version: \"0.4\"\n",
			want: []want{errAt("compatibility.rollback_safe", 8, 18), errAt("compatibility.database_schema_max", 10, 24), errAt("compatibility.min_manager_version", 11, 24)}},
		{name: "duplicate keys", cite: "an unknown field is an error (strict decoding)",
			src: base + "images: {}\nimages: {}\n", want: []want{errAt("images", 8, 1)}},
		{name: "bundle is not checked, not refused", cite: "bundle: What the release says about its own packaging",
			src: base + "bundle: {anything: 1}\n"},
		{name: "runtimes under a 0.0.0 floor is accepted, as in the reference example", cite: "min_manager_version: \"0.0.0\" in the complete example, which declares runtimes",
			src: base + "compatibility: {min_manager_version: \"0.0.0\"}\n"},
		{name: "parameter names may use underscores, as the reference example does", cite: "parameters: http_port: ... log_level:",
			src: base + "parameters:\n  http_port: {type: port, default: 18080}\n  web.ui: {type: string}\n", want: []want{errAt("parameters.web.ui", 9, 3)}},
	})
}

func TestSecretSchemaRules(t *testing.T) {
	const head = "api_version: selfhost/v1alpha1\nsecrets:\n"
	runRules(t, schemaDiags, []ruleCase{
		{name: "generator kinds", cite: "Generator kind is one of password, hex, base64, uuid, age-key, or absent",
			src:  head + "  - {name: a, generator: {kind: random}}\n  - {name: b, generator: {kind: uuid, length: 10}}\n  - {name: c, generator: {length: 10}}\n  - {name: d}\n",
			want: []want{errAt("secrets[0].generator.kind", 3, 33), errAt("secrets[1].generator.length", 4, 39), errAt("secrets[2].generator.kind", 5, 15)}},
		{name: "owner numeric and quoted", cite: "Numeric, and quoted. One or two decimal ids, each from 0 to 4294967294, as a string. A name is refused",
			src:  head + "  - {name: a, owner: 65532}\n  - {name: b, owner: \"nobody\"}\n  - {name: c, owner: \"1:4294967295\"}\n  - {name: d, owner: \"65532:65532\"}\n  - {name: e, owner: \"0\"}\n",
			want: []want{errAt("secrets[0].owner", 3, 22), errAt("secrets[1].owner", 4, 22), errAt("secrets[2].owner", 5, 22)}},
		{name: "unknown fields and duplicates", cite: "Each declaration: ...",
			src:  head + "  - {name: a, services: [app], rotation: 90d}\n  - {name: a, rotation_period: 90d}\n",
			want: []want{errAt("secrets[0].rotation", 3, 32), errAt("secrets[1].name", 4, 12), errAt("secrets[1].rotation_period", 4, 32)}},
		{name: "api_version required", cite: "api_version: selfhost/v1alpha1",
			src: "secrets: []\n", want: []want{errAt("api_version", 1, 1)}},
	})
}

// TestOwnerNeedsManager06: "A schema that declares owner needs the manifest
// to declare compatibility.min_manager_version: "0.6.0" or later."
func TestOwnerNeedsManager06(t *testing.T) {
	schema := []byte("api_version: selfhost/v1alpha1\nsecrets:\n  - {name: k, owner: \"65532:65532\"}\n")
	for _, tc := range []struct {
		declared string
		errors   int
	}{{"0.5.9", 1}, {"0.6.0", 0}, {"1.0.0", 0}} {
		s := release.CheckSecretSchema(schema)
		if len(s.NotChecked) != 1 {
			t.Fatalf("alone: got not-checked %v, want the owner rule", s.NotChecked)
		}
		m := release.CheckManifest([]byte(base + "compatibility: {min_manager_version: \"" + tc.declared + "\"}\n"))
		release.CheckOwnerVersion(s, m)
		if len(s.Diagnostics) != tc.errors || len(s.NotChecked) != 0 {
			t.Errorf("declared %s: got %v (not checked %v), want %d errors", tc.declared, s.Diagnostics, s.NotChecked, tc.errors)
		}
		if tc.errors == 1 && (s.Diagnostics[0].Path != "secrets[0].owner" || !strings.Contains(s.Diagnostics[0].Message, "0.6.0")) {
			t.Errorf("got %v", s.Diagnostics[0])
		}
	}
}
