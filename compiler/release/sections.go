package release

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/internal/check"
	"go.yaml.in/yaml/v3"
)

// parameterTypes are the parameter types this validator knows. The
// reference shows port and enum and mentions string-like values such as
// an email; it gives no closed list, so the usual scalar types are
// accepted with their common spellings.
var parameterTypes = []string{"string", "int", "integer", "bool", "boolean", "port", "enum"}

var parameterFields = []string{"type", "default", "description", "services", "values", "required"}

// parametersBlock checks parameters. Parameter names follow the image key
// rule ("the same rule parameters carry") except that the reference's own
// example names parameters http_port and log_level, so underscores are
// allowed too; two names that fold to the same <PRODUCT>_PARAM_<NAME>
// variable (http-port and http_port) are refused, which is the reason the
// rule exists.
func (m *manifestChecker) parametersBlock(key, n *yaml.Node) {
	fs, ok := m.entries(key, n, "parameters")
	if !ok {
		return
	}
	folded := map[string]string{}
	for _, f := range fs {
		name := f.key.Value
		p := check.Join("parameters", name)
		if !parameterKeyRE.MatchString(name) {
			m.errorf(f.key, p, "parameter name `"+name+"` must be lowercase letters, digits, hyphens and underscores, starting and ending with a letter or digit")
		} else {
			v := strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
			if other, dup := folded[v]; dup {
				m.errorf(f.key, p, "parameter `"+name+"` and parameter `"+other+"` both become the variable _PARAM_"+v+"; rename one")
			}
			folded[v] = name
		}
		o, ok := m.object(f.key, f.val, p, parameterFields)
		if !ok {
			continue
		}
		sum := ParameterSummary{Name: name}
		typ := ""
		if v := o.get("type"); v == nil {
			m.missing(o, "type", "one of "+check.QuoteList(parameterTypes))
		} else if t, ok := m.enum(v, o.at("type"), parameterTypes); ok {
			typ = t
		}
		sum.Type = typ
		if v := o.get("description"); v != nil {
			m.str(v, o.at("description"))
		}
		if v := o.get("services"); v != nil {
			m.stringList(o.keyOf("services"), v, o.at("services"))
		}
		var values []string
		if v := o.get("values"); v != nil {
			if typ != "" && typ != "enum" {
				m.errorf(o.keyOf("values"), o.at("values"), "`values` is for `type: enum`; this parameter is `"+typ+"`")
			} else if vs, ok := m.stringList(o.keyOf("values"), v, o.at("values")); ok {
				values = vs
				if len(vs) == 0 {
					m.errorf(where(o.keyOf("values"), v), o.at("values"), "an enum needs at least one value")
				}
			}
		} else if typ == "enum" {
			m.missing(o, "values", "the values the enum accepts, such as `[debug, info, warn, error]`")
		}
		required := false
		if v := o.get("required"); v != nil {
			required, _ = m.boolean(v, o.at("required"))
		}
		sum.Required = required
		if v := o.get("default"); v != nil {
			if required {
				// Reference, in required's own section: "required: true
				// and a default is refused." A rule stated in one field's
				// entry is reported at that field.
				m.errorf(o.get("required"), o.at("required"), "`required: true` and a `default` contradict each other: required says the operator must choose, the default says they need not; drop one")
			}
			sum.Default = m.parameterDefault(v, o.at("default"), typ, values)
		}
		m.res.Summary.Parameters = append(m.res.Summary.Parameters, sum)
	}
}

// parameterDefault checks that a default has the parameter's type.
func (m *manifestChecker) parameterDefault(v *yaml.Node, p, typ string, values []string) string {
	if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		m.errorf(v, p, "a default must be a single value, got "+compiler.KindName(v))
		return ""
	}
	switch typ {
	case "int", "integer":
		if v.ShortTag() != "!!int" {
			m.errorf(v, p, "the default of an integer parameter must be an integer, got "+compiler.KindName(v))
		}
	case "bool", "boolean":
		if v.ShortTag() != "!!bool" {
			m.errorf(v, p, "the default of a boolean parameter must be true or false, got "+compiler.KindName(v))
		}
	case "port":
		if v.ShortTag() != "!!int" {
			m.errorf(v, p, "the default of a port parameter must be a port number, got "+compiler.KindName(v))
		} else {
			m.integer(v, p, 1, 65535)
		}
	case "enum":
		if values != nil && !slices.Contains(values, v.Value) {
			m.errorf(v, p, "default `"+v.Value+"` is not one of the enum's values "+check.QuoteList(values))
		}
	}
	return v.Value
}

