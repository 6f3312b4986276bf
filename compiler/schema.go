package compiler

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode"
)

// SchemaPath is where the Studio serves the schema, under its public URL.
const SchemaPath = "/schema/skali.json"

// Schema returns a JSON Schema (draft 2020-12) of skali.yaml generated from
// Reference, for editors with a YAML language server: every object refuses
// unknown keys, enumerations list their values and every key carries its
// description. It states the shape only; the compiler's other rules (names,
// references between sections, ranges, units) stay the compiler's, so the
// schema never refuses a manifest the compiler accepts.
func Schema() []byte {
	s := schemaOf(Reference)
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["title"] = "skali.yaml"
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic(err) // maps of strings and slices always marshal
	}
	return append(b, '\n')
}

var scalarTypes = []string{"string", "number", "boolean"}

func schemaOf(k *Key) map[string]any {
	s := map[string]any{}
	if k.Doc != "" {
		s["description"] = k.Doc
	}
	switch k.Type {
	case TypeString, TypeSize, TypeDuration:
		s["type"] = "string"
	case TypeInteger:
		s["type"] = "integer"
	case TypeBoolean:
		s["type"] = "boolean"
	case TypeScalar:
		s["type"] = scalarTypes
	case TypeCPU:
		s["type"] = []string{"number", "string"}
	case TypePort:
		s["type"] = []string{"string", "integer"}
	case TypeEnum:
		if !k.CaseInsensitive {
			s["enum"] = k.Values
			break
		}
		// ECMA-262 patterns have no (?i): each letter lists both cases.
		alts := make([]string, len(k.Values))
		for i, v := range k.Values {
			var b strings.Builder
			for _, r := range v {
				if lo, up := unicode.ToLower(r), unicode.ToUpper(r); lo != up {
					b.WriteString("[" + string(up) + string(lo) + "]")
				} else {
					b.WriteString(regexp.QuoteMeta(string(r)))
				}
			}
			alts[i] = b.String()
		}
		s["type"] = "string"
		s["pattern"] = "^(" + strings.Join(alts, "|") + ")$"
		s["examples"] = k.Values
	case TypeArgv:
		s["type"] = "array"
		s["items"] = map[string]any{"type": scalarTypes}
	case TypeList:
		s["type"] = "array"
		s["items"] = schemaOf(k.Entry)
	case TypeMap:
		s["type"] = "object"
		s["additionalProperties"] = schemaOf(k.Entry)
	case TypeObject:
		s["type"] = "object"
		props := map[string]any{}
		var req []string
		for _, f := range k.Fields {
			props[f.Name] = schemaOf(f)
			if f.Required {
				req = append(req, f.Name)
			}
		}
		s["properties"] = props
		s["additionalProperties"] = false
		if len(req) > 0 {
			s["required"] = req
		}
	}
	return s
}
