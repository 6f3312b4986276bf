// Package compiler parses skali.yaml manifests strictly, reports every problem
// with its line, column and path, and compiles a valid manifest into a
// canonical Definition, its hash and the value contract. It is pure: bytes
// in, result out, no I/O.
package compiler

import (
	"slices"

	"go.yaml.in/yaml/v3"
)

// KindSkali is the Result.Kind of a skali.yaml manifest.
const KindSkali = "skali"

// Result is the outcome of compiling one manifest.
type Result struct {
	// Kind is the manifest kind, "skali".
	Kind string
	// Diagnostics holds every problem, sorted by line, column and path,
	// without duplicates.
	Diagnostics []Diagnostic
	// Definition is the compiled definition; nil when there is any error.
	Definition *Definition
	// Hash is "sha256:<hex>" of Definition.Canonical(); "" when invalid.
	Hash string
	// Values is the value contract; never nil slices or maps.
	Values ValueContract
}

// Valid reports whether the manifest has no error-severity diagnostic.
func (r *Result) Valid() bool {
	for _, d := range r.Diagnostics {
		if d.Severity == SeverityError {
			return false
		}
	}
	return true
}

// Errors returns the error-severity diagnostics.
func (r *Result) Errors() []Diagnostic { return r.filter(SeverityError) }

// Warnings returns the warning-severity diagnostics.
func (r *Result) Warnings() []Diagnostic { return r.filter(SeverityWarning) }

