package compiler_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/skali-dev/studio/compiler"
)

// ValueRefs names the values an expression uses, as ExpandValues reads it:
// ${NAME} and ${NAME:-default}, each name once, malformed references not.
func TestValueRefs(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{"${APP_DOMAIN}", []string{"APP_DOMAIN"}},
		{"www.${APP_DOMAIN}", []string{"APP_DOMAIN"}},
		{"${A}-${B:-x}.${A}", []string{"A", "B"}},
		{"${B:-}", []string{"B"}},
		{"${lower} ${A:x} ${1A} ${", nil},
		{"plain.example.com", nil},
	} {
		if got := compiler.ValueRefs(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("ValueRefs(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

// A stored definition's contract is the contract Compile derived from its
// source, for every reference example.
func TestDefinitionValueContractMatchesCompile(t *testing.T) {
	names, err := filepath.Glob(filepath.Join("testdata", "*.skali.yaml"))
	if err != nil || len(names) < 4 {
		t.Fatalf("examples: %v %v", names, err)
	}
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		res := compiler.Compile(src)
		if !res.Valid() {
			t.Fatalf("%s: invalid", name)
		}
		var def compiler.Definition
		if err := json.Unmarshal(res.Definition.Canonical(), &def); err != nil {
			t.Fatal(err)
		}
		got := def.ValueContract()
		if !slices.Equal(got.Required, res.Values.Required) || !maps.Equal(got.Optional, res.Values.Optional) {
			t.Errorf("%s: contract of the stored definition = %+v, want %+v", name, got, res.Values)
		}
	}
}
