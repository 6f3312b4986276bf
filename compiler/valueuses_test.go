package compiler_test

import (
	"reflect"
	"testing"

	"github.com/skali-dev/studio/compiler"
)

func TestValueUses(t *testing.T) {
	def := compileText(t, string(readExample(t, "production")))
	got := compiler.ValueUses(def)
	want := map[string][]string{
		"APP_DOMAIN":     {"web.routes.public.domain"},
		"SESSION_SECRET": {"web.environment.SESSION_SECRET"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ValueUses = %v, want %v", got, want)
	}
}
