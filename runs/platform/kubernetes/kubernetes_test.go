package kubernetes_test

// These tests deploy to a real Kubernetes control plane (the repository's
// testcluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) whose nodes and pods are kwok's simulations. The cluster
// runs no cert-manager, CloudNativePG or bucket operator, and no metrics
// server: their objects are checked as applied, and where a test needs one
// of them (or the kubelet) to act, it plays it and says so (cert-manager
// in certificates_test.go).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/runs/platforms"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const secretValue = "s3cr3t-value-never-shown"

// resolver answers every domain with the loopback edge.
type resolver struct{}

func (resolver) LookupIP(ctx context.Context, network, host string) ([]net.IP, error) {
	return []net.IP{net.ParseIP("127.0.0.1")}, nil
}

// syncBuffer is a log sink the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// namespacesInUse maps the namespace of every fixture alive to its test.
var namespacesInUse sync.Map

type fixture struct {
	t        testing.TB
	ctx      context.Context
	db       *store.DB
	vault    *store.Vault
	svc      *runs.Service
	platform *kubernetes.Platform
	client   *kubernetes.Client
	env      *store.Environment
	project  *store.Project
	logs     *syncBuffer
	ns       string

	mu          sync.Mutex
	annotations map[string]map[string]string // "app/kind" → pod annotations
}

// newFixture compiles manifest into a project whose environment is named
// after the test (so tests sharing the cluster never share a namespace),
// sets values, and runs the Studio's runs on the Kubernetes platform.
func newFixture(t *testing.T, manifest, envName string, values map[string]string) *fixture {
	t.Helper()
	return newFixtureAs(t, "", manifest, envName, values)
}

// newFixtureAs is newFixture with the driver's requests made as user (the
// test reads back as the cluster's admin).
func newFixtureAs(t *testing.T, user, manifest, envName string, values map[string]string) *fixture {
	t.Helper()
	return newFixtureOn(t, clustertest.Start(t), user, manifest, envName, values)
}

// newFixtureOn is newFixtureAs on the given cluster (StartReal's, for
// real pods).
func newFixtureOn(t testing.TB, cluster *clustertest.Cluster, user, manifest, envName string, values map[string]string) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{t: t, ctx: ctx, logs: &syncBuffer{}, annotations: map[string]map[string]string{}}
	f.db = storetest.NewDB(t)
	keys, err := store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: store.GenerateKey()})
	if err != nil {
		t.Fatal(err)
	}
	f.vault = store.NewVault(f.db, keys)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lp, id, err := local.New(ctx, f.db, f.vault, local.Options{Resolver: resolver{}, EdgePort: l.Addr().(*net.TCPAddr).Port, ProbeTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: id.Handler()}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	if f.client, err = kubernetes.LoadClient(cluster.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	driver := f.client
	if user != "" {
		if driver, err = kubernetes.LoadClient(cluster.Kubeconfig); err != nil {
			t.Fatal(err)
		}
		driver.Impersonate = user
	}
	logger := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.platform = kubernetes.New(driver, kubernetes.Options{Logger: logger, Gateway: "infra/edge",
		Prober: lp.Prober, DevIssuer: lp.DevIssuer(), ReleaseValues: platforms.ReleaseValues(f.db, f.vault),
		PodAnnotations: func(app, kind string) map[string]string {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.annotations[app+"/"+kind]
		}})
	t.Cleanup(f.platform.Close)
	f.svc = runs.NewService(f.db, f.vault, f.platform, time.Now, logger)

	res := compiler.Compile([]byte(manifest))
	if !res.Valid() {
		t.Fatalf("manifest: %v", res.Errors())
	}
	p, _, err := f.db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: res.Definition.Name, Source: manifest,
		Canonical: res.Definition.Canonical(), Hash: res.Hash})
	if err != nil {
		t.Fatal(err)
	}
	f.project = p
	if f.env, err = f.db.CreateEnvironment(ctx, store.Actor{}, p.ID, envName); err != nil {
		t.Fatal(err)
	}
	for k, v := range values {
		if _, err := f.vault.SetValue(ctx, store.Actor{}, f.env, k, v); err != nil {
			t.Fatalf("set %s: %v", k, err)
		}
	}
	f.ns = kubernetes.NamespaceName(p.Name, envName)
	// Tests run in parallel on one cluster: each owns its namespaces (a
	// test may make two fixtures share one, to see them collide).
	if other, taken := namespacesInUse.LoadOrStore(f.ns, t.Name()); !taken {
		t.Cleanup(func() { namespacesInUse.Delete(f.ns) })
	} else if other != t.Name() {
		t.Fatalf("namespace %s is %s's too: name the environment or project after the test", f.ns, other)
	}
	t.Cleanup(func() {
		// The namespace goes with the test (in the background).
		_ = f.client.Delete(context.Background(), kubernetes.KindNamespace, "", f.ns)
	})
	return f
}

