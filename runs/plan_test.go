package runs_test

import (
	"fmt"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// TestPlanFlagsAHostnameBuiltFromAValueUsedElsewhere: a hostname is public,
// so a value that any revision of the project uses outside hostnames (where
// it may be a secret) must not build one unnoticed; a value used only in
// hostnames, like APP_DOMAIN, is what hostnames are for.
func TestPlanFlagsAHostnameBuiltFromAValueUsedElsewhere(t *testing.T) {
	t.Parallel()
	aliased := func(alias string) string {
		return strings.Replace(planBase, `{domain: "${APP_DOMAIN}", port: http}`, `{domain: "${APP_DOMAIN}", port: http, aliases: ["`+alias+`"]}`, 1)
	}
	cases := []struct {
		name      string
		from, to  string
		older     string // revision 1 when set (from is then revision 2)
		wantNames string
		wantUses  string
	}{
		{name: "value only in hostnames", from: planBase, to: aliased("www.${APP_DOMAIN}")},
		{name: "first deploy of a value only in hostnames", to: planBase},
		{name: "alias from a value the new revision uses in environment", from: planBase, to: aliased("${API_TOKEN}.x.example"),
			wantNames: "API_TOKEN", wantUses: "web.environment.TOKEN@3"},
		{name: "domain from a value the active revision uses in environment", from: planBase,
			to:        strings.Replace(strings.Replace(planBase, `"${APP_DOMAIN}"`, `"${API_TOKEN}.example.com"`, 1), `TOKEN: "${API_TOKEN}"`, `TOKEN: "fixed"`, 1),
			wantNames: "API_TOKEN", wantUses: "web.environment.TOKEN@2"},
		{name: "first deploy with the value in environment", to: aliased("${API_TOKEN}.x.example"),
			wantNames: "API_TOKEN", wantUses: "web.environment.TOKEN@3"},
		{name: "value used elsewhere only by an older revision", older: strings.Replace(planBase, `TOKEN: "${API_TOKEN}"`, `TOKEN: "${API_TOKEN}"`+"\n      SHOWN: \"${APP_DOMAIN}\"", 1),
			from: planBase, to: planBase, wantNames: "APP_DOMAIN", wantUses: "web.environment.SHOWN@1"},
		{name: "bucket route from a value used in environment", from: planBase,
			to:        strings.Replace(planBase, "quotas: {storage: 10GB}", "quotas: {storage: 10GB}\n    route: {domain: \"files-${API_TOKEN}.example.com\"}", 1),
			wantNames: "API_TOKEN", wantUses: "web.environment.TOKEN@3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := runs.PlanInput{To: compile(t, c.to), ToRevision: 3, StoredValues: []string{"API_TOKEN", "APP_DOMAIN"},
				Revisions: map[int]*compiler.Definition{}}
			if c.from != "" {
				in.From, in.FromRevision = compile(t, c.from), 2
				in.Revisions[2] = in.From
			}
			if c.older != "" {
				in.Revisions[1] = compile(t, c.older)
			}
			p := runs.PlanDeploy(in)
			var uses []string
			for _, pv := range p.PublicValues {
				for _, u := range pv.Elsewhere {
					uses = append(uses, fmt.Sprintf("%s@%d", u.Field, u.Revision))
				}
				if len(pv.Hostnames) == 0 {
					t.Errorf("%s: no hostname named", pv.Name)
				}
			}
			if got := strings.Join(p.PublicValueNames(), ","); got != c.wantNames {
				t.Errorf("public values = %q, want %q", got, c.wantNames)
			}
			if got := strings.Join(uses, ","); got != c.wantUses {
				t.Errorf("used elsewhere = %q, want %q", got, c.wantUses)
			}
			if p.PublishesValues() != (c.wantNames != "") {
				t.Errorf("PublishesValues = %v", p.PublishesValues())
			}
		})
	}
}

// TestPlanCountsOrphanedValuesItWasNotGiven: a plan made from the set names
// the revision references and the first orphaned ones (PlanInput's
// OrphanedCount) lists those and counts them all (issue 41).
func TestPlanCountsOrphanedValuesItWasNotGiven(t *testing.T) {
	t.Parallel()
	to := compile(t, planBase)
	p := runs.PlanDeploy(runs.PlanInput{To: to, ToRevision: 1, StoredValues: []string{"OLD_B", "APP_DOMAIN", "OLD_A"}, OrphanedCount: 40})
	if strings.Join(p.OrphanedValues, ",") != "OLD_A,OLD_B" || p.OrphanedCount != 40 || strings.Join(p.MissingValues, ",") != "API_TOKEN" {
		t.Fatalf("orphaned %q count %d missing %q, want OLD_A,OLD_B of 40 and API_TOKEN missing", p.OrphanedValues, p.OrphanedCount, p.MissingValues)
	}
	p = runs.PlanDeploy(runs.PlanInput{To: to, ToRevision: 1, StoredValues: []string{"APP_DOMAIN", "OLD_A"}})
	if p.OrphanedCount != 1 {
		t.Fatalf("orphaned count without OrphanedCount = %d, want 1 (the names given)", p.OrphanedCount)
	}
}
