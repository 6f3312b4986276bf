package recipe_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/recipe"
)

type want struct {
	sev  compiler.Severity
	path string
	line int
	col  int
}

func (w want) String() string { return fmt.Sprintf("%s %s %d:%d", w.sev, w.path, w.line, w.col) }

func errAt(path string, line, col int) want  { return want{compiler.SeverityError, path, line, col} }
func warnAt(path string, line, col int) want { return want{compiler.SeverityWarning, path, line, col} }

// ruleCase is one document and every diagnostic it must produce; cite
// quotes the sentence of the reference the case enforces.
type ruleCase struct {
	name     string
	cite     string
	src      string
	opts     recipe.Options
	want     []want
	contains string
}

const head = "[metadata]\nname = \"x\"\nversion = \"1.0.0\"\n"

func runRules(t *testing.T, plan bool, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := []byte(strings.TrimPrefix(tc.src, "\n"))
			var res *recipe.Result
			if plan {
				res = recipe.CheckPlan(src)
			} else {
				res = recipe.CheckRecipe(src, tc.opts)
			}
			var got []want
			var msgs []string
			for _, d := range res.Diagnostics {
				got = append(got, want{d.Severity, d.Path, d.Line, d.Column})
				msgs = append(msgs, d.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("(reference: %s)\ngot  %v\nwant %v\n%s", tc.cite, got, tc.want, strings.Join(msgs, "\n"))
			}
			if tc.contains != "" && (len(msgs) == 0 || !strings.Contains(msgs[0], tc.contains)) {
				t.Errorf("first message: got %q, want it to contain %q", msgs, tc.contains)
			}
		})
	}
}

func TestExamplesValidate(t *testing.T) {
	for _, name := range []string{"recipe.toml", "container.toml", "plan.toml"} {
		src, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		var res *recipe.Result
		if name == "plan.toml" {
			res = recipe.CheckPlan(src)
		} else {
			res = recipe.CheckRecipe(src, recipe.Options{})
		}
		if len(res.Diagnostics) != 0 {
			t.Errorf("%s: got %v, want no diagnostics", name, res.Diagnostics)
		}
	}
}