// TestStudioManifestsGrantWhatTheDriverNeeds applies deploy/kubernetes to
// the cluster and deploys the production example as the Studio's service
// account: its RBAC lacks no verb the driver uses.
func TestStudioManifestsGrantWhatTheDriverNeeds(t *testing.T) {
	t.Parallel()
	cluster := clustertest.Start(t)
	if cluster.Kubectl == "" {
		t.Skip("no kubectl beside the cluster's kubeconfig")
	}
	out, err := exec.Command(cluster.Kubectl, "--kubeconfig", cluster.Kubeconfig, "apply", "--server-side", "-f", "../../../deploy/kubernetes/studio.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("applying deploy/kubernetes: %v: %s", err, out)
	}
	manifest, err := os.ReadFile("../../../compiler/testdata/production.skali.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureAs(t, "system:serviceaccount:skali-studio:skali-studio", string(manifest), "as-studio", map[string]string{"SESSION_SECRET": secretValue, "APP_DOMAIN": "wiki.test"})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy as the Studio's service account %s: %s", run.Status, run.Reason)
	}
	// And nothing beyond: it reads back the values Secret it wrote (its
	// version restarts pods), and no other Secret.
	if _, err := f.client.Apply(f.ctx, kubernetes.KindSecret, kubernetes.Object{
		"metadata": kubernetes.Object{"name": "not-the-studios", "namespace": f.ns}, "type": "Opaque"}); err != nil {
		t.Fatal(err)
	}
	f.client.Impersonate = "system:serviceaccount:skali-studio:skali-studio"
	_, errValues := f.client.Get(f.ctx, kubernetes.KindSecret, f.ns, kubernetes.ValuesSecret)
	_, err = f.client.Get(f.ctx, kubernetes.KindSecret, f.ns, "not-the-studios")
	f.client.Impersonate = ""
	if errValues != nil {
		t.Fatalf("reading the values Secret back as the Studio: %v", errValues)
	}
	var se *kubernetes.StatusError
	if !errors.As(err, &se) || se.Code != 403 {
		t.Fatalf("reading another Secret as the Studio: %v, want forbidden", err)
	}
}