// images: "Every reference must be pinned by digest"; an entry is a string
// or a mapping {ref, from}, and "An unrecognised from is refused".
func (m *manifestChecker) images(key, n *yaml.Node) {
	fs, ok := m.entries(key, n, "images")
	if !ok {
		return
	}
	for _, f := range fs {
		name := f.key.Value
		p := check.Join("images", name)
		if !imageKeyRE.MatchString(name) {
			msg := "image key `" + name + "` must be lowercase letters, digits and hyphens, starting and ending with a letter or digit"
			if strings.ContainsAny(name, "._") {
				msg += "; dots and underscores are refused because <PRODUCT>_IMAGE_<NAME> folds both to `_`, so two keys could name the same variable"
			}
			m.errorf(f.key, p, msg)
		}
		v := compiler.ResolveAlias(f.val)
		sum := ImageSummary{Name: name}
		refNode, refPath := v, p
		if v.Kind == yaml.MappingNode {
			o, _ := m.object(f.key, v, p, []string{"ref", "from"})
			refNode, refPath = o.get("ref"), o.at("ref")
			if refNode == nil {
				m.missing(o, "ref", "the image reference, pinned by digest")
			}
			if fv := o.get("from"); fv != nil {
				if s, ok := m.str(fv, o.at("from")); ok {
					if s != "bundle" {
						msg := "`from: " + s + "` is not recognised; the only source is `bundle` (omit `from` for an image that is pulled)"
						if s == "bundled" {
							msg += "; did you mean `bundle`?"
						}
						m.errorf(fv, o.at("from"), msg)
					} else {
						sum.Bundled = true
					}
				}
			}
		} else if name == "from" && v.Kind == yaml.ScalarNode && v.Value == "bundle" {
			m.errorf(f.key, p, "`from: bundle` is at the level of the image names; indent it under the image it belongs to, next to its `ref`")
			continue
		}
		if refNode == nil {
			continue
		}
		ref, ok := m.nonEmpty(refNode, refPath)
		if !ok {
			continue
		}
		sum.Ref = ref
		if !digestRE.MatchString(ref) {
			m.errorf(refNode, refPath, "image `"+ref+"` is not pinned by digest; write it as `name@sha256:<64 hex digits>`: a tag can move, which makes the release mutable and rollback meaningless")
		}
		m.res.Summary.Images = append(m.res.Summary.Images, sum)
	}
}

// configuration: a list of templates rendered onto the host, each with a
// quoted octal mode.
func (m *manifestChecker) configuration(key, n *yaml.Node) {
	items, ok := m.list(key, n, "configuration")
	if !ok {
		return
	}
	for i, it := range items {
		p := check.Index("configuration", i)
		o, ok := m.object(nil, it, p, []string{"template", "target", "mode"})
		if !ok {
			continue
		}
		if v := o.get("template"); v == nil {
			m.missing(o, "template", "the template's path in the release")
		} else {
			m.releasePath(v, o.at("template"))
		}
		if v := o.get("target"); v == nil {
			m.missing(o, "target", "where the rendered file goes on the host")
		} else {
			m.nonEmpty(v, o.at("target"))
		}
		if v := o.get("mode"); v != nil {
			m.mode(v, o.at("mode"))
		}
	}
}

// mode: "The quotes on mode are load-bearing ... Unquoted modes are
// refused rather than applied".
func (m *manifestChecker) mode(v *yaml.Node, p string) {
	if v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!int" || v.ShortTag() == "!!float") {
		msg := "mode must be quoted, such as `mode: \"0640\"`: YAML reads the unquoted `" + v.Value + "` as a number"
		var n int64
		if v.Decode(&n) == nil && strconv.FormatInt(n, 10) != v.Value {
			msg += ", " + strconv.FormatInt(n, 10) + ", which is the permission 0" + strconv.FormatInt(n, 10)
		}
		m.errorf(v, p, msg+", so the file would get permissions nobody chose")
		return
	}
	s, ok := m.str(v, p)
	if ok && !modeRE.MatchString(s) {
		m.errorf(v, p, "mode `"+s+"` is not an octal file mode such as \"0640\"")
	}
}

