// Package release validates the two documents of a selfhost/v1alpha1
// release (reference: ../shared/seeds/001_497d7aa33e543b86.txt): the
// release manifest, manifest.yaml, and its secret schema. It checks every
// rule the reference states that can be decided from the file alone and
// reports, as compiler.NotChecked, the ones that need the bundle's other
// files (that a declared path exists). Like the skali.yaml compiler it is
// pure: bytes in, diagnostics out.
//
// The reference describes most blocks in prose and one complete example;
// where it lists no field table, the fields it names in prose or in the
// example are the vocabulary, and anything else is an unknown field (the
// manager decodes strictly). Choices where the reference is ambiguous are
// written at the rule that makes them.
package release

import (
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/internal/check"
)

// APIVersion is the only api_version this package reads.
const APIVersion = "selfhost/v1alpha1"

// ManifestKind is the manifest's kind field.
const ManifestKind = "application-release"

// Manager versions that features need (reference: "A list needs
// min_manager_version: "0.4.0" or later", "Tasks need ... "0.8.0"",
// "A schema that declares owner needs ... "0.6.0"").
var (
	migrateListVersion = version{0, 4, 0}
	tasksVersion       = version{0, 8, 0}
	// ownerVersion is the manager version a secret schema's owner needs.
	ownerVersion = version{0, 6, 0}
)

// ManifestResult is the outcome of checking a release manifest.
type ManifestResult struct {
	// Diagnostics holds every problem, sorted by position.
	Diagnostics []compiler.Diagnostic
	// NotChecked lists the rules that need the bundle's files.
	NotChecked []compiler.NotChecked
	// Summary describes the manifest as far as it could be read.
	Summary ManifestSummary
	// minManager is the declared compatibility.min_manager_version.
	minManager version
	// minManagerOK is false when the declared version is unreadable.
	minManagerOK bool
	// minManagerDeclared is true when the manifest declares one.
	minManagerDeclared bool
}

// declaredManager says what the manifest declares, for messages.
func (r *ManifestResult) declaredManager() string {
	if !r.minManagerDeclared {
		return "declares none (so 0.0.0)"
	}
	return "declares \"" + r.minManager.String() + "\""
}

// MinManagerVersion returns the declared compatibility.min_manager_version,
// "0.0.0" when none is declared, and false when it is unreadable.
func (r *ManifestResult) MinManagerVersion() (string, bool) {
	return r.minManager.String(), r.minManagerOK
}

// ManifestSummary is what the Studio shows about a valid release manifest.
type ManifestSummary struct {
	Name              string
	Version           string
	Vendor            string
	Description       string
	SupportURL        string
	MinManagerVersion string
	Runtimes          []string
	Images            []ImageSummary
	Parameters        []ParameterSummary
	Operations        []string
	Tasks             []string
	HealthChecks      []string
	SecretSchema      string
}

// ImageSummary is one entry of images.
type ImageSummary struct {
	Name    string
	Ref     string
	Bundled bool
}

// ParameterSummary is one declared parameter.
type ParameterSummary struct {
	Name     string
	Type     string
	Default  string
	Required bool
}

var topLevelFields = []string{"api_version", "kind", "metadata", "providers", "runtimes", "requirements", "bundle",
	"parameters", "images", "configuration", "secrets", "operations", "tasks", "backup", "health",
	"compatibility", "retention", "extensions"}

const runtimeMigration = "move its files under `runtimes.compose.files`, move `project` to `runtimes.compose.options.project`, delete the old block and raise `compatibility.min_manager_version` to \"0.3.0\""

// CheckManifest checks a release manifest.
func CheckManifest(src []byte) (res *ManifestResult) {
	c := &checker{}
	res = &ManifestResult{}
	defer func() {
		if r := recover(); r != nil {
			c.errorf(nil, "", "internal validator error; please report this manifest")
		}
		res.Diagnostics = compiler.SortDiagnostics(c.diags)
		res.NotChecked = c.notes
		if res.NotChecked == nil {
			res.NotChecked = []compiler.NotChecked{}
		}
	}()
	root, ds := compiler.ParseYAML(src, "release manifest")
	c.diags = append(c.diags, ds...)
	if root == nil {
		return res
	}
	m := &manifestChecker{checker: c, res: res}
	m.check(root)
	return res
}

