package kubernetes_test

import (
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/store"
)

const provisionManifest = `name: provision
applications:
  web:
    image: registry.local/web:1
    environment:
      DATABASE_URL: "{{databases.DB.url}}"
      S3_BUCKET: "{{buckets.BUCKET.name}}"
    ports:
      http:
        port: 8080
    deployment:
      releaseCommand:
        command: ["/app/migrate"]
        timeout: 1m
databases:
  DB:
    engine: postgres
    version: 17
buckets:
  BUCKET:
    visibility: private
`

func provisionManifestOf(db, bucket string) string {
	return strings.NewReplacer("DB", db, "BUCKET", bucket).Replace(provisionManifest)
}

// The test cluster plays CloudNativePG and a bucket provisioner
// (testcluster/operators.go): a deploy goes on once the Cluster is Ready
// with its Secret written and the claim is Bound, and says so.
func TestProvisioningWaitsForTheOperatorsThenTheReleaseCommandRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, provisionManifestOf("data", "media"), "provision-ok", map[string]string{"SESSION_SECRET": secretValue})
	run := f.deploy()
	if run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s", run.Status, run.Reason)
	}
	db := f.get(kubernetes.KindPGCluster, "data")
	if str(db, "status", "secretsResourceVersion", "applicationSecretVersion") == "" {
		t.Fatalf("the Cluster's status %v", at(db, "status"))
	}
	log := f.stepLog(run)
	for _, want := range []string{"database data is ready", "bucket media is ready"} {
		if !strings.Contains(log, want) {
			t.Errorf("the run's log lacks %q:\n%s", want, log)
		}
	}
}

// A Cluster the operator never makes ready fails the step with the
// operator's own condition at the deadline, and no release command starts.
func TestADatabaseNeverReadyFailsWithTheOperatorsConditionAndNoReleaseRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, provisionManifestOf("stuckdb", "media"), "provision-stuck", map[string]string{"SESSION_SECRET": secretValue})
	f.platform.Opts.ProvisionTimeout = 3 * time.Second
	started := time.Now()
	run := f.deploy()
	if run.Status != store.RunFailed {
		t.Fatalf("deploy %s: %s, want failed", run.Status, run.Reason)
	}
	if !strings.Contains(run.Reason, "database stuckdb was not ready within 3s") || !strings.Contains(run.Reason, "instance 1 cannot start") {
		t.Fatalf("reason %q: want the wait and the operator's condition message", run.Reason)
	}
	if took := time.Since(started); took > 30*time.Second {
		t.Errorf("failed after %s", took)
	}
	if jobs, err := f.client.List(f.ctx, kubernetes.KindJob, f.ns, ""); err != nil || len(jobs) != 0 {
		t.Fatalf("%d release Jobs started before the database was ready (%v)", len(jobs), err)
	}
}

func TestABucketNeverBoundFailsWithItsPhase(t *testing.T) {
	t.Parallel()
	f := newFixture(t, provisionManifestOf("data", "stuckbucket"), "provision-stuck-bucket", map[string]string{"SESSION_SECRET": secretValue})
	f.platform.Opts.ProvisionTimeout = 3 * time.Second
	run := f.deploy()
	if run.Status != store.RunFailed || !strings.Contains(run.Reason, "bucket stuckbucket was not ready within 3s") || !strings.Contains(run.Reason, "the claim is Pending") {
		t.Fatalf("deploy %s: %q", run.Status, run.Reason)
	}
}