func (m *manifestChecker) secrets(key, n *yaml.Node) {
	o, ok := m.object(key, n, "secrets", []string{"source", "render_to", "schema"})
	if !ok {
		return
	}
	for _, k := range []string{"source", "render_to"} {
		if v := o.get(k); v != nil {
			m.nonEmpty(v, o.at(k))
		}
	}
	if v := o.get("schema"); v != nil {
		if s, ok := m.releasePath(v, o.at("schema")); ok {
			m.res.Summary.SecretSchema = s
			m.notChecked(v, o.at("schema"), "the secret schema is a separate document; validate it too (with this manifest in the same `studio validate` run its `owner` is checked against `compatibility.min_manager_version`)")
		}
	}
}

// operationNames: "The manager runs four operations, migrate, smoke_test,
// backup and restore, and refuses a manifest that declares any other name".
var operationNames = []string{"migrate", "smoke_test", "backup", "restore"}

var stepKinds = []string{"hook", "runtime-service"}

func (m *manifestChecker) operations(key, n *yaml.Node) {
	fs, ok := m.entries(key, n, "operations")
	if !ok {
		return
	}
	for _, f := range fs {
		name := f.key.Value
		p := check.Join("operations", name)
		if !slices.Contains(operationNames, name) {
			msg := "unknown operation `" + name + "`; the manager runs only " + check.QuoteList(operationNames) + ", and an operation under any other name would never run"
			if s := check.Closest(name, operationNames); s != "" {
				msg += "; did you mean `" + s + "`?"
			}
			m.errorf(f.key, p, msg)
			continue
		}
		m.res.Summary.Operations = append(m.res.Summary.Operations, name)
		v := compiler.ResolveAlias(f.val)
		if v.Kind == yaml.SequenceNode {
			if name != "migrate" {
				m.errorf(f.key, p, "only `migrate` may list several steps; `"+name+"` is a single step")
				continue
			}
			m.needs(f.key, p, "a list of `migrate` steps", migrateListVersion)
			if len(v.Content) == 0 {
				m.errorf(where(f.key, v), p, "list at least one step")
			}
			for i, it := range v.Content {
				if m.step(nil, it, check.Index(p, i)) == "runtime-service" {
					m.undeclaredSchema(f.key, p)
				}
			}
			continue
		}
		if m.step(f.key, v, p) == "runtime-service" && name == "migrate" {
			m.undeclaredSchema(f.key, p)
		}
	}
}

// undeclaredSchema warns, once, about a runtime-service migration without
// compatibility.database_schema_produces. Reference: "A container cannot
// report the schema it leaves ... without it they skip their schema
// checks, and release verify warns."
func (m *manifestChecker) undeclaredSchema(key *yaml.Node, p string) {
	if m.producesSchema {
		return
	}
	m.producesSchema = true
	m.warnf(key, p, "a runtime-service migration cannot report the schema it leaves the database at; declare `compatibility.database_schema_produces`, or rollback, update and the unattended gate skip their schema checks (`release verify` warns too)")
}

// step checks one operation step: a hook runs a command from the release
// on the host, a runtime-service runs a service of the release.
func (m *manifestChecker) step(key, n *yaml.Node, p string) string {
	o, ok := m.object(key, n, p, []string{"kind", "command", "service", "timeout"})
	if !ok {
		return ""
	}
	kind := ""
	if v := o.get("kind"); v == nil {
		m.missing(o, "kind", "`hook` or `runtime-service`")
	} else {
		kind, _ = m.enum(v, o.at("kind"), stepKinds)
	}
	switch kind {
	case "hook":
		if v := o.get("command"); v == nil {
			m.missing(o, "command", "the hook to run, such as `[\"hooks/migrate\"]`")
		} else {
			m.command(o.keyOf("command"), v, o.at("command"))
		}
		if o.get("service") != nil {
			m.errorf(o.keyOf("service"), o.at("service"), "a hook runs on the host and has no `service`; use `kind: runtime-service` to run a service")
		}
	case "runtime-service":
		if v := o.get("service"); v == nil {
			m.missing(o, "service", "the service of the release's runtime configuration to run")
		} else {
			m.nonEmpty(v, o.at("service"))
		}
		if v := o.get("command"); v != nil {
			m.stringList(o.keyOf("command"), v, o.at("command"))
		}
	}
	if v := o.get("timeout"); v != nil {
		m.duration(v, o.at("timeout"))
	}
	return kind
}