type manifestChecker struct {
	*checker
	res *ManifestResult
	// producesSchema is true when compatibility declares
	// database_schema_produces.
	producesSchema bool
}

func (m *manifestChecker) check(root *yaml.Node) {
	fs, _ := m.entries(nil, root, "")
	o := object{node: root}
	for _, f := range fs {
		switch k := f.key.Value; {
		case slices.Contains(topLevelFields, k):
			o.fields = append(o.fields, f)
		case k == "runtime":
			// Reference: "A manifest carrying it is refused, naming what
			// to write instead."
			m.errorf(f.key, k, "`runtime` was removed in 0.3.0 and is no longer read, so this release would come up with no Compose files: "+runtimeMigration)
		case k == "project":
			// Reference: "A project: left behind beside runtimes: is
			// refused with the rest of the old block".
			m.errorf(f.key, k, "`project` is part of the removed `runtime` block (0.3.0) and is no longer read; move it to `runtimes.compose.options.project`, or every volume of a running deployment would be looked for under another name")
		default:
			m.unknownField(f.key, k, topLevelFields)
		}
	}

	// compatibility first: other rules depend on the declared manager version.
	m.res.minManager = version{}
	m.res.minManagerOK = true
	if n := o.get("compatibility"); n != nil {
		m.compatibility(o.keyOf("compatibility"), n)
	}
	m.res.Summary.MinManagerVersion = m.res.minManager.String()

	if n := o.get("api_version"); n == nil {
		m.missing(o, "api_version", "write `api_version: "+APIVersion+"`")
	} else if s, ok := m.str(n, "api_version"); ok && s != APIVersion {
		m.errorf(n, "api_version", "api_version `"+s+"` is not supported; this validator reads `"+APIVersion+"`")
	}
	if n := o.get("kind"); n != nil {
		if s, ok := m.str(n, "kind"); ok && s != ManifestKind {
			m.errorf(n, "kind", "kind `"+s+"` is not a release manifest; write `kind: "+ManifestKind+"`")
		}
	}
	if n := o.get("metadata"); n == nil {
		m.missing(o, "metadata", "the release's name and version")
	} else {
		m.metadata(o.keyOf("metadata"), n)
	}
	if n := o.get("providers"); n != nil {
		m.providers(o.keyOf("providers"), n)
	}
	if n := o.get("runtimes"); n == nil && !hasKey(fs, "runtime") {
		// Reference: the manager "will not install a release whose runtime
		// declaration it cannot read".
		m.missing(o, "runtimes", "which runtimes this release supports, such as `runtimes: {compose: {files: [compose.yaml]}}`")
	} else if n != nil {
		m.runtimes(o.keyOf("runtimes"), n)
	}
	if n := o.get("requirements"); n != nil {
		m.requirements(o.keyOf("requirements"), n)
	}
	if n := o.get("bundle"); n != nil {
		// The reference describes bundle only as "what the release says
		// about its own packaging" and lists none of its fields, so its
		// contents are reported as not checked rather than guessed at.
		if _, ok := m.entries(o.keyOf("bundle"), n, "bundle"); ok {
			m.notChecked(o.keyOf("bundle"), "bundle", "the fields of `bundle` are not listed in the reference this validator implements; run `morzer release verify` on the bundle")
		}
	}
	if n := o.get("parameters"); n != nil {
		m.parametersBlock(o.keyOf("parameters"), n)
	}
	if n := o.get("images"); n != nil {
		m.images(o.keyOf("images"), n)
	}
	if n := o.get("configuration"); n != nil {
		m.configuration(o.keyOf("configuration"), n)
	}
	if n := o.get("secrets"); n != nil {
		m.secrets(o.keyOf("secrets"), n)
	}
	if n := o.get("operations"); n != nil {
		m.operations(o.keyOf("operations"), n)
	}
	if n := o.get("tasks"); n != nil {
		m.tasks(o.keyOf("tasks"), n)
	}
	if n := o.get("backup"); n != nil {
		m.backup(o.keyOf("backup"), n)
	}
	if n := o.get("health"); n != nil {
		m.health(o.keyOf("health"), n)
	}
	if n := o.get("retention"); n != nil {
		if r, ok := m.object(o.keyOf("retention"), n, "retention", []string{"releases", "backups"}); ok {
			for _, k := range []string{"releases", "backups"} {
				if v := r.get(k); v != nil {
					m.integer(v, r.at(k), 0, 1<<31-1)
				}
			}
		}
	}
	if n := o.get("extensions"); n != nil {
		m.extensions(o.keyOf("extensions"), n)
	}
}

