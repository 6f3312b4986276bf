package runs_test

import (
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
)

func compile(t *testing.T, src string) *compiler.Definition {
	t.Helper()
	res := compiler.Compile([]byte(src))
	if !res.Valid() {
		t.Fatalf("manifest invalid: %v", res.Errors())
	}
	return res.Definition
}

const planBase = `name: shop
applications:
  web:
    image: ghcr.io/acme/web:1
    environment:
      TOKEN: "${API_TOKEN}"
    ports:
      http: {port: 8080}
    routes:
      public: {domain: "${APP_DOMAIN}", port: http}
databases:
  data: {engine: postgres, version: 17}
buckets:
  files:
    quotas: {storage: 10GB}
`

func TestPlanRefusesWhatNoConfirmationAllows(t *testing.T) {
	from := compile(t, planBase)
	cases := []struct {
		name, from, to string
		want           string
	}{
		{"database version", "version: 17", "version: 18", "Database data: the version of a live database cannot change (17 → 18)."},
		{"database isolation", "{engine: postgres, version: 17}", "{engine: postgres, version: 17, isolation: dedicated}", "Database data: the isolation of a live database cannot change (shared → dedicated)."},
		{"bucket visibility", "quotas: {storage: 10GB}", "visibility: public-read\n    quotas: {storage: 10GB}", "Bucket files: visibility: public-read is rejected at deploy."},
		{"bucket versioning", "quotas: {storage: 10GB}", "versioning: enabled\n    quotas: {storage: 10GB}", "Bucket files: versioning: enabled is rejected at deploy."},
		{"objects quota", "quotas: {storage: 10GB}", "quotas: {storage: 10GB, objects: 5}", "Bucket files: quotas.objects is rejected at deploy."},
		{"max object size", "quotas: {storage: 10GB}", "quotas: {storage: 10GB, maxObjectSize: 1GB}", "Bucket files: quotas.maxObjectSize is rejected at deploy."},
		{"quota below usage", "quotas: {storage: 10GB}", "quotas: {storage: 1GB}", "Bucket files: the storage quota cannot drop to 1GB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := strings.Replace(planBase, c.from, c.to, 1)
			if src == planBase {
				t.Fatalf("the case changes nothing")
			}
			res := compiler.Compile([]byte(src))
			if res.Definition == nil {
				t.Skipf("the compiler rejects this manifest: %v", res.Errors())
			}
			p := runs.PlanDeploy(runs.PlanInput{From: from, To: res.Definition, FromRevision: 1, ToRevision: 2,
				StoredValues: []string{"API_TOKEN", "APP_DOMAIN"}, BucketBytes: map[string]int64{"files": 2_000_000_000}})
			if p.CanStart() || !strings.Contains(strings.Join(p.Refused, "\n"), c.want) {
				t.Fatalf("refused = %q, want one containing %q", p.Refused, c.want)
			}
		})
	}
}

func TestPlanRemovalsAndRollbacksAreDestructive(t *testing.T) {
	base := compile(t, planBase)
	renamed := compile(t, strings.Replace(planBase, "files:", "uploads:", 1))
	p := runs.PlanDeploy(runs.PlanInput{From: base, To: renamed, FromRevision: 1, ToRevision: 2, StoredValues: []string{"API_TOKEN", "APP_DOMAIN"}})
	if !p.NeedsConfirmation() || !p.CanStart() {
		t.Fatalf("renaming a bucket: destructive %q refused %q", p.Destructive, p.Refused)
	}
	var actions []string
	for _, c := range p.Changes {
		actions = append(actions, c.Kind+" "+c.Name+" "+c.Action)
	}
	if got, want := strings.Join(actions, "; "), "bucket uploads created; bucket files removed"; got != want {
		t.Fatalf("changes = %q, want %q", got, want)
	}
	noDB := compile(t, strings.Replace(planBase, "databases:\n  data: {engine: postgres, version: 17}\n", "", 1))
	p = runs.PlanDeploy(runs.PlanInput{From: base, To: noDB, FromRevision: 3, ToRevision: 1, StoredValues: []string{"API_TOKEN", "APP_DOMAIN"}})
	if !p.Rollback || len(p.Destructive) != 1 || !strings.Contains(p.Destructive[0], "from before database data was added") {
		t.Fatalf("rollback before a database: %+v", p.Destructive)
	}
}

func TestPlanListsFieldChangesMissingAndOrphanedValues(t *testing.T) {
	from := compile(t, planBase)
	to := compile(t, strings.Replace(planBase, "web:1", "web:2", 1))
	p := runs.PlanDeploy(runs.PlanInput{From: from, To: to, FromRevision: 1, ToRevision: 2, StoredValues: []string{"APP_DOMAIN", "OLD"}})
	if len(p.Changes) != 1 || len(p.Changes[0].Fields) != 1 {
		t.Fatalf("changes = %+v", p.Changes)
	}
	if f := p.Changes[0].Fields[0]; f.Field != "image" || f.Old != "ghcr.io/acme/web:1" || f.New != "ghcr.io/acme/web:2" {
		t.Fatalf("field change = %+v", f)
	}
	if strings.Join(p.MissingValues, ",") != "API_TOKEN" || strings.Join(p.OrphanedValues, ",") != "OLD" || p.CanStart() {
		t.Fatalf("missing %q orphaned %q", p.MissingValues, p.OrphanedValues)
	}
}

func TestPlanFlagsAHostnameValueUsedElsewhere(t *testing.T) {
	from := compile(t, planBase)
	to := compile(t, strings.Replace(planBase, `"${APP_DOMAIN}"`, `"${API_TOKEN}.example.com"`, 1))
	p := runs.PlanDeploy(runs.PlanInput{From: from, To: to, FromRevision: 1, ToRevision: 2, StoredValues: []string{"API_TOKEN", "APP_DOMAIN"}})
	if len(p.SharedHostnameValues) != 1 || p.SharedHostnameValues[0].Name != "API_TOKEN" {
		t.Fatalf("shared = %+v", p.SharedHostnameValues)
	}
}