// command checks an argv list; a first element that is a relative path
// with a slash is a file of the release, whose existence needs the bundle.
func (m *manifestChecker) command(key, n *yaml.Node, p string) {
	items, ok := m.list(key, n, p)
	if !ok {
		return
	}
	if len(items) == 0 {
		m.errorf(where(key, n), p, "the command must not be empty")
		return
	}
	for i, it := range items {
		s, ok := m.str(it, check.Index(p, i))
		if ok && i == 0 && strings.Contains(s, "/") && !strings.HasPrefix(s, "/") {
			m.releasePath(it, check.Index(p, i))
		}
	}
}

var taskFields = []string{"description", "service", "command", "args", "modes", "timeout"}

// tasks: names are "lowercase letters, digits and dashes, starting with a
// letter", and "Tasks need min_manager_version: "0.8.0" or later". The
// reference names dev and production machines but no closed list of
// modes, so any lower-case identifier is accepted as a mode.
func (m *manifestChecker) tasks(key, n *yaml.Node) {
	fs, ok := m.entries(key, n, "tasks")
	if !ok {
		return
	}
	m.needs(key, "tasks", "`tasks`", tasksVersion)
	for _, f := range fs {
		name := f.key.Value
		p := check.Join("tasks", name)
		if !taskNameRE.MatchString(name) {
			m.errorf(f.key, p, "task name `"+name+"` must be lowercase letters, digits and dashes, starting with a letter, so it can be typed without quoting")
		}
		m.res.Summary.Tasks = append(m.res.Summary.Tasks, name)
		o, ok := m.object(f.key, f.val, p, taskFields)
		if !ok {
			continue
		}
		if v := o.get("service"); v == nil {
			m.missing(o, "service", "the service of the release whose image runs the task")
		} else {
			m.nonEmpty(v, o.at("service"))
		}
		if v := o.get("description"); v != nil {
			m.str(v, o.at("description"))
		}
		if v := o.get("command"); v != nil {
			m.stringList(o.keyOf("command"), v, o.at("command"))
		}
		if v := o.get("args"); v != nil {
			m.boolean(v, o.at("args"))
		}
		if v := o.get("modes"); v != nil {
			if modes, ok := m.stringList(o.keyOf("modes"), v, o.at("modes")); ok {
				items, _ := m.list(nil, v, o.at("modes"))
				for i, s := range modes {
					if !identRE.MatchString(s) && i < len(items) {
						m.errorf(items[i], check.Index(o.at("modes"), i), "mode `"+s+"` must be a lower-case identifier such as `dev`")
					}
				}
			}
		}
		if v := o.get("timeout"); v != nil {
			m.duration(v, o.at("timeout"))
		}
	}
}

var consistencies = []string{"hot", "cold", "exclude"}

// backup.volumes: "Each entry takes one field, and it is required".
func (m *manifestChecker) backup(key, n *yaml.Node) {
	o, ok := m.object(key, n, "backup", []string{"volumes"})
	if !ok {
		return
	}
	v := o.get("volumes")
	if v == nil {
		return
	}
	fs, ok := m.entries(o.keyOf("volumes"), v, o.at("volumes"))
	if !ok {
		return
	}
	for _, f := range fs {
		p := check.Join(o.at("volumes"), f.key.Value)
		if isNull(f.val) {
			m.errorf(f.key, check.Join(p, "consistency"), "missing required field `consistency`: say `hot`, `cold` or `exclude`, or leave the volume out of the map for the default, cold")
			continue
		}
		vo, ok := m.object(f.key, f.val, p, []string{"consistency"})
		if !ok {
			continue
		}
		if c := vo.get("consistency"); c == nil {
			m.missing(vo, "consistency", "`hot`, `cold` or `exclude`; leave the volume out of the map for the default, cold")
		} else {
			m.enum(c, vo.at("consistency"), consistencies)
		}
	}
}

var templateRE = regexp.MustCompile(`\{\{[^}]*\}\}`)

var healthTypes = []string{"http", "command"}

