package release

import (
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/internal/check"
)

// SecretsResult is the outcome of checking a secret schema.
type SecretsResult struct {
	Diagnostics []compiler.Diagnostic
	NotChecked  []compiler.NotChecked
	// Secrets describes each declared secret.
	Secrets []SecretSummary
	// owners are the owner fields, for CheckOwnerVersion.
	owners []ownerUse
}

type ownerUse struct {
	node *yaml.Node
	path string
}

// SecretSummary is one declared secret.
type SecretSummary struct {
	Name string
	// Generator is the generator kind, or "" when the operator supplies
	// the value.
	Generator string
	Required  bool
	Owner     string
	Services  []string
}

// generatorKinds: "Generator kind is one of password, hex, base64, uuid,
// age-key, or absent — meaning the operator must supply the value."
var generatorKinds = []string{"password", "hex", "base64", "uuid", "age-key"}

// ownerRE: "One or two decimal ids ... as a string".
var ownerRE = regexp.MustCompile(`^([0-9]+)(:([0-9]+))?$`)

const maxOwnerID = 4294967294

// CheckSecretSchema checks a secret schema (secrets.schema.yaml).
//
// A schema that declares owner needs its manifest to declare
// min_manager_version "0.6.0" or later. The schema alone does not say
// which manifest it belongs to, so on its own that rule is reported as
// not checked; CheckOwnerVersion decides it when the manifest is known.
//
// For the fixed-format generators (uuid, age-key) a length is refused
// rather than ignored, and alphabet is accepted only for password, whose
// default alphabet the reference describes.
func CheckSecretSchema(src []byte) (res *SecretsResult) {
	c := &checker{}
	res = &SecretsResult{}
	defer func() {
		if r := recover(); r != nil {
			c.errorf(nil, "", "internal validator error; please report this schema")
		}
		res.Diagnostics = compiler.SortDiagnostics(c.diags)
		res.NotChecked = c.notes
		if res.NotChecked == nil {
			res.NotChecked = []compiler.NotChecked{}
		}
	}()
	root, ds := compiler.ParseYAML(src, "secret schema")
	c.diags = append(c.diags, ds...)
	if root == nil {
		return res
	}
	o, _ := c.object(nil, root, "", []string{"api_version", "secrets"})
	if n := o.get("api_version"); n == nil {
		c.missing(o, "api_version", "write `api_version: "+APIVersion+"`")
	} else if s, ok := c.str(n, "api_version"); ok && s != APIVersion {
		c.errorf(n, "api_version", "api_version `"+s+"` is not supported; this validator reads `"+APIVersion+"`")
	}
	n := o.get("secrets")
	if n == nil {
		c.missing(o, "secrets", "the list of secrets this release uses")
		return res
	}
	items, ok := c.list(o.keyOf("secrets"), n, "secrets")
	if !ok {
		return res
	}
	names := map[string]bool{}
	for i, it := range items {
		p := check.Index("secrets", i)
		so, ok := c.object(nil, it, p, []string{"name", "description", "required", "generator", "services", "rotation_period", "owner"})
		if !ok {
			continue
		}
		var sum SecretSummary
		if v := so.get("name"); v == nil {
			c.missing(so, "name", "the secret's name")
		} else if s, ok := c.nonEmpty(v, so.at("name")); ok {
			// The name becomes a file under render_to.
			if strings.ContainsAny(s, "/\\ ") || s == "." || s == ".." {
				c.errorf(v, so.at("name"), "secret name `"+s+"` becomes a file name; use letters, digits, `_`, `-` and `.`")
			}
			if names[s] {
				c.errorf(v, so.at("name"), "secret `"+s+"` is declared twice")
			}
			names[s] = true
			sum.Name = s
		}
		if v := so.get("description"); v != nil {
			c.str(v, so.at("description"))
		}
		if v := so.get("required"); v != nil {
			sum.Required, _ = c.boolean(v, so.at("required"))
		}
		if v := so.get("services"); v != nil {
			sum.Services, _ = c.stringList(so.keyOf("services"), v, so.at("services"))
		}
		if v := so.get("rotation_period"); v != nil {
			c.duration(v, so.at("rotation_period"))
		}
		if v := so.get("generator"); v != nil {
			sum.Generator = c.generator(so.keyOf("generator"), v, so.at("generator"))
		}
		if v := so.get("owner"); v != nil {
			if s, ok := c.owner(v, so.at("owner")); ok {
				sum.Owner = s
				res.owners = append(res.owners, ownerUse{node: v, path: so.at("owner")})
				c.notChecked(v, so.at("owner"), "`owner` needs the manifest to declare `compatibility.min_manager_version: \"0.6.0\"` or later; validate the manifest in the same run to check it")
			}
		}
		res.Secrets = append(res.Secrets, sum)
	}
	return res
}