// needs reports a feature that needs a newer manager than the manifest
// declares, naming the version it needs (reference: the declaration "makes
// it refuse the bundle as needing a newer manager instead of reporting an
// unknown field").
func (m *manifestChecker) needs(at *yaml.Node, path, feature string, v version) {
	if !m.res.minManagerOK || !m.res.minManager.less(v) {
		return
	}
	m.errorf(at, path, feature+" needs `compatibility.min_manager_version: \""+v.String()+"\"` or later; this manifest "+m.res.declaredManager()+", so an older manager would refuse it as malformed instead of asking for an upgrade")
}

func (m *manifestChecker) metadata(key, n *yaml.Node) {
	o, ok := m.object(key, n, "metadata", []string{"name", "version", "description", "vendor", "release_notes", "support_url"})
	if !ok {
		return
	}
	s := &m.res.Summary
	if v := o.get("name"); v == nil {
		m.missing(o, "name", "the product's name")
	} else if name, ok := m.nonEmpty(v, o.at("name")); ok {
		s.Name = name
	}
	if v := o.get("version"); v == nil {
		m.missing(o, "version", "the release's semantic version, such as `1.2.0`")
	} else if ver, ok := m.nonEmpty(v, o.at("version")); ok {
		if _, ok := parseVersion(ver); !ok {
			m.errorf(v, o.at("version"), "`"+ver+"` is not a semantic version such as `1.2.0`")
		}
		s.Version = ver
	}
	if v := o.get("description"); v != nil {
		s.Description, _ = m.str(v, o.at("description"))
	}
	if v := o.get("vendor"); v != nil {
		s.Vendor, _ = m.str(v, o.at("vendor"))
	}
	if v := o.get("release_notes"); v != nil {
		m.releasePath(v, o.at("release_notes"))
	}
	if v := o.get("support_url"); v != nil {
		if u, ok := m.nonEmpty(v, o.at("support_url")); ok {
			p, err := url.Parse(u)
			if err != nil || p.Scheme != "https" || p.Host == "" {
				m.errorf(v, o.at("support_url"), "support_url must be an https URL, such as `https://support.example/demo`")
			} else {
				s.SupportURL = u
			}
		}
	}
}

// releasePath checks a path into the release: relative, inside the release
// root ("paths may not escape the release root"). Its existence needs the
// bundle and is reported as not checked.
func (m *checker) releasePath(n *yaml.Node, p string) (string, bool) {
	s, ok := m.nonEmpty(n, p)
	if !ok {
		return "", false
	}
	if strings.HasPrefix(s, "/") || strings.Contains(s, "\\") {
		m.errorf(n, p, "`"+s+"` must be a path relative to the release root, such as `compose/compose.yaml`")
		return s, false
	}
	if c := path.Clean(s); c == ".." || strings.HasPrefix(c, "../") {
		m.errorf(n, p, "`"+s+"` escapes the release root; paths may not leave the release")
		return s, false
	}
	m.notChecked(n, p, "that `"+s+"` exists in the bundle is checked by `morzer release verify`, not from the manifest alone")
	return s, true
}

// providers: each entry selects a port implementation by name with an
// optional version constraint. The reference names no closed list of
// ports, so any lower-case identifier is accepted as one.
func (m *manifestChecker) providers(key, n *yaml.Node) {
	fs, ok := m.entries(key, n, "providers")
	if !ok {
		return
	}
	for _, f := range fs {
		p := check.Join("providers", f.key.Value)
		if !identRE.MatchString(f.key.Value) {
			m.errorf(f.key, p, "port `"+f.key.Value+"` must be a lower-case identifier, such as `runtime` or `secrets`")
		}
		o, ok := m.object(f.key, f.val, p, []string{"name", "version"})
		if !ok {
			continue
		}
		if v := o.get("name"); v == nil {
			m.missing(o, "name", "the implementation this port uses, such as `compose`")
		} else {
			m.nonEmpty(v, o.at("name"))
		}
		if v := o.get("version"); v != nil {
			m.constraint(v, o.at("version"))
		}
	}
}

