package compiler_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/skali-dev/studio/compiler"
)

var (
	schemaOnce     sync.Once
	compiledSchema *jsonschema.Schema
	schemaErr      error
)

// schema compiles compiler.Schema() with a JSON Schema 2020-12 validator
// (santhosh-tekuri/jsonschema, a test-only dependency).
func schema(tb testing.TB) *jsonschema.Schema {
	tb.Helper()
	schemaOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(compiler.Schema()))
		if err != nil {
			schemaErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource("skali.json", doc); err != nil {
			schemaErr = err
			return
		}
		compiledSchema, schemaErr = c.Compile("skali.json")
	})
	if schemaErr != nil {
		tb.Fatalf("the JSON Schema does not compile: %v", schemaErr)
	}
	return compiledSchema
}

// validateAgainstSchema reads src as a YAML language server does (aliases
// and merge keys resolved) and validates it against the schema.
func validateAgainstSchema(tb testing.TB, src []byte) error {
	tb.Helper()
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil {
		return fmt.Errorf("YAML: %w", err)
	}
	b, err := json.Marshal(jsonable(v))
	if err != nil {
		return fmt.Errorf("JSON: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return schema(tb).Validate(inst)
}

func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	}
	return v
}

// TestSchemaAcceptsEveryValidManifest follows issue 26: "A test validates
// every valid example and corpus file in the repository against the schema
// (no false refusals)". The examples and the fuzz corpus are here; every
// valid manifest of the rules tests is checked by runRules.
func TestSchemaAcceptsEveryValidManifest(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.skali.yaml"))
	corpus, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzCompile", "*"))
	if len(files) < 4 {
		t.Fatalf("found %d examples, want the reference's four", len(files))
	}
	checked := 0
	for _, f := range append(files, corpus...) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(string(src), "go test fuzz v1\n") {
			lit := strings.TrimSpace(strings.TrimPrefix(string(src), "go test fuzz v1\n"))
			lit = strings.TrimSuffix(strings.TrimPrefix(lit, "[]byte("), ")")
			s, err := strconv.Unquote(lit)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			src = []byte(s)
		}
		if !compiler.Compile(src).Valid() {
			continue
		}
		checked++
		if err := validateAgainstSchema(t, src); err != nil {
			t.Errorf("%s is valid but the schema refuses it: %v", f, err)
		}
	}
	if checked < len(files) {
		t.Errorf("checked %d valid files, want at least the %d examples", checked, len(files))
	}
}

// TestSchemaRefusesWhatTheCompilerRefuses: the schema is not a blank
// check: an unknown key, a value outside an enumeration and a missing name
// are refused, as the compiler refuses them.
func TestSchemaRefusesWhatTheCompilerRefuses(t *testing.T) {
	prod := string(readExample(t, "production"))
	for name, src := range map[string]string{
		"unknown key":       strings.Replace(prod, "    ports:\n", "    prots:\n", 1),
		"value not allowed": strings.Replace(prod, "tls: automatic", "tls: automatc", 1),
		"name missing":      strings.Replace(prod, "name: team-wiki\n", "", 1),
	} {
		if src == prod {
			t.Fatalf("%s: the example did not change", name)
		}
		if compiler.Compile([]byte(src)).Valid() {
			t.Fatalf("%s: the compiler accepts it", name)
		}
		if err := validateAgainstSchema(t, []byte(src)); err == nil {
			t.Errorf("%s: the schema accepts it", name)
		}
	}
}

// TestSchemaHasEveryKey: every key of the reference table, which the
// compiler's unknown-field checks read, is a property of the schema at its
// place, with its description, and every key a valid example uses is in
// the table.
func TestSchemaHasEveryKey(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(compiler.Schema(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", doc["$schema"])
	}
	n := 0
	var walk func(k *compiler.Key, s map[string]any, path string)
	walk = func(k *compiler.Key, s map[string]any, path string) {
		switch k.Type {
		case compiler.TypeObject:
			props, _ := s["properties"].(map[string]any)
			if s["additionalProperties"] != false {
				t.Errorf("%s: unknown keys are not refused", path)
			}
			for _, f := range k.Fields {
				p := strings.TrimPrefix(path+"."+f.Name, ".")
				fs, ok := props[f.Name].(map[string]any)
				if !ok {
					t.Errorf("the schema lacks %s", p)
					continue
				}
				n++
				if fs["description"] != f.Doc || f.Doc == "" {
					t.Errorf("%s: description %q, want %q", p, fs["description"], f.Doc)
				}
				walk(f, fs, p)
			}
		case compiler.TypeMap:
			e, _ := s["additionalProperties"].(map[string]any)
			walk(k.Entry, e, path+".*")
		case compiler.TypeList:
			e, _ := s["items"].(map[string]any)
			walk(k.Entry, e, path+".*")
		case compiler.TypeEnum:
			values, _ := s["enum"].([]any)
			if k.CaseInsensitive {
				values, _ = s["examples"].([]any)
			}
			var got []string
			for _, v := range values {
				got = append(got, v.(string))
			}
			if !slices.Equal(got, k.Values) {
				t.Errorf("%s: enum %v, want %v", path, got, k.Values)
			}
		}
	}
	walk(compiler.Reference, doc, "")
	if n < 100 {
		t.Errorf("walked %d keys; the reference has more", n)
	}
	for _, name := range []string{"production", "rest-of-surface", "two-applications", "minimal"} {
		var v any
		if err := yaml.Unmarshal(readExample(t, name), &v); err != nil {
			t.Fatal(err)
		}
		var keys func(v any, path string)
		keys = func(v any, path string) {
			m, ok := v.(map[string]any)
			if !ok {
				return
			}
			f := compiler.Lookup(path)
			if f == nil {
				t.Errorf("%s: %s is not in the reference table", name, path)
				return
			}
			for k, e := range m {
				p := k
				if f.Type == compiler.TypeMap {
					p = "*"
				}
				if path != "" {
					p = path + "." + p
				}
				if f.Type == compiler.TypeObject || f.Type == compiler.TypeMap {
					keys(e, p)
				}
			}
		}
		keys(v, "")
	}
}
