package compiler_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
)

func compileText(t *testing.T, src string) *compiler.Definition {
	t.Helper()
	res := compiler.Compile([]byte(src))
	if !res.Valid() {
		t.Fatalf("manifest does not compile: %v", res.Errors())
	}
	return res.Definition
}

// TestCompare edits the reference's examples the way people do and checks
// the changes Compare reads out of the two definitions.
func TestCompare(t *testing.T) {
	minimal := string(readExample(t, "minimal"))
	production := string(readExample(t, "production"))
	cases := []struct {
		name        string
		base        string
		edit        func(string) string
		want        []string
		destructive bool
	}{
		{"nothing changed", production, func(s string) string { return s + "\n# a comment\n" }, nil, false},
		{"change replicas", minimal, func(s string) string { return strings.Replace(s, "min: 2", "min: 3", 1) }, []string{"web: replicas 2 → 3"}, false},
		{"change a replica range", production, func(s string) string { return strings.Replace(s, "max: 5", "max: 8", 1) }, []string{"web: replicas 2 to 5 → 2 to 8"}, false},
		{"remove a value", production, func(s string) string {
			return strings.Replace(s, "      SESSION_SECRET: \"${SESSION_SECRET}\"\n", "", 1)
		}, []string{"web: environment: SESSION_SECRET removed"}, false},
		{"add a database", minimal, func(s string) string {
			return s + "\ndatabases:\n  data:\n    engine: postgres\n    version: 17\n"
		}, []string{"added database data"}, false},
		{"remove a bucket destroys its data", production, func(s string) string {
			for _, k := range []string{"S3_ENDPOINT", "S3_BUCKET", "S3_REGION", "S3_ACCESS_KEY", "S3_SECRET_KEY"} {
				j := strings.Index(s, "      "+k+":")
				s = s[:j] + s[j+strings.Index(s[j:], "\n")+1:]
			}
			return s[:strings.Index(s, "\nbuckets:")+1]
		}, []string{"web: environment: S3_ACCESS_KEY removed", "web: environment: S3_BUCKET removed", "web: environment: S3_ENDPOINT removed",
			"web: environment: S3_REGION removed", "web: environment: S3_SECRET_KEY removed", "removed bucket attachments"}, true},
		{"rename a route's domain value", production, func(s string) string {
			return strings.Replace(s, `domain: "${APP_DOMAIN}"`, `domain: "${WIKI_DOMAIN}"`, 1)
		}, []string{"web: routes.public.domain ${APP_DOMAIN} → ${WIKI_DOMAIN}"}, false},
		{"change a database's storage and a memory limit", production, func(s string) string {
			s = strings.Replace(s, "size: 20GB", "size: 40GB", 1)
			return strings.Replace(s, "memory: 1GB", "memory: 2GB", 1)
		}, []string{"web: resources.limits.memory 1GB → 2GB", "database data: storageSize 20GB → 40GB"}, false},
		{"add a route", minimal, func(s string) string {
			return strings.Replace(s, "    health:", "      admin:\n        domain: admin.example.com\n        port: http\n    health:", 1)
		}, []string{"web: routes.admin added"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, new := compileText(t, tc.base), compileText(t, tc.edit(tc.base))
			changes := compiler.Compare(old, new)
			var got []string
			destructive := false
			for _, c := range changes {
				got = append(got, c.String())
				destructive = destructive || c.Destructive
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Compare =\n  %q\nwant\n  %q", got, tc.want)
			}
			if destructive != tc.destructive {
				t.Errorf("destructive = %v, want %v", destructive, tc.destructive)
			}
			// Backwards, every addition is a removal and every change swaps.
			if back := compiler.Compare(new, old); len(back) != len(changes) {
				t.Errorf("Compare(new, old) has %d changes, want %d", len(back), len(changes))
			}
		})
	}
}

// TestCompareNil: a first revision compares against nothing.
func TestCompareNil(t *testing.T) {
	def := compileText(t, string(readExample(t, "production")))
	got := compiler.Compare(nil, def)
	var texts []string
	for _, c := range got {
		texts = append(texts, c.String())
	}
	want := []string{"name (none) → team-wiki", "description (none) → Wiki with file attachments in a bucket and Postgres storage", "added application web", "added database data", "added bucket attachments"}
	if !slices.Equal(texts, want) {
		t.Errorf("Compare(nil, def) = %q, want %q", texts, want)
	}
	if len(compiler.Compare(def, def)) != 0 {
		t.Errorf("a definition differs from itself")
	}
}