func (m *checker) constraint(n *yaml.Node, p string) {
	if s, ok := m.nonEmpty(n, p); ok && !validConstraint(s) {
		m.errorf(n, p, "`"+s+"` is not a version constraint such as `>=2.30` or `>=1.0.0 <2.0.0`")
	}
}

var (
	identRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	// imageKeyRE: "lowercase letters, digits and hyphens, starting and
	// ending with a letter or digit".
	imageKeyRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	// parameterKeyRE: see parametersBlock.
	parameterKeyRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]*[a-z0-9])?$`)
	taskNameRE     = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	digestRE       = regexp.MustCompile(`@sha256:[0-9a-f]{64}$|@sha512:[0-9a-f]{128}$`)
	modeRE         = regexp.MustCompile(`^0?[0-7]{3}$`)
)

// composeOptions are the options the compose runtime understands
// ("The compose runtime understands one": project).
var composeOptions = []string{"project"}

// runtimes: "The keys are the declaration". Each runtime has files,
// optional profiles and options. Runtimes other than compose are accepted
// by name; their options are checked for shape only, because only the
// runtime knows its vocabulary.
//
// The reference asks a release migrating from runtime: to raise
// min_manager_version to 0.3.0, yet its own complete example ("what the
// manager actually accepts") declares runtimes with "0.0.0"; so runtimes
// under a lower floor is accepted without a diagnostic, unlike a migrate
// list, tasks and owner, whose floors the reference says are refused.
func (m *manifestChecker) runtimes(key, n *yaml.Node) {
	fs, ok := m.entries(key, n, "runtimes")
	if !ok {
		return
	}
	if len(fs) == 0 {
		m.errorf(where(key, n), "runtimes", "declare at least one runtime, such as `compose: {files: [compose.yaml]}`")
	}
	for _, f := range fs {
		name := f.key.Value
		p := check.Join("runtimes", name)
		m.res.Summary.Runtimes = append(m.res.Summary.Runtimes, name)
		if !identRE.MatchString(name) {
			m.errorf(f.key, p, "runtime `"+name+"` must be a lower-case identifier, such as `compose`")
		}
		fields, ok := m.entries(f.key, f.val, p)
		if !ok {
			continue
		}
		o := object{node: compiler.ResolveAlias(f.val), key: f.key, path: p}
		for _, g := range fields {
			switch g.key.Value {
			case "files", "profiles", "options":
				o.fields = append(o.fields, g)
			case "project":
				m.errorf(g.key, check.Join(p, "project"), "`project` is an option of the runtime: move it to `"+check.Join(p, "options.project")+"`")
			default:
				m.unknownField(g.key, check.Join(p, g.key.Value), []string{"files", "profiles", "options"})
			}
		}
		if v := o.get("files"); v == nil {
			m.missing(o, "files", "the runtime's files in the release, such as `[compose/compose.yaml]`")
		} else {
			m.pathList(o.keyOf("files"), v, o.at("files"), true)
		}
		if v := o.get("profiles"); v != nil {
			if pfs, ok := m.entries(o.keyOf("profiles"), v, o.at("profiles")); ok {
				for _, pf := range pfs {
					m.pathList(pf.key, pf.val, check.Join(o.at("profiles"), pf.key.Value), true)
				}
			}
		}
		if v := o.get("options"); v != nil {
			m.options(o.keyOf("options"), v, o.at("options"), name)
		}
	}
}

func (m *manifestChecker) pathList(key, n *yaml.Node, p string, nonEmpty bool) {
	items, ok := m.list(key, n, p)
	if !ok {
		return
	}
	if nonEmpty && len(items) == 0 {
		m.errorf(where(key, n), p, "list at least one file")
	}
	for i, it := range items {
		m.releasePath(it, check.Index(p, i))
	}
}

// options: "a key is a lower-case identifier, a value is one line of at
// most 200 characters ... and the runtime refuses any key it does not
// understand."
func (m *manifestChecker) options(key, n *yaml.Node, p, runtime string) {
	fs, ok := m.entries(key, n, p)
	if !ok {
		return
	}
	for _, f := range fs {
		k := f.key.Value
		kp := check.Join(p, k)
		if !identRE.MatchString(k) {
			m.errorf(f.key, kp, "option `"+k+"` must be a lower-case identifier")
			continue
		}
		if runtime == "compose" && !slices.Contains(composeOptions, k) {
			msg := "the compose runtime does not understand option `" + k + "`; it understands only `project`"
			m.errorf(f.key, kp, msg)
			continue
		}
		v, ok := m.str(f.val, kp)
		if !ok {
			continue
		}
		switch {
		case strings.ContainsAny(v, "\r\n"):
			m.errorf(f.val, kp, "an option value must be one line; it is handed to the runtime on a command line")
		case len([]rune(v)) > 200:
			m.errorf(f.val, kp, "an option value may be at most 200 characters, got "+strconv.Itoa(len([]rune(v))))
		}
	}
}

var architectures = []string{"amd64", "arm64", "arm", "386", "riscv64", "ppc64le", "s390x"}

var sizeRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?\s*(B|[KMGTP]i?B|[KMGTP]i?)?$`)

