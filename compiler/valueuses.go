package compiler

import (
	"maps"
	"reflect"
	"slices"
	"strings"
)

// ValueUses returns, for each value name the definition references with
// ${NAME}, the fields that reference it, sorted: an application's fields as
// "web.routes.public.domain" or "web.environment.DATABASE_PASSWORD",
// a database's or bucket's as "buckets.files.route.domain".
func ValueUses(def *Definition) map[string][]string {
	uses := map[string][]string{}
	if def == nil {
		return uses
	}
	for _, name := range slices.Sorted(maps.Keys(def.Applications)) {
		collectUses(name, reflect.ValueOf(def.Applications[name]), uses)
	}
	for _, name := range slices.Sorted(maps.Keys(def.Databases)) {
		collectUses("databases."+name, reflect.ValueOf(def.Databases[name]), uses)
	}
	for _, name := range slices.Sorted(maps.Keys(def.Buckets)) {
		collectUses("buckets."+name, reflect.ValueOf(def.Buckets[name]), uses)
	}
	for _, paths := range uses {
		slices.Sort(paths)
	}
	return uses
}

func collectUses(path string, v reflect.Value, uses map[string][]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			collectUses(path, v.Elem(), uses)
		}
	case reflect.String:
		for _, n := range ValueRefs(v.String()) {
			if !slices.Contains(uses[n], path) {
				uses[n] = append(uses[n], path)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			collectUses(path, v.Index(i), uses)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			collectUses(path+"."+k.String(), v.MapIndex(k), uses)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			collectUses(path+"."+name, v.Field(i), uses)
		}
	}
}
