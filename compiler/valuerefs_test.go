package compiler_test

import (
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