// runState says what the database holds of a run: its status, lease and
// checkpoints, for a failure's message.
func (f *fixture) runState(runID int64) string {
	var b strings.Builder
	var status string
	var owner *string
	var expires *time.Time
	f.db.Pool.QueryRow(context.Background(), `SELECT status, lease_owner, lease_expires_at FROM runs WHERE id = $1`, runID).Scan(&status, &owner, &expires)
	fmt.Fprintf(&b, "run %d: %s, lease %v until %v\n", runID, status, deref(owner), expires)
	cps, _ := f.db.Checkpoints(context.Background(), runID)
	for _, cp := range cps {
		fmt.Fprintf(&b, "  %d %s %s: %s\n", cp.Position, cp.Kind, cp.Name, cp.Status)
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

func (f *fixture) annotate(app, kind string, a map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.annotations[app+"/"+kind] = a
}

func (f *fixture) addRevision(manifest string) {
	f.t.Helper()
	res := compiler.Compile([]byte(manifest))
	if !res.Valid() {
		f.t.Fatalf("manifest: %v", res.Errors())
	}
	if _, _, err := f.db.AddRevision(f.ctx, store.Actor{}, f.project.ID, store.NewRevision{Name: res.Definition.Name, Source: manifest,
		Canonical: res.Definition.Canonical(), Hash: res.Hash}); err != nil {
		f.t.Fatal(err)
	}
}

// deploy starts a deploy of the newest revision and executes it until it
// ends.
func (f *fixture) deploy(req ...runs.DeployRequest) *store.Run {
	f.t.Helper()
	req = append(req, runs.DeployRequest{})
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	run, err := f.svc.StartDeploy(f.ctx, store.Actor{}, env, req[0])
	if err != nil {
		f.t.Fatalf("start deploy: %v", err)
	}
	for i := 0; ; i++ {
		res, err := f.svc.Runner.Execute(f.ctx, run.ID)
		if err != nil {
			f.t.Fatalf("execute run %d: %v\n%s", run.ID, err, f.runState(run.ID))
		}
		if res.Finished {
			break
		}
		if i > 20 {
			f.t.Fatalf("run %d did not finish; it waits until %v", run.ID, res.WaitUntil)
		}
		time.Sleep(time.Until(res.WaitUntil))
	}
	got, err := f.db.RunByID(f.ctx, run.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

func (f *fixture) get(k kubernetes.Kind, name string) kubernetes.Object {
	f.t.Helper()
	o, err := f.client.Get(f.ctx, k, f.ns, name)
	if err != nil {
		f.t.Fatalf("reading %s %s/%s back: %v", k.Kind, f.ns, name, err)
	}
	return o
}

// at reads a path of keys and indexes in an object.
func at(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := o.(map[string]any)
			o = m[k]
		case int:
			s, _ := o.([]any)
			if k >= len(s) {
				return nil
			}
			o = s[k]
		}
	}
	return o
}

func str(o any, path ...any) string { return fmt.Sprint(at(o, path...)) }

// checkNoPlaintext reads every object of the namespace the Studio made or
// caused (and their events) and the logs: the value's plaintext is in the
// values Secret only.
func (f *fixture) checkNoPlaintext() {
	f.t.Helper()
	for _, k := range kubernetes.Kinds() {
		if k.Kind == "Namespace" {
			continue
		}
		items, err := f.client.List(f.ctx, k, f.ns, "")
		if err != nil {
			f.t.Fatalf("listing %s: %v", k.Kind, err)
		}
		for _, it := range items {
			data, _ := json.Marshal(it)
			name := str(it, "metadata", "name")
			if k.Kind == "Secret" && name == kubernetes.ValuesSecret {
				continue
			}
			if bytes.Contains(data, []byte(secretValue)) {
				f.t.Errorf("%s %s holds a value's plaintext", k.Kind, name)
			}
		}
	}
	if strings.Contains(f.logs.String(), secretValue) {
		f.t.Errorf("the log holds a value's plaintext")
	}
	evs, err := f.db.EnvironmentEventsAfter(f.ctx, f.env.ID, 0, 10000)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, e := range evs {
		if bytes.Contains(e.Payload, []byte(secretValue)) {
			f.t.Errorf("an environment event holds a value's plaintext")
		}
	}
	// The runs' reasons, checkpoints and log lines (what run pages show).
	var stored int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT
		(SELECT count(*) FROM runs WHERE environment_id = $1 AND (runs::text LIKE '%' || $2 || '%'))
		+ (SELECT count(*) FROM run_checkpoints c JOIN runs r ON r.id = c.run_id WHERE r.environment_id = $1 AND c::text LIKE '%' || $2 || '%')
		+ (SELECT count(*) FROM run_log_lines l JOIN runs r ON r.id = l.run_id WHERE r.environment_id = $1 AND l.text LIKE '%' || $2 || '%')`,
		f.env.ID, secretValue).Scan(&stored); err != nil {
		f.t.Fatal(err)
	}
	if stored > 0 {
		f.t.Errorf("%d runs, checkpoints or run log lines hold a value's plaintext", stored)
	}
}

func TestProductionExampleDeploysEveryObject(t *testing.T) {
	t.Parallel()
	manifest, err := os.ReadFile("../../../compiler/testdata/production.skali.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, string(manifest), "prod-example", map[string]string{"SESSION_SECRET": secretValue, "APP_DOMAIN": "wiki.test"})
	run := f.deploy()
	if run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s", run.Status, run.Reason)
	}

	ns := f.get(kubernetes.KindNamespace, f.ns)
	if str(ns, "metadata", "labels", kubernetes.LabelManagedBy) != "skali-studio" || str(ns, "metadata", "labels", kubernetes.LabelProject) != "team-wiki" ||
		str(ns, "metadata", "labels", kubernetes.LabelEnvironment) != "prod-example" {
		t.Errorf("namespace labels %v", at(ns, "metadata", "labels"))
	}

	sec := f.get(kubernetes.KindSecret, kubernetes.ValuesSecret)
	if at(sec, "data", "SESSION_SECRET") == nil || at(sec, "data", "APP_DOMAIN") == nil {
		t.Errorf("the values Secret holds %v", keysOf(at(sec, "data")))
	}

	// Blue-green: the first deploy starts the blue Deployment, which the
	// Service selects.
	dep := f.get(kubernetes.KindDeployment, "web-blue")
	if at(dep, "spec", "replicas") != nil && managedReplicas(dep) {
		t.Errorf("the Studio applied spec.replicas of an autoscaled Deployment")
	}
	c := at(dep, "spec", "template", "spec", "containers", 0)
	if img := str(c, "image"); !strings.HasPrefix(img, "registry.local/"+f.ns+"/web:") {
		t.Errorf("image %s", img)
	}
	if str(dep, "spec", "strategy", "type") != "RollingUpdate" || str(dep, "spec", "strategy", "rollingUpdate", "maxSurge") != "100%" ||
		str(dep, "spec", "strategy", "rollingUpdate", "maxUnavailable") != "0" {
		t.Errorf("strategy %v (blue-green: a full new set before the old one goes)", at(dep, "spec", "strategy"))
	}
	if str(dep, "spec", "progressDeadlineSeconds") != "595" { // the 10m default timeout less 5 s
		t.Errorf("progressDeadlineSeconds %v", at(dep, "spec", "progressDeadlineSeconds"))
	}
	env := map[string]any{}
	for _, e := range at(c, "env").([]any) {
		env[str(e, "name")] = e
	}
	if str(env["SESSION_SECRET"], "valueFrom", "secretKeyRef", "name") != "values" || str(env["SESSION_SECRET"], "valueFrom", "secretKeyRef", "key") != "SESSION_SECRET" {
		t.Errorf("SESSION_SECRET %v", env["SESSION_SECRET"])
	}
	if str(env["DATABASE_URL"], "valueFrom", "secretKeyRef", "name") != "data-app" || str(env["S3_ACCESS_KEY"], "valueFrom", "secretKeyRef", "key") != "AWS_ACCESS_KEY_ID" {
		t.Errorf("DATABASE_URL %v, S3_ACCESS_KEY %v", env["DATABASE_URL"], env["S3_ACCESS_KEY"])
	}
	if str(c, "readinessProbe", "httpGet", "path") != "/health/ready" || str(c, "livenessProbe", "httpGet", "path") != "/healthz" ||
		str(c, "startupProbe", "httpGet", "port") != "8080" {
		t.Errorf("probes %v %v %v", at(c, "startupProbe"), at(c, "readinessProbe"), at(c, "livenessProbe"))
	}
	if str(c, "resources", "requests", "cpu") != "200m" || str(c, "resources", "limits", "memory") != "1G" {
		t.Errorf("resources %v", at(c, "resources"))
	}
	if tsc := at(dep, "spec", "template", "spec", "topologySpreadConstraints", 0); str(tsc, "topologyKey") != "kubernetes.io/hostname" || str(tsc, "whenUnsatisfiable") != "ScheduleAnyway" {
		t.Errorf("spread %v", tsc)
	}
	if str(dep, "spec", "template", "spec", "terminationGracePeriodSeconds") != "30" {
		t.Errorf("grace period %v", at(dep, "spec", "template", "spec", "terminationGracePeriodSeconds"))
	}
	if n := at(dep, "status", "availableReplicas"); n == nil || n.(float64) < 1 {
		t.Errorf("available replicas %v", n)
	}

	hpa := f.get(kubernetes.KindHPA, "web")
	if str(hpa, "spec", "minReplicas") != "2" || str(hpa, "spec", "maxReplicas") != "5" ||
		str(hpa, "spec", "metrics", 0, "resource", "target", "averageUtilization") != "70" {
		t.Errorf("autoscaler spec %v", at(hpa, "spec"))
	}

	svc := f.get(kubernetes.KindService, "web")
	if str(svc, "spec", "ports", 0, "port") != "8080" || str(svc, "spec", "selector", kubernetes.LabelComponent) != "application" ||
		str(svc, "spec", "selector", kubernetes.LabelSlot) != "blue" {
		t.Errorf("service spec %v", at(svc, "spec"))
	}

	route := f.get(kubernetes.KindHTTPRoute, "web-public")
	if str(route, "spec", "hostnames") != "[wiki.test]" || str(route, "spec", "parentRefs", 0, "name") != "edge" ||
		str(route, "spec", "rules", 0, "backendRefs", 0, "port") != "8080" {
		t.Errorf("HTTPRoute spec %v", at(route, "spec"))
	}

	jobs, err := f.client.List(f.ctx, kubernetes.KindJob, f.ns, kubernetes.LabelService+"=web")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("release Jobs %d, %v", len(jobs), err)
	}
	job := jobs[0]
	if str(job, "spec", "backoffLimit") != "0" || str(job, "spec", "activeDeadlineSeconds") != "300" ||
		str(job, "spec", "template", "spec", "containers", 0, "command") != "[/app/wiki migrate up]" || str(job, "status", "succeeded") != "1" {
		t.Errorf("release Job spec %v status %v", at(job, "spec"), at(job, "status"))
	}

	db := f.get(kubernetes.KindPGCluster, "data")
	if str(db, "spec", "instances") != "1" || str(db, "spec", "imageName") != "ghcr.io/cloudnative-pg/postgresql:17" || str(db, "spec", "storage", "size") != "20000000000" {
		t.Errorf("database Cluster spec %v", at(db, "spec"))
	}
	obc := f.get(kubernetes.KindBucketClaim, "attachments")
	if !strings.HasPrefix(str(obc, "spec", "generateBucketName"), f.ns) {
		t.Errorf("bucket claim spec %v", at(obc, "spec"))
	}

	// Every object the Studio applied carries the four labels and one
	// field manager.
	for _, o := range []kubernetes.Object{sec, dep, hpa, svc, route, job, db, obc} {
		l := at(o, "metadata", "labels").(map[string]any)
		if l[kubernetes.LabelManagedBy] != "skali-studio" || l[kubernetes.LabelProject] != "team-wiki" || l[kubernetes.LabelEnvironment] != "prod-example" {
			t.Errorf("%s %s labels %v", str(o, "kind"), str(o, "metadata", "name"), l)
		}
		if str(o, "kind") != "Secret" && l[kubernetes.LabelService] == nil {
			t.Errorf("%s %s has no service label", str(o, "kind"), str(o, "metadata", "name"))
		}
	}

	// A second deploy of the same revision rewrites nothing.
	before := str(dep, "metadata", "generation")
	if again := f.deploy(runs.DeployRequest{Redeploy: true}); again.Status != store.RunSucceeded {
		t.Fatalf("second deploy %s: %s", again.Status, again.Reason)
	}
	if after := str(f.get(kubernetes.KindDeployment, "web-blue"), "metadata", "generation"); after != before {
		t.Errorf("the unchanged Deployment went from generation %s to %s", before, after)
	}
	for _, o := range []kubernetes.Object{sec, svc, route} {
		k := map[string]kubernetes.Kind{"Secret": kubernetes.KindSecret, "Service": kubernetes.KindService, "HTTPRoute": kubernetes.KindHTTPRoute}[str(o, "kind")]
		if now := f.get(k, str(o, "metadata", "name")); str(now, "metadata", "resourceVersion") != str(o, "metadata", "resourceVersion") {
			t.Errorf("the unchanged %s %s was rewritten", k.Kind, str(o, "metadata", "name"))
		}
	}

	f.checkNoPlaintext()
}

func keysOf(o any) []string {
	m, _ := o.(map[string]any)
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// managedReplicas reports whether skali-studio owns spec.replicas.
func managedReplicas(dep kubernetes.Object) bool {
	mf, _ := at(dep, "metadata", "managedFields").([]any)
	for _, m := range mf {
		if str(m, "manager") == "skali-studio" && strings.Contains(fmt.Sprint(at(m, "fieldsV1")), "f:replicas") {
			return true
		}
	}
	return false
}

const rollingManifest = `name: stuck
applications:
  web:
    image: registry.local/web:1
    environment:
      GREETING: "hello ${SESSION_SECRET}"
    ports:
      http:
        port: 8080
    scaling:
      replicas:
        min: 2
        max: 2
    deployment:
      rollout:
        strategy: rolling
        maxSurge: 1
        maxUnavailable: 0
        timeout: 20s
`

func TestRolloutThatNeverBecomesReadyFailsWithTheDeadlinesMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollingManifest, "stuck-rollout", map[string]string{"SESSION_SECRET": secretValue})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", run.Status, run.Reason)
	}
	// The next revision's pods run but never become ready (a kwok stage).
	f.annotate("web", "rollout", map[string]string{"testcluster.skali.dev/never-ready": "true"})
	f.addRevision(strings.Replace(rollingManifest, "web:1", "web:2", 1))
	run := f.deploy()
	if run.Status != store.RunFailed {
		t.Fatalf("deploy %s: %s, want failed", run.Status, run.Reason)
	}
	if !strings.Contains(run.Reason, "has timed out progressing") || !strings.Contains(run.Reason, "0 of 2 replicas ready") {
		t.Fatalf("reason %q: want the Deployment's ProgressDeadlineExceeded message and the ready count", run.Reason)
	}
	// The old pods stay: maxUnavailable 0 kept both ready.
	dep := f.get(kubernetes.KindDeployment, "web")
	if str(dep, "status", "readyReplicas") != "2" || str(dep, "spec", "template", "spec", "containers", 0, "image") != "registry.local/web:2" {
		t.Fatalf("deployment status %v", at(dep, "status"))
	}
	// The value is in the pod spec by reference only.
	if env := str(dep, "spec", "template", "spec", "containers", 0, "env"); !strings.Contains(env, "$(SKALI_VALUE_SESSION_SECRET)") {
		t.Fatalf("env %s", env)
	}
	f.checkNoPlaintext()
}

// TestResumedRolloutReattachesInsteadOfRecreating stops an execution
// mid-rollout (its context cancelled: an in-process stand-in for kill -9,
// leaving its lease to expire) and resumes the run with a new platform:
// the Deployment is found as it is, not re-created or rolled again.
func TestResumedRolloutReattachesInsteadOfRecreating(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollingManifest, "resumed", map[string]string{"SESSION_SECRET": secretValue})
	f.svc.Runner.Lease = 2 * time.Second
	// The pods run but do not become ready by themselves.
	f.annotate("web", "rollout", map[string]string{"testcluster.skali.dev/never-ready": "true"})
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.svc.StartDeploy(f.ctx, store.Actor{}, env, runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	go func() {
		defer cancel()
		for ctx.Err() == nil {
			pods, _ := f.client.List(ctx, kubernetes.KindPod, f.ns, kubernetes.LabelComponent+"=application")
			if len(pods) == 2 && str(pods[0], "status", "phase") == "Running" && str(pods[1], "status", "phase") == "Running" {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	_, _ = f.svc.Runner.Execute(ctx, run.ID)
	if r, _ := f.db.RunByID(f.ctx, run.ID); store.RunFinished(r.Status) {
		t.Fatalf("the run ended (%s: %s) before it was stopped", r.Status, r.Reason)
	}
	before := f.get(kubernetes.KindDeployment, "web")

	// The pods become ready (the test plays the kubelet), while no Studio
	// runs.
	pods, err := f.client.List(f.ctx, kubernetes.KindPod, f.ns, kubernetes.LabelComponent+"=application")
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		if err := f.client.PatchStatus(f.ctx, kubernetes.KindPod, f.ns, str(pod, "metadata", "name"),
			[]byte(`{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"ContainersReady","status":"True"}]}}`)); err != nil {
			t.Fatal(err)
		}
	}

	// A new process: a new platform and service on the same database.
	logger := slog.New(slog.NewTextHandler(f.logs, nil))
	f.platform.Close()
	f.platform = kubernetes.New(f.client, f.platform.Opts)
	t.Cleanup(f.platform.Close)
	f.svc = runs.NewService(f.db, f.vault, f.platform, time.Now, logger)
	// Only the stopped process's lease is short (it must expire for the
	// run to be taken over); the new one keeps the default, so a loaded
	// machine's late renewal does not lose it (seen: ErrTakenOver).
	for i := 0; ; i++ {
		res, err := f.svc.Runner.Execute(f.ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if res.Finished {
			break
		}
		if i > 20 {
			t.Fatalf("the resumed run did not finish")
		}
		time.Sleep(time.Until(res.WaitUntil))
	}
	if r, _ := f.db.RunByID(f.ctx, run.ID); r.Status != store.RunSucceeded {
		t.Fatalf("resumed run %s: %s", r.Status, r.Reason)
	}
	after := f.get(kubernetes.KindDeployment, "web")
	if str(after, "metadata", "uid") != str(before, "metadata", "uid") || str(after, "metadata", "generation") != str(before, "metadata", "generation") {
		t.Fatalf("the Deployment was re-created or changed: uid %s → %s, generation %s → %s", str(before, "metadata", "uid"), str(after, "metadata", "uid"),
			str(before, "metadata", "generation"), str(after, "metadata", "generation"))
	}
	if rs, err := f.client.List(f.ctx, kubernetes.KindReplicaSet, f.ns, kubernetes.LabelService+"=web"); err != nil || len(rs) != 1 {
		t.Fatalf("%d ReplicaSets (%v), want the one of the first execution", len(rs), err)
	}
}

const releaseManifest = `name: release-fails
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
    deployment:
      releaseCommand:
        command: ["/app/migrate"]
        timeout: 1m
