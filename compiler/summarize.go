package compiler

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// Summarize describes in one short line what changed from prev to next, such
// as "web: image changed; added database data; removed bucket files". It
// returns "first revision" when prev is nil and "no deployed change" when
// both compile to the same definition.
func Summarize(prev, next *Definition) string {
	if prev == nil {
		return "first revision"
	}
	if next == nil {
		return "definition removed"
	}
	if bytes.Equal(prev.Canonical(), next.Canonical()) {
		return "no deployed change"
	}
	var parts []string
	if prev.Name != next.Name {
		parts = append(parts, "project renamed to "+next.Name)
	}
	if prev.Description != next.Description {
		parts = append(parts, "description changed")
	}
	parts = append(parts, diffServices("application", prev.Applications, next.Applications, applicationChanges)...)
	parts = append(parts, diffServices("database", prev.Databases, next.Databases, databaseChanges)...)
	parts = append(parts, diffServices("bucket", prev.Buckets, next.Buckets, bucketChanges)...)
	if len(parts) == 0 {
		return "no deployed change"
	}
	return strings.Join(parts, "; ")
}

func diffServices[T any](kind string, prev, next map[string]*T, changes func(key string, a, b *T) string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(next)) {
		if _, ok := prev[k]; !ok {
			out = append(out, "added "+kind+" "+k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(prev)) {
		if _, ok := next[k]; !ok {
			out = append(out, "removed "+kind+" "+k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(next)) {
		a, ok := prev[k]
		if !ok {
			continue
		}
		if s := changes(k, a, next[k]); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func same(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// changedList renders "key: a changed, b changed" for the named aspects that differ.
func changedList(key string, aspects []string) string {
	if len(aspects) == 0 {
		return ""
	}
	return key + ": " + strings.Join(aspects, ", ")
}

func applicationChanges(key string, a, b *Application) string {
	var ch []string
	check := func(name string, x, y any) {
		if !same(x, y) {
			ch = append(ch, name+" changed")
		}
	}
	if a.Image != b.Image || (a.Build == nil) != (b.Build == nil) {
		ch = append(ch, "image changed")
	}
	if a.Build != nil && b.Build != nil {
		check("build", a.Build, b.Build)
	}
	check("platforms", a.Platforms, b.Platforms)
	check("command", a.Command, b.Command)
	check("environment", a.Environment, b.Environment)
	check("ports", a.Ports, b.Ports)
	check("routes", a.Routes, b.Routes)
	check("health", a.Health, b.Health)
	check("resources", a.Resources, b.Resources)
	check("scaling", a.Scaling, b.Scaling)
	check("placement", a.Placement, b.Placement)
	check("deployment", a.Deployment, b.Deployment)
	check("shutdown", a.Shutdown, b.Shutdown)
	check("volumes", a.Volumes, b.Volumes)
	return changedList(key, ch)
}

func databaseChanges(key string, a, b *Database) string {
	var ch []string
	if a.Engine != b.Engine {
		ch = append(ch, "engine changed")
	}
	if a.Version != b.Version {
		ch = append(ch, "version changed")
	}
	if a.Isolation != b.Isolation {
		ch = append(ch, "isolation changed")
	}
	if a.Availability != b.Availability {
		ch = append(ch, "availability changed")
	}
	if a.StorageSize != b.StorageSize {
		ch = append(ch, "storage changed")
	}
	if !same(a.Extensions, b.Extensions) {
		ch = append(ch, "extensions changed")
	}
	if a.RecoveryPointInTime != b.RecoveryPointInTime {
		ch = append(ch, "recovery changed")
	}
	return changedList("database "+key, ch)
}

func bucketChanges(key string, a, b *Bucket) string {
	var ch []string
	if a.Visibility != b.Visibility {
		ch = append(ch, "visibility changed")
	}
	if a.Quotas != b.Quotas {
		ch = append(ch, "quotas changed")
	}
	if a.Versioning != b.Versioning {
		ch = append(ch, "versioning changed")
	}
	if a.Lifecycle != b.Lifecycle {
		ch = append(ch, "lifecycle changed")
	}
	if !same(a.CORS, b.CORS) {
		ch = append(ch, "cors changed")
	}
	if !same(a.Route, b.Route) {
		ch = append(ch, "route changed")
	}
	return changedList("bucket "+key, ch)
}