func (m *manifestChecker) requirements(key, n *yaml.Node) {
	o, ok := m.object(key, n, "requirements", []string{"architectures", "os", "tools", "memory", "disk", "cpus", "ports"})
	if !ok {
		return
	}
	if v := o.get("architectures"); v != nil {
		if items, ok := m.list(o.keyOf("architectures"), v, o.at("architectures")); ok {
			for i, it := range items {
				m.enum(it, check.Index(o.at("architectures"), i), architectures)
			}
		}
	}
	if v := o.get("os"); v != nil {
		if items, ok := m.list(o.keyOf("os"), v, o.at("os")); ok {
			for i, it := range items {
				ip := check.Index(o.at("os"), i)
				io, ok := m.object(nil, it, ip, []string{"id", "version"})
				if !ok {
					continue
				}
				if x := io.get("id"); x == nil {
					m.missing(io, "id", "the distribution, such as `ubuntu`")
				} else {
					m.nonEmpty(x, io.at("id"))
				}
				if x := io.get("version"); x != nil {
					m.constraint(x, io.at("version"))
				}
			}
		}
	}
	if v := o.get("tools"); v != nil {
		if fs, ok := m.entries(o.keyOf("tools"), v, o.at("tools")); ok {
			for _, f := range fs {
				m.constraint(f.val, check.Join(o.at("tools"), f.key.Value))
			}
		}
	}
	for _, k := range []string{"memory", "disk"} {
		if v := o.get(k); v != nil {
			if s, ok := m.nonEmpty(v, o.at(k)); ok && !sizeRE.MatchString(s) {
				m.errorf(v, o.at(k), "`"+s+"` is not a size such as `2GiB` or `512MiB`")
			}
		}
	}
	if v := o.get("cpus"); v != nil {
		if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!int" && v.ShortTag() != "!!float") {
			m.errorf(v, o.at("cpus"), "expected a number of CPUs, got "+compiler.KindName(v))
		} else if f, err := strconv.ParseFloat(v.Value, 64); err != nil || f <= 0 {
			m.errorf(v, o.at("cpus"), "the number of CPUs must be more than zero")
		}
	}
	if v := o.get("ports"); v != nil {
		if items, ok := m.list(o.keyOf("ports"), v, o.at("ports")); ok {
			for i, it := range items {
				ip := check.Index(o.at("ports"), i)
				if it.Kind == yaml.ScalarNode && it.ShortTag() == "!!int" {
					m.integer(it, ip, 1, 65535)
					continue
				}
				s, ok := m.nonEmpty(it, ip)
				if !ok || strings.Contains(s, "{{") {
					continue
				}
				if p, err := strconv.Atoi(s); err != nil || p < 1 || p > 65535 {
					m.errorf(it, ip, "`"+s+"` is not a port; write a number from 1 to 65535 or a template such as `{{ .Parameters.http_port }}`")
				}
			}
		}
	}
}

func hasKey(fs []field, k string) bool {
	for _, f := range fs {
		if f.key.Value == k {
			return true
		}
	}
	return false
}