`

func TestFailedReleaseJobRollsNothingOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, releaseManifest, "release-fails", map[string]string{"SESSION_SECRET": secretValue})
	f.annotate("web", "release", map[string]string{"testcluster.skali.dev/fail": "true"})
	run := f.deploy()
	if run.Status != store.RunFailed {
		t.Fatalf("deploy %s: %s, want failed", run.Status, run.Reason)
	}
	if !strings.Contains(run.Reason, "The release command of web failed: the command exited with code 1") {
		t.Fatalf("reason %q", run.Reason)
	}
	if deps, err := f.client.List(f.ctx, kubernetes.KindDeployment, f.ns, ""); err != nil || len(deps) != 0 {
		t.Fatalf("%d Deployments exist after a failed release (%v)", len(deps), err)
	}
	f.checkNoPlaintext()
}

// TestBackupsOfWhatKubernetesCannotSnapshotAreRefused: the Kubernetes
// platform takes backups and drills of databases, and of volumes and
// buckets once it knows the Studio's image (its helper pods run it);
// without it, an environment with a volume or a bucket is told which,
// before a schedule is saved.
func TestBackupsOfWhatKubernetesCannotSnapshotAreRefused(t *testing.T) {
	p := kubernetes.New(nil, kubernetes.Options{})
	if _, err := platform.Backups(p); err != nil {
		t.Fatalf("platform.Backups: %v", err)
	}
	if _, err := platform.Drills(p); err != nil {
		t.Fatalf("platform.Drills: %v", err)
	}
	manifest, err := os.ReadFile("../../../compiler/testdata/production.skali.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := strings.Replace(string(manifest), "    shutdown:\n", "    volumes:\n      uploads:\n        mountPath: /uploads\n        size: 1GB\n    shutdown:\n", 1)
	m = strings.Replace(m, "      replicas:\n        min: 2\n        max: 5\n      autoscaling:\n        cpu:\n          targetUtilization: 70\n", "      replicas:\n        min: 1\n        max: 1\n", 1)
	res := compiler.Compile([]byte(m))
	if !res.Valid() {
		t.Fatalf("manifest: %v", res.Errors())
	}
	want := "The Kubernetes platform snapshots buckets only when the Studio is told its own image (--helper-image) (attachments); the Kubernetes platform snapshots volumes only when the Studio is told its own image (--helper-image) (web/uploads): backups are not turned on, so that no snapshot leaves them out."
	if got := runs.CannotSnapshot(p, res.Definition); got != want {
		t.Fatalf("CannotSnapshot:\n got %q\nwant %q", got, want)
	}
	p.Opts.HelperImage = "registry.local/skali/studio:latest"
	if got := runs.CannotSnapshot(p, res.Definition); got != "" {
		t.Fatalf("CannotSnapshot with a helper image: %q", got)
	}
}

func TestNamespaceNames(t *testing.T) {
	if got := kubernetes.NamespaceName("Team_Wiki", "production"); got != "team-wiki-production" {
		t.Errorf("got %s", got)
	}
	long := kubernetes.NamespaceName(strings.Repeat("a", 40), strings.Repeat("b", 40))
	if len(long) > 63 || !strings.HasPrefix(long, strings.Repeat("a", 40)) {
		t.Errorf("long name %s (%d)", long, len(long))
	}
	if other := kubernetes.NamespaceName(strings.Repeat("a", 40), strings.Repeat("b", 39)+"c"); other == long {
		t.Errorf("two environments share namespace %s", long)
	}
}

// TestEnvironmentsAreIsolatedByNamespace deploys one project to two
// environments: each has its own namespace, objects and values, and an
// environment whose derived namespace is already another's is refused
// without touching it.
func TestEnvironmentsAreIsolatedByNamespace(t *testing.T) {
	t.Parallel()
	a := newFixture(t, rollingManifest, "iso-a", map[string]string{"SESSION_SECRET": "value-of-a"})
	b := newFixture(t, rollingManifest, "iso-b", map[string]string{"SESSION_SECRET": "value-of-b"})
	for _, f := range []*fixture{a, b} {
		if run := f.deploy(); run.Status != store.RunSucceeded {
			t.Fatalf("deploy to %s: %s: %s", f.ns, run.Status, run.Reason)
		}
	}
	if a.ns == b.ns {
		t.Fatalf("both environments use namespace %s", a.ns)
	}
	for _, c := range []struct {
		f    *fixture
		want string
	}{{a, "value-of-a"}, {b, "value-of-b"}} {
		sec := c.f.get(kubernetes.KindSecret, kubernetes.ValuesSecret)
		if got := str(sec, "data", "SESSION_SECRET"); got != base64.StdEncoding.EncodeToString([]byte(c.want)) {
			t.Errorf("%s holds another environment's value", c.f.ns)
		}
		if deps, err := c.f.client.List(c.f.ctx, kubernetes.KindDeployment, c.f.ns, ""); err != nil || len(deps) != 1 {
			t.Errorf("%s has %d Deployments (%v), want its own one", c.f.ns, len(deps), err)
		}
	}

	// Project "stuck-iso" environment "a" derives the namespace of project
	// "stuck" environment "iso-a": refused, and nothing in it changes.
	other := newFixture(t, strings.Replace(rollingManifest, "name: stuck", "name: stuck-iso", 1), "a", map[string]string{"SESSION_SECRET": "intruder"})
	if other.ns != a.ns {
		t.Fatalf("namespaces %s and %s: the test needs them equal", other.ns, a.ns)
	}
	run := other.deploy()
	if run.Status != store.RunFailed || !strings.Contains(run.Reason, "already exists and does not belong to stuck-iso/a") {
		t.Fatalf("deploy into another environment's namespace: %s: %s", run.Status, run.Reason)
	}
	if got := str(a.get(kubernetes.KindSecret, kubernetes.ValuesSecret), "data", "SESSION_SECRET"); got != base64.StdEncoding.EncodeToString([]byte("value-of-a")) {
		t.Fatalf("the refused deploy changed %s's values", a.ns)
	}
}

const autoscaledManifest = `name: autoscaled
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
    scaling:
      replicas:
        min: 2
        max: 6
      autoscaling:
        cpu:
          targetUtilization: 70
    deployment:
      rollout:
        strategy: rolling