func (r *Result) filter(s Severity) []Diagnostic {
	var out []Diagnostic
	for _, d := range r.Diagnostics {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	return out
}

// Compile parses and checks one skali.yaml manifest. It takes no file name:
// diagnostics carry their own positions, and the caller that reads files
// names them in its output.
func Compile(src []byte) *Result { return compile(src, true) }

// Diagnose runs every rule Compile runs and returns the same diagnostics,
// without what only a stored revision needs: the definition's canonical
// encoding and hash, and the value contract (Result.Definition and Hash
// stay empty, Values zero). The live editor's check answers from it at
// every pause in typing; the hash alone is about a twentieth of a compile.
func Diagnose(src []byte) []Diagnostic { return compile(src, false).Diagnostics }

// compile is Compile; without full it stops once the diagnostics are known.
func compile(src []byte, full bool) (res *Result) {
	res = &Result{Kind: KindSkali}
	c := &checker{exprs: newExpressionIndex()}
	defer func() {
		// A bug in a rule must not take the Studio down with it.
		if r := recover(); r != nil {
			c.errorf(nil, rootPath, "internal compiler error; please report this manifest")
			res.Definition, res.Hash = nil, ""
			res.Diagnostics = sortDiagnostics(c.diags)
		}
	}()
	root := c.parseDocument(src)
	c.root = root
	var def *Definition
	if root != nil {
		def = c.manifest(root)
	}
	c.finishRefs()
	res.Diagnostics = sortDiagnostics(c.diags)
	if res.Diagnostics == nil {
		res.Diagnostics = []Diagnostic{}
	}
	if !full {
		return res
	}
	res.Values = c.exprs.contract()
	if def != nil && res.Valid() {
		res.Definition = def
		res.Hash = def.Hash()
	}
	return res
}

var topLevelFields = fieldNames("")

// removedTopLevel maps fields removed from the manifest to the fix the
// reference's change history gives.
var removedTopLevel = map[string]string{
	"version": "`version` was removed from the manifest (revision 1); manifests carry no version field: run `skali manifest upgrade` or delete the line",
	"backups": "`backups` was removed from the manifest (revision 4); automatic backups are an environment setting now: run `skali manifest upgrade` to drop the block, then turn them on per environment with `skali backup schedule set`",
	"skali":   "the `skali` release watermark was removed from the manifest (revision 5); run `skali manifest upgrade` to remove it (review history is stored locally in .skali/)",
}

// manifest checks the root mapping and builds the definition.
func (c *checker) manifest(root *yaml.Node) *Definition {
	fs, _ := c.entries(root, rootPath)
	o := object{node: root}
	for _, f := range fs {
		if slices.Contains(topLevelFields, f.key.Value) {
			o.fields = append(o.fields, f)
			continue
		}
		if msg, ok := removedTopLevel[f.key.Value]; ok {
			c.errorf(f.key, keyPath(f.key.Value), msg)
			continue
		}
		c.unknownField(f.key, keyPath(f.key.Value), topLevelFields)
	}
	def := &Definition{}
	if n := o.get("name"); n == nil {
		c.missing(o, "name", "the stable project key, such as `name: my-project`")
	} else if s, ok := c.str(n, keyPath("name")); ok {
		if !IsKey(s) {
			c.errorf(n, keyPath("name"), "project name `"+s+"` "+keyProblem(s))
		}
		def.Name = s
	}
	if n := o.get("description"); n != nil {
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
			// An empty description is the default.
		} else if s, ok := c.str(n, keyPath("description")); ok {
			def.Description = s
		}
	}

	// Services are collected first so environment references and routes can
	// be checked against the complete set.
	declared := map[string]map[string]bool{"databases": {}, "buckets": {}}
	dbFields, dbCount := c.serviceMap(o, "databases", declared["databases"])
	bucketFields, bucketCount := c.serviceMap(o, "buckets", declared["buckets"])
	appFields, appCount := c.serviceMap(o, "applications", nil)
	if dbCount+bucketCount+appCount == 0 {
		c.errorf(root, rootPath, "declare at least one application, database or bucket")
	}
	hosts := &hostClaims{}
	if len(appFields) > 0 {
		def.Applications = make(map[string]*Application, len(appFields))
		for _, f := range appFields {
			if app := c.application(f.val, join(keyPath("applications"), f.key.Value), declared, hosts); app != nil {
				def.Applications[f.key.Value] = app
			}
		}
	}
	if len(dbFields) > 0 {
		def.Databases = make(map[string]*Database, len(dbFields))
		for _, f := range dbFields {
			if db := c.database(f.val, join(keyPath("databases"), f.key.Value)); db != nil {
				def.Databases[f.key.Value] = db
			}
		}
	}
	if len(bucketFields) > 0 {
		def.Buckets = make(map[string]*Bucket, len(bucketFields))
		for _, f := range bucketFields {
			if b := c.bucket(f.val, join(keyPath("buckets"), f.key.Value), hosts); b != nil {
				def.Buckets[f.key.Value] = b
			}
		}
	}
	c.checkHosts(hosts)
	return def
}

// serviceMap returns the entries of a top-level service collection with
// valid keys, and how many entries it declares including invalid ones, so
// a misspelt key is not also reported as "no services".
//
// Every key, valid or not, is recorded in declared (when not nil), so a
// reference to a misspelt service key is reported once, at the key.
func (c *checker) serviceMap(o object, name string, declared map[string]bool) ([]field, int) {
	n := o.get(name)
	if n == nil {
		return nil, 0
	}
	fs, ok := c.entries(n, keyPath(name))
	if !ok {
		return nil, 1
	}
	count := len(fs)
	if declared != nil {
		for _, f := range fs {
			declared[f.key.Value] = true
		}
	}
	return c.keyedEntries(fs, keyPath(name), "service key"), count
}

// keyedEntries drops entries whose key is not a stable identifier,
// reporting each.
func (c *checker) keyedEntries(fs []field, path pathT, what string) []field {
	kept := fs[:0]
	for _, f := range fs {
		if !IsKey(f.key.Value) {
			c.errorf(f.key, join(path, f.key.Value), what+" `"+f.key.Value+"` "+keyProblem(f.key.Value))
			continue
		}
		kept = append(kept, f)
	}
	return kept
}
