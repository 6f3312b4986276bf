package kubernetes_test

// A database for real: the real-node cluster runs the CloudNativePG
// operator (clustertest.CNPG: testcluster --cnpg), whose Cluster of the
// Debian-built PostgreSQL image the application reaches through its
// manifest's outputs.

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
)

// realDatabaseManifest is the production example (compiler/testdata) on
// the test application: its database, bucket, probes, resources, scaling,
// placement and release command, without its build and its route (no
// Gateway implementation runs on the test cluster).
func realDatabaseManifest(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../../compiler/testdata/production.skali.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := string(b)
	for _, r := range [][2]string{
		{"    build:\n      context: .\n      dockerfile: Dockerfile\n", "    image: " + testApp + "\n    command: [\"/testapp\", \"serve\"]\n"},
		{"      S3_SECRET_KEY: \"{{buckets.attachments.secret_key}}\"\n", "      S3_SECRET_KEY: \"{{buckets.attachments.secret_key}}\"\n      TESTAPP_NOTE: \"written by the release command\"\n"},
		{"    routes:\n      public:\n        domain: \"${APP_DOMAIN}\"\n        port: http\n        tls: automatic\n", ""},
		{"path: /health/ready", "path: /readyz"},
		{`command: ["/app/wiki", "migrate", "up"]`, `command: ["/testapp", "migrate"]`},
	} {
		if !strings.Contains(m, r[0]) {
			t.Fatalf("the production example no longer holds %q", r[0])
		}
		m = strings.Replace(m, r[0], r[1], 1)
	}
	return m
}

// TestRealDatabaseByTheOperatorIsMigratedAndRead deploys the production
// example's shape with CloudNativePG running: the driver's Cluster passes
// the real CRD's strict validation and the operator's webhooks, the
// deploy goes on once the operator made it Ready and wrote its Secret, the
// release command connects with {{databases.data.url}} (the Secret's uri,
// the Service's name through the cluster's DNS) as the app user over the
// TLS the operator set up and writes a row, and the application's page
// reads it through its Service.
func TestRealDatabaseByTheOperatorIsMigratedAndRead(t *testing.T) {
	// Beside the kwok tests: it waits for the operator, within a
	// generous timeout, and reads no deadline from the kubelet.
	t.Parallel()
	cluster := clustertest.StartReal(t, clustertest.CNPG)
	f := newFixtureOn(t, cluster, "", realDatabaseManifest(t), "realdb", map[string]string{"SESSION_SECRET": secretValue, "APP_DOMAIN": "wiki.test"})
	f.platform.Opts.PostgresImages = clustertest.PostgresImages
	// The reference's minute is the goal (the operator made a Cluster
	// Ready in about 25 s on an idle 2-core machine); the test machine is
	// shared, so the test allows more and logs what it took.
	f.platform.Opts.ProvisionTimeout = 4 * time.Minute
	started := time.Now()
	run := f.deploy()
	if run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s after %s: %s\n%s", run.Status, time.Since(started).Round(time.Second), run.Reason, f.stepLog(run))
	}
	log := f.stepLog(run)
	t.Logf("the deploy succeeded in %s", time.Since(started).Round(100*time.Millisecond))
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "database data is ready") || strings.Contains(l, "testapp migrate") {
			t.Log(l)
		}
	}
	if !strings.Contains(log, "testapp migrate: connected as app, TLSv1.") {
		t.Errorf("the release command did not connect as app over TLS:\n%s", log)
	}
	if !strings.Contains(log, "row added: written by the release command") {
		t.Errorf("the release command's output lacks its row:\n%s", log)
	}

	db := f.get(kubernetes.KindPGCluster, "data")
	if img := str(db, "spec", "imageName"); img != clustertest.PostgresImages+":17" {
		t.Errorf("the Cluster's image %s", img)
	}
	// The operator's own status, not a played one.
	if ph := str(db, "status", "phase"); ph != "Cluster in healthy state" || str(db, "status", "readyInstances") != "1" {
		t.Errorf("the Cluster's status: phase %q, ready instances %v", ph, at(db, "status", "readyInstances"))
	}

	ip := str(f.get(kubernetes.KindService, "web"), "spec", "clusterIP")
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		resp, err := client.Get("http://" + ip + ":8080/rows")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = resp.Status + " " + string(b)
			if resp.StatusCode == http.StatusOK && string(b) == "1 written by the release command\n" {
				break
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the application's rows through its Service: %s", last)
		}
		time.Sleep(250 * time.Millisecond)
	}
	f.checkNoPlaintext()
}