`

// TestRedeployUnderAnAutoscalerKeepsItsReplicas deploys an autoscaled
// application, lets the cluster's HorizontalPodAutoscaler controller bring
// it to its minimum, then scales it to 4 through the scale subresource (the
// test plays the autoscaler answering load: the cluster has no metrics
// server). A deploy of a new image then succeeds without a field conflict
// on spec.replicas and leaves the 4 replicas as they are.
func TestRedeployUnderAnAutoscalerKeepsItsReplicas(t *testing.T) {
	t.Parallel()
	cluster := clustertest.Start(t)
	if cluster.Kubectl == "" {
		t.Skip("no kubectl beside the cluster's kubeconfig")
	}
	f := newFixture(t, autoscaledManifest, "hpa", map[string]string{"SESSION_SECRET": secretValue})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", run.Status, run.Reason)
	}
	// The autoscaler controller raises the Deployment to its minimum.
	for deadline := time.Now().Add(2 * time.Minute); str(f.get(kubernetes.KindDeployment, "web"), "spec", "replicas") != "2"; {
		if time.Now().After(deadline) {
			t.Fatalf("the autoscaler did not raise the Deployment to its minimum of 2 replicas: %v", at(f.get(kubernetes.KindHPA, "web"), "status"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	out, err := exec.Command(cluster.Kubectl, "--kubeconfig", cluster.Kubeconfig, "-n", f.ns, "scale", "deployment/web", "--replicas=4").CombinedOutput()
	if err != nil {
		t.Fatalf("scaling: %v: %s", err, out)
	}
	f.addRevision(strings.Replace(autoscaledManifest, "web:1", "web:2", 1))
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy of a new image under the autoscaler %s: %s", run.Status, run.Reason)
	}
	dep := f.get(kubernetes.KindDeployment, "web")
	if str(dep, "spec", "replicas") != "4" || str(dep, "spec", "template", "spec", "containers", 0, "image") != "registry.local/web:2" {
		t.Fatalf("after the deploy: %s replicas of %s, want 4 of registry.local/web:2", str(dep, "spec", "replicas"),
			str(dep, "spec", "template", "spec", "containers", 0, "image"))
	}
	if managedReplicas(dep) {
		t.Fatalf("the Studio took ownership of spec.replicas from the autoscaler")
	}
	if str(dep, "status", "updatedReplicas") != "4" {
		t.Fatalf("%s of 4 replicas run the new image", str(dep, "status", "updatedReplicas"))
	}
}