func TestRecipeRules(t *testing.T) {
	art := "[[artifacts]]\nuri = \"https://x/a.tgz\"\nsha256 = \"" + strings.Repeat("a", 64) + "\"\n"
	runRules(t, false, []ruleCase{
		{name: "metadata required", cite: "name string yes; version string yes",
			src: "[metadata]\ndescription = \"d\"\n", want: []want{errAt("metadata.name", 1, 2), errAt("metadata.version", 1, 2)}},
		{name: "no metadata", cite: "[metadata] name ... version ... required",
			src: "[resources]\nopen_files = 10\n", want: []want{errAt("metadata", 1, 1)}},
		{name: "unknown keys are errors", cite: "It also rejects any key the agent does not recognise",
			src:  head + "[lifecycle.run]\ntype = \"process\"\nrestart = \"always\"\n[lifecycle.run.exec]\ncommand = \"./x\"\n",
			want: []want{errAt("lifecycle.run.restart", 6, 1)}, contains: "`restart_policy`"},
		{name: "types", cite: "unpack bool false",
			src:  head + "[[artifacts]]\nuri = \"u\"\nsha256 = \"" + strings.Repeat("a", 64) + "\"\nunpack = \"true\"\n",
			want: []want{errAt("artifacts[0].unpack", 7, 10)}, contains: "without quotes"},
		{name: "sha256 mandatory", cite: "sha256 string — Mandatory unless --insecure-skip-verify",
			src: head + "[[artifacts]]\nuri = \"u\"\n", want: []want{errAt("artifacts[0].sha256", 4, 3)}},
		{name: "sha256 optional with the insecure flag", cite: "Mandatory unless --insecure-skip-verify",
			src: head + "[[artifacts]]\nuri = \"u\"\n", opts: recipe.Options{InsecureSkipVerify: true}, want: []want{warnAt("artifacts[0].sha256", 4, 3)}},
		{name: "delta requires unpack", cite: "Requires unpack = true.",
			src:  head + art + "[artifacts.delta]\nserver = \"https://d\"\nsha256 = \"" + strings.Repeat("b", 64) + "\"\n",
			want: []want{errAt("artifacts[0].delta", 7, 12)}},
		{name: "delta server and sha256 required", cite: "server ... Required. sha256 ... Required",
			src:  head + art + "unpack = true\ndelta = { format = \"xdelta\" }\n",
			want: []want{errAt("artifacts[0].delta.server", 8, 1), errAt("artifacts[0].delta.sha256", 8, 1), warnAt("artifacts[0].delta.format", 8, 20)}},
		{name: "artifacts is an array of tables", cite: "[[artifacts]]",
			src: head + "[artifacts]\nuri = \"u\"\n", want: []want{errAt("artifacts", 4, 2)}, contains: "[[artifacts]]"},
		{name: "memory_swap needs memory_mb, cpu_period needs cpu_quota", cite: "memory_swap ... needs memory_mb; cpu_period ... needs cpu_quota. A recipe breaking either rule is refused.",
			src:  head + "[lifecycle.run]\ntype = \"container\"\n[lifecycle.run.container]\nimage = \"i\"\n[lifecycle.run.container.resources]\nmemory_swap = 512\ncpu_period = 100000\n",
			want: []want{errAt("lifecycle.run.container.resources.memory_swap", 9, 1), errAt("lifecycle.run.container.resources.cpu_period", 10, 1)}},
		{name: "signal refused on containers", cite: "Process components only — a container has no PID to signal, and declaring it on one is rejected",
			src:  head + "[lifecycle.run]\ntype = \"container\"\n[lifecycle.run.container]\nimage = \"i\"\n[lifecycle.reload]\nsignal = \"SIGHUP\"\n",
			want: []want{errAt("lifecycle.reload.signal", 9, 1)}},
		{name: "signal allow-list", cite: "SIGHUP, SIGUSR1 or SIGUSR2 ... Signals are an allow-list on purpose",
			src: head + "[lifecycle.reload]\nsignal = \"SIGKILL\"\n", want: []want{errAt("lifecycle.reload.signal", 5, 10)}},
		{name: "resources memory_limit and cpu_quota refused", cite: "memory_limit ... Refused. Use [lifecycle.run.container.resources] memory_mb",
			src:  head + "[resources]\nmemory_limit = \"512M\"\ncpu_quota = 5\nopen_files = 1024\n",
			want: []want{errAt("resources.memory_limit", 5, 1), errAt("resources.cpu_quota", 6, 1)}, contains: "memory_mb"},
		{name: "dataset refresh and keep minimums", cite: "refresh ... Minimum 1m; keep ... Minimum 2",
			src:  head + "[[datasets]]\nname = \"geo\"\nmanifest = \"m\"\nrefresh = \"30s\"\nkeep = 1\n",
			want: []want{errAt("datasets[0].refresh", 7, 11), errAt("datasets[0].keep", 8, 8)}},
		{name: "dataset required keys and names", cite: "name ... Required ... same allow-list as a recipe name; manifest ... Required",
			src:  head + "[[datasets]]\nname = \"geo ip\"\n[[datasets]]\nmanifest = \"m\"\n",
			want: []want{errAt("datasets[0].manifest", 4, 3), errAt("datasets[0].name", 5, 8), errAt("datasets[1].name", 6, 3)}},
		{name: "exec and check mutually exclusive", cite: "exec string list — argv run directly, no shell. Mutually exclusive with check",
			src:  head + "[lifecycle.run.exec]\ncommand = \"./x\"\n[lifecycle.run.health]\ncheck = \"tcp://127.0.0.1:80\"\nexec = [\"/bin/true\"]\n",
			want: []want{errAt("lifecycle.run.health.exec", 8, 1)}},
		{name: "health check schemes", cite: "http://… or https://… (2xx only), tcp://…, cmd:…",
			src:  head + "[lifecycle.run.exec]\ncommand = \"./x\"\n[lifecycle.run.health]\ncheck = \"ftp://x\"\ninterval = \"often\"\n",
			want: []want{errAt("lifecycle.run.health.check", 7, 9), errAt("lifecycle.run.health.interval", 8, 12)}},
		{name: "run enums", cite: "type process or container; restart_policy always, on-failure, never",
			src:  head + "[lifecycle.run]\ntype = \"vm\"\nrestart_policy = \"sometimes\"\n",
			want: []want{errAt("lifecycle.run.type", 5, 8), errAt("lifecycle.run.restart_policy", 6, 18)}},
		{name: "tables of the other component type", cite: "[lifecycle.run.exec] — process components; [lifecycle.run.container] — container components",
			src:  head + "[lifecycle.run]\ntype = \"container\"\n[lifecycle.run.container]\nimage = \"i\"\n[lifecycle.run.exec]\ncommand = \"./x\"\n",
			want: []want{errAt("lifecycle.run.exec", 8, 16)}},
		{name: "container enums and containerd refusals", cite: "network_aliases ... Refused on runtime = \"containerd\"; user-defined network (CLI runtimes only)",
			src:  head + "[lifecycle.run]\ntype = \"container\"\n[lifecycle.run.container]\nimage = \"i\"\nruntime = \"containerd\"\nnetwork_mode = \"edge\"\nnetwork_aliases = [\"a\"]\npull_policy = \"sometimes\"\n",
			want: []want{errAt("lifecycle.run.container.network_mode", 9, 16), errAt("lifecycle.run.container.network_aliases", 10, 1), errAt("lifecycle.run.container.pull_policy", 11, 15)}},
		{name: "reload signal or script, not both", cite: "script — Run instead of a signal",
			src:  head + "[lifecycle.reload]\nsignal = \"SIGHUP\"\nscript = \"./reload.sh\"\ngrace = \"0s\"\n",
			want: []want{errAt("lifecycle.reload.script", 6, 1), errAt("lifecycle.reload.grace", 7, 9)}},
		{name: "health checks something", cite: "check ... exec ... Mutually exclusive with check",
			src:  head + "[lifecycle.run.exec]\ncommand = \"./x\"\n[lifecycle.run.health]\ninterval = \"5s\"\n",
			want: []want{errAt("lifecycle.run.health.check", 6, 16)}},
		{name: "max_retries without restarts", cite: "max_retries int 5 for always/on-failure",
			src:  head + "[lifecycle.run]\nrestart_policy = \"never\"\nmax_retries = 3\n[lifecycle.run.exec]\ncommand = \"./x\"\n",
			want: []want{warnAt("lifecycle.run.max_retries", 6, 1)}},
		{name: "memory_swap is memory plus swap", cite: "memory_swap is MB of memory plus swap (-1 unlimited)",
			src:  head + "[lifecycle.run]\ntype = \"container\"\n[lifecycle.run.container]\nimage = \"i\"\n[lifecycle.run.container.resources]\nmemory_mb = 512\nmemory_swap = 256\n",
			want: []want{errAt("lifecycle.run.container.resources.memory_swap", 10, 15)}},
		{name: "a key after a sub-table header", cite: "which mistakes the parser stays quiet about",
			src:  head + "[lifecycle.run]\ntype = \"container\"\n[lifecycle.run.container]\nimage = \"i\"\nrestart_policy = \"never\"\n",
			want: []want{errAt("lifecycle.run.container.restart_policy", 8, 1)}, contains: "belongs to `[lifecycle.run]`"},
		{name: "max_age shorter than refresh", cite: "max_age duration 3 × refresh Past this the dataset reports stale",
			src:  head + "[[datasets]]\nname = \"geo\"\nmanifest = \"m\"\nrefresh = \"1h\"\nmax_age = \"30m\"\n",
			want: []want{warnAt("datasets[0].max_age", 8, 11)}},
		{name: "dependency type", cite: "type string hard hard, soft, ordering",
			src: head + "[[dependencies]]\nname = \"y\"\ntype = \"weak\"\n", want: []want{errAt("dependencies[0].type", 6, 8)}},
		{name: "duplicate key", cite: "which mistakes the parser stays quiet about",
			src: head + "name = \"y\"\n", want: []want{errAt("metadata.name", 4, 1)}},
		{name: "table defined twice", cite: "which tables repeat",
			src: head + "[metadata]\n", want: []want{errAt("metadata", 4, 2)}},
		{name: "syntax error", cite: "invalid input is rejected, not best-effort parsed",
			src: head + "description = \n", want: []want{errAt("", 4, 15)}},
	})
}

func TestPlanRules(t *testing.T) {
	runRules(t, true, []ruleCase{
		{name: "names unique", cite: "name = \"api\" # string, required, unique in the plan",
			src:  "[[components]]\nname = \"api\"\nrecipe = \"a.toml\"\n[[components]]\nname = \"api\"\nrecipe = \"b.toml\"\n",
			want: []want{errAt("components[1].name", 5, 8)}},
		{name: "required keys and unknown keys", cite: "That is the entire plan schema.",
			src:  "[[components]]\nrecipe = \"a.toml\"\nversion = \"1\"\n",
			want: []want{errAt("components[0].name", 1, 3), errAt("components[0].version", 3, 1)}},
		{name: "recipe is a path or name:version", cite: "recipe = \"recipes/api.toml\" # path to a TOML file, or \"name:version\" from the store",
			src:  "[[components]]\nname = \"a\"\nrecipe = \"recipes/api\"\n[[components]]\nname = \"b\"\nrecipe = \"com.example.b:1.0.0\"\n",
			want: []want{errAt("components[0].recipe", 3, 10)}},
		{name: "no components", cite: "[[components]]",
			src: "title = \"x\"\n", want: []want{errAt("components", 1, 1), errAt("title", 1, 1)}},
	})
}