func (c *checker) generator(key, n *yaml.Node, p string) string {
	o, ok := c.object(key, n, p, []string{"kind", "length", "alphabet"})
	if !ok {
		return ""
	}
	kind := ""
	if v := o.get("kind"); v == nil {
		c.missing(o, "kind", "one of "+check.QuoteList(generatorKinds)+"; omit `generator` for a value the operator supplies")
	} else {
		kind, _ = c.enum(v, o.at("kind"), generatorKinds)
	}
	if v := o.get("length"); v != nil {
		if kind == "uuid" || kind == "age-key" {
			c.errorf(o.keyOf("length"), o.at("length"), "a `"+kind+"` generator has a fixed format and takes no `length`")
		} else {
			c.integer(v, o.at("length"), 1, 4096)
		}
	}
	if v := o.get("alphabet"); v != nil {
		if kind != "" && kind != "password" {
			c.errorf(o.keyOf("alphabet"), o.at("alphabet"), "`alphabet` is for `password` generators")
		} else {
			c.nonEmpty(v, o.at("alphabet"))
		}
	}
	return kind
}

// owner: "Numeric, and quoted. One or two decimal ids, each from 0 to
// 4294967294, as a string. A name is refused".
func (c *checker) owner(v *yaml.Node, p string) (string, bool) {
	if v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!int" || v.ShortTag() == "!!float") {
		c.errorf(v, p, "owner must be quoted, such as `owner: \""+v.Value+"\"`: it is a string of one or two numeric ids")
		return "", false
	}
	s, ok := c.str(v, p)
	if !ok {
		return "", false
	}
	mm := ownerRE.FindStringSubmatch(s)
	if mm == nil {
		c.errorf(v, p, "owner `"+s+"` must be a numeric uid or uid:gid, such as \"65532:65532\"; a name is refused because it would resolve through the host's users, while the user that reads the file is the one in the image")
		return "", false
	}
	for _, id := range []string{mm[1], mm[3]} {
		if id == "" {
			continue
		}
		if x, err := strconv.ParseUint(id, 10, 64); err != nil || x > maxOwnerID {
			c.errorf(v, p, "owner id "+id+" is out of range; each id is from 0 to 4294967294")
			return "", false
		}
	}
	return s, true
}

// CheckOwnerVersion decides the owner rule of a secret schema against the
// manifest it belongs to: every owner is an error when the manifest
// declares a min_manager_version below 0.6.0. It replaces the "not checked"
// notes about owner with that verdict.
func CheckOwnerVersion(schema *SecretsResult, manifest *ManifestResult) {
	have, ok := manifest.MinManagerVersion()
	if !ok || have == "" {
		return
	}
	v, _ := parseVersion(have)
	kept := schema.NotChecked[:0]
	for _, n := range schema.NotChecked {
		if !strings.HasPrefix(n.Message, "`owner` needs") {
			kept = append(kept, n)
		}
	}
	schema.NotChecked = kept
	if !v.less(ownerVersion) {
		return
	}
	for _, o := range schema.owners {
		schema.Diagnostics = append(schema.Diagnostics, compiler.Diagnostic{
			Severity: compiler.SeverityError, Path: o.path, Line: o.node.Line, Column: o.node.Column,
			Message: "`owner` needs the manifest to declare `compatibility.min_manager_version: \"" + ownerVersion.String() + "\"` or later; it " + manifest.declaredManager() + ", so an older manager would call owner an unknown field instead of saying it is too old",
		})
	}
	schema.Diagnostics = compiler.SortDiagnostics(schema.Diagnostics)
}