// health.checks: "each entry has a unique name, a type, a timeout (default
// 120s) and an optional start_period". The reference shows two types:
// http, probing url, and command, running command.
func (m *manifestChecker) health(key, n *yaml.Node) {
	o, ok := m.object(key, n, "health", []string{"checks"})
	if !ok {
		return
	}
	v := o.get("checks")
	if v == nil {
		return
	}
	items, ok := m.list(o.keyOf("checks"), v, o.at("checks"))
	if !ok {
		return
	}
	names := map[string]bool{}
	for i, it := range items {
		p := check.Index(o.at("checks"), i)
		co, ok := m.object(nil, it, p, []string{"name", "type", "url", "command", "timeout", "start_period"})
		if !ok {
			continue
		}
		if nv := co.get("name"); nv == nil {
			m.missing(co, "name", "a name unique among the checks")
		} else if s, ok := m.nonEmpty(nv, co.at("name")); ok {
			if names[s] {
				m.errorf(nv, co.at("name"), "health check name `"+s+"` is used twice; each check needs a unique name")
			}
			names[s] = true
			m.res.Summary.HealthChecks = append(m.res.Summary.HealthChecks, s)
		}
		typ := ""
		if tv := co.get("type"); tv == nil {
			m.missing(co, "type", "`http` or `command`")
		} else {
			typ, _ = m.enum(tv, co.at("type"), healthTypes)
		}
		switch typ {
		case "http":
			if uv := co.get("url"); uv == nil {
				m.missing(co, "url", "the URL to probe")
			} else if s, ok := m.nonEmpty(uv, co.at("url")); ok {
				// A template ({{ .Parameters.http_port }}) stands for a value.
				u, err := url.Parse(templateRE.ReplaceAllString(s, "1"))
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
					m.errorf(uv, co.at("url"), "`"+s+"` is not an http:// or https:// URL")
				}
			}
			if co.get("command") != nil {
				m.errorf(co.keyOf("command"), co.at("command"), "`command` belongs to `type: command` checks; an http check probes `url`")
			}
		case "command":
			if cv := co.get("command"); cv == nil {
				m.missing(co, "command", "the command to run, such as `[\"hooks/check-db\"]`")
			} else {
				m.command(co.keyOf("command"), cv, co.at("command"))
			}
			if co.get("url") != nil {
				m.errorf(co.keyOf("url"), co.at("url"), "`url` belongs to `type: http` checks; a command check runs `command`")
			}
		}
		for _, k := range []string{"timeout", "start_period"} {
			if dv := co.get(k); dv != nil {
				m.duration(dv, co.at(k))
			}
		}
	}
}

var compatibilityFields = []string{"rollback_safe", "database_schema_min", "database_schema_max", "database_schema_produces", "min_manager_version", "upgrade_from"}

func (m *manifestChecker) compatibility(key, n *yaml.Node) {
	o, ok := m.object(key, n, "compatibility", compatibilityFields)
	if !ok {
		return
	}
	if v := o.get("min_manager_version"); v != nil {
		m.res.minManagerDeclared = true
		if s, ok := m.nonEmpty(v, o.at("min_manager_version")); ok {
			if ver, ok := parseVersion(s); ok {
				m.res.minManager = ver
			} else {
				m.res.minManagerOK = false
				m.errorf(v, o.at("min_manager_version"), "`"+s+"` is not a manager version such as \"0.4.0\"")
			}
		} else {
			m.res.minManagerOK = false
		}
	}
	if v := o.get("rollback_safe"); v != nil {
		m.boolean(v, o.at("rollback_safe"))
	}
	schema := map[string]int64{}
	m.producesSchema = o.get("database_schema_produces") != nil
	for _, k := range []string{"database_schema_min", "database_schema_max", "database_schema_produces"} {
		if v := o.get(k); v != nil {
			if x, ok := m.integer(v, o.at(k), 0, 1<<53); ok {
				schema[k] = x
			}
		}
	}
	lo, okLo := schema["database_schema_min"]
	hi, okHi := schema["database_schema_max"]
	if okLo && okHi && lo > hi {
		m.errorf(o.get("database_schema_max"), o.at("database_schema_max"), "database_schema_max "+strconv.FormatInt(hi, 10)+" is below database_schema_min "+strconv.FormatInt(lo, 10))
	}
	if v := o.get("upgrade_from"); v != nil {
		m.constraint(v, o.at("upgrade_from"))
	}
}

// extensions: "The namespace must contain a . or a /, so a typo'd core
// field cannot hide inside a vendor block."
func (m *manifestChecker) extensions(key, n *yaml.Node) {
	fs, ok := m.entries(key, n, "extensions")
	if !ok {
		return
	}
	for _, f := range fs {
		if !strings.ContainsAny(f.key.Value, "./") {
			msg := "extension namespace `" + f.key.Value + "` must contain a `.` or a `/`, such as `example.com/telemetry`"
			if s := check.Closest(f.key.Value, topLevelFields); s != "" {
				msg += "; if you meant the core field `" + s + "`, move it to the top level"
			}
			m.errorf(f.key, check.Join("extensions", f.key.Value), msg)
		}
	}
}
