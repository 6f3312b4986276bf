package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
)

const studioManifests = "../../deploy/kubernetes/studio.yaml"

// rbacRule is one rule of a Role or ClusterRole of deploy/kubernetes, as
// RBAC reads it: a Role grants only in its own namespace; a rule with
// resourceNames only for requests naming one of them (so never a list,
// watch or deletecollection).
type rbacRule struct {
	Role      string
	Namespace string // "" for a ClusterRole: every namespace
	// PerNamespace marks the rules of a ClusterRole that no
	// ClusterRoleBinding of the manifests binds: the Studio binds it
	// itself (a RoleBinding) in each namespace it creates, so it grants
	// only in the namespaces In (those the Studio created).
	PerNamespace bool
	In           map[string]bool
	Groups       []string
	Resources    []string
	Verbs        []string
	Names        []string
}

// allows reports whether the rule authorizes req.
func (r rbacRule) allows(req clustertest.Request) bool {
	if r.Namespace != "" && req.Namespace != r.Namespace {
		return false
	}
	if r.PerNamespace && (req.Namespace == "" || !r.In[req.Namespace] || req.Resource == "namespaces") {
		return false
	}
	if !slices.Contains(r.Verbs, req.Verb) || !slices.Contains(r.Groups, req.Group) || !slices.Contains(r.Resources, req.Resource) {
		return false
	}
	return len(r.Names) == 0 || (req.Name != "" && slices.Contains(r.Names, req.Name))
}

func (r rbacRule) String() string {
	s := fmt.Sprintf("%s: %v %v/%v", r.Role, r.Verbs, r.Groups, r.Resources)
	if len(r.Names) > 0 {
		s += fmt.Sprintf(" named %v", r.Names)
	}
	if r.Namespace != "" {
		s += " in namespace " + r.Namespace
	}
	if r.PerNamespace {
		s += " in the namespaces the Studio creates"
	}
	return s
}

// units splits a rule into one rule per verb, group, resource and name:
// each must be used.
func (r rbacRule) units() []rbacRule {
	names := r.Names
	if len(names) == 0 {
		names = []string{""}
	}
	var out []rbacRule
	for _, v := range r.Verbs {
		for _, g := range r.Groups {
			for _, res := range r.Resources {
				for _, n := range names {
					u := rbacRule{Role: r.Role, Namespace: r.Namespace, PerNamespace: r.PerNamespace, In: r.In,
						Verbs: []string{v}, Groups: []string{g}, Resources: []string{res}}
					if n != "" {
						u.Names = []string{n}
					}
					out = append(out, u)
				}
			}
		}
	}
	return out
}

// grants reads the Roles and ClusterRoles of deploy/kubernetes.
func grants(t *testing.T) []rbacRule {
	t.Helper()
	data, err := os.ReadFile(studioManifests)
	if err != nil {
		t.Fatal(err)
	}
	return parseRoles(t, data)
}

func parseRoles(t *testing.T, data []byte) []rbacRule {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []rbacRule
	roles := 0
	clusterBound := map[string]bool{}
	for {
		var doc struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
			RoleRef  struct{ Kind, Name string } `yaml:"roleRef"`
			Rules    []struct {
				APIGroups     []string `yaml:"apiGroups"`
				Resources     []string
				Verbs         []string
				ResourceNames []string `yaml:"resourceNames"`
			}
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", studioManifests, err)
		}
		if doc.Kind == "ClusterRoleBinding" && doc.RoleRef.Kind == "ClusterRole" {
			clusterBound[doc.RoleRef.Name] = true
		}
		if doc.Kind != "ClusterRole" && doc.Kind != "Role" {
			continue
		}
		roles++
		ns := ""
		if doc.Kind == "Role" {
			if ns = doc.Metadata.Namespace; ns == "" {
				t.Fatalf("the Role %s names no namespace", doc.Metadata.Name)
			}
		}
		for _, r := range doc.Rules {
			for _, l := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
				if slices.Contains(l, "*") {
					t.Errorf("the %s %s grants a wildcard (%v %v/%v): least privilege names each", doc.Kind, doc.Metadata.Name, r.Verbs, r.APIGroups, r.Resources)
				}
			}
			if slices.Contains(r.Verbs, "escalate") {
				t.Errorf("the %s %s grants escalate: the Studio never needs more than it holds", doc.Kind, doc.Metadata.Name)
			}
			if slices.Contains(r.Verbs, "bind") && len(r.ResourceNames) == 0 {
				t.Errorf("the %s %s grants bind on every role of %v/%v: name the one it binds", doc.Kind, doc.Metadata.Name, r.APIGroups, r.Resources)
			}
			out = append(out, rbacRule{Role: doc.Kind + " " + doc.Metadata.Name, Namespace: ns,
				Groups: r.APIGroups, Resources: r.Resources, Verbs: r.Verbs, Names: r.ResourceNames})
		}
	}
	for i := range out {
		if name, ok := strings.CutPrefix(out[i].Role, "ClusterRole "); ok && !clusterBound[name] {
			out[i].PerNamespace = true
		}
	}
	if roles == 0 {
		t.Fatalf("%s holds no Role or ClusterRole", studioManifests)
	}
	return out
}

// checkGrants says which request no rule allows (a verb missing) and which
// verb, resource or name of a rule no request used (one unused).
func checkGrants(rules []rbacRule, reqs []clustertest.Request) (missing, unused []string) {
	created := createdNamespaces(reqs)
	rules = slices.Clone(rules)
	for i := range rules {
		rules[i].In = created
	}
	var used []clustertest.Request
	for _, r := range reqs {
		if r.Path != "" || r.Status == http.StatusForbidden || grantedToEveryone(r) {
			continue
		}
		used = append(used, r)
		if r.Verb == "patch" && r.Status == http.StatusCreated {
			c := r
			c.Verb = "create"
			used = append(used, c)
		}
		// Creating a RoleBinding is authorized as bind on its role too
		// (before the object is stored: a 409 was authorized as well).
		if r.Verb == "create" && r.Resource == "rolebindings" && r.RoleRef != "" && (r.Status == http.StatusCreated || r.Status == http.StatusConflict) {
			used = append(used, clustertest.Request{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: r.RoleRef, Status: r.Status})
		}
	}
	seen := map[string]bool{}
	for _, u := range used {
		if !slices.ContainsFunc(rules, func(r rbacRule) bool { return r.allows(u) }) {
			g := u.Group
			if g == "" {
				g = "core"
			}
			if s := fmt.Sprintf("%s %s/%s %s/%s", u.Verb, g, u.Resource, u.Namespace, u.Name); !seen[s] {
				seen[s] = true
				missing = append(missing, s)
			}
		}
	}
	for _, r := range rules {
		for _, unit := range r.units() {
			if !slices.ContainsFunc(used, unit.allows) {
				unused = append(unused, unit.String())
			}
		}
	}
	sort.Strings(missing)
	return missing, unused
}

// grantedToEveryone reports whether RBAC's default role system:basic-user
// grants req to every authenticated user: asking what one may do
// (SelfSubjectAccessReview) or who one is (SelfSubjectReview).
func grantedToEveryone(req clustertest.Request) bool {
	return req.Verb == "create" && (req.Group == "authorization.k8s.io" && req.Resource == "selfsubjectaccessreviews" ||
		req.Group == "authentication.k8s.io" && req.Resource == "selfsubjectreviews")
}

// createdNamespaces are the namespaces the requests created.
func createdNamespaces(reqs []clustertest.Request) map[string]bool {
	out := map[string]bool{}
	for _, r := range reqs {
		if r.Verb == "create" && r.Resource == "namespaces" && r.Group == "" && r.Status == http.StatusCreated {
			out[r.Created] = true
		}
	}
	return out
}

// TestStudioManifestsRBACComparisonIsExact checks the comparison the
// cluster test below relies on, as the API server's RBAC authorizer
// decides: a rule with resourceNames allows only those names (and no list
// or watch), a Role only its own namespace, and a grant no request used is
// reported.
func TestStudioManifestsRBACComparisonIsExact(t *testing.T) {
	t.Parallel()
	rules := parseRoles(t, []byte(`kind: Role
metadata: {name: r, namespace: team}
rules:
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [values]
  verbs: [get]
---
kind: ClusterRole
metadata: {name: c}
rules:
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles]
  resourceNames: [e]
  verbs: [bind]
---
kind: ClusterRoleBinding
metadata: {name: c}
roleRef: {kind: ClusterRole, name: c}
---
kind: ClusterRole
metadata: {name: e}
rules:
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create]
`))
	for i := range rules {
		rules[i].In = map[string]bool{"made": true}
	}
	req := func(verb, group, resource, ns, name string) clustertest.Request {
		return clustertest.Request{Verb: verb, Group: group, Resource: resource, Namespace: ns, Name: name, Status: 200}
	}
	for _, c := range []struct {
		req  clustertest.Request
		want bool
	}{
		{req("get", "", "secrets", "team", "values"), true},
		{req("get", "", "secrets", "team", "other"), false},
		{req("list", "", "secrets", "team", ""), false},
		{req("get", "", "secrets", "elsewhere", "values"), false},
		{req("patch", "", "secrets", "team", "values"), false},
		{req("get", "apps", "deployments", "elsewhere", "web"), true},
		{req("list", "apps", "deployments", "", ""), true},
		{req("get", "", "deployments", "team", "web"), false},
		// e is bound by the Studio only in the namespaces it made.
		{req("create", "batch", "jobs", "made", ""), true},
		{req("create", "batch", "jobs", "team", ""), false},
		{req("create", "batch", "jobs", "", ""), false},
		{req("bind", "rbac.authorization.k8s.io", "clusterroles", "", "e"), true},
		{req("bind", "rbac.authorization.k8s.io", "clusterroles", "", "c"), false},
	} {
		allowed := slices.ContainsFunc(rules, func(r rbacRule) bool { return r.allows(c.req) })
		if allowed != c.want {
			t.Errorf("%s: allowed %v, want %v", c.req, allowed, c.want)
		}
	}
	missing, unused := checkGrants(rules, []clustertest.Request{
		req("get", "", "secrets", "team", "values"),
		req("get", "apps", "deployments", "a", "web"),
		req("get", "", "secrets", "team", "other"),
		{Verb: "patch", Resource: "secrets", Namespace: "team", Name: "values", Status: http.StatusCreated},
		// A namespace made, a job created in it and one in another.
		{Verb: "create", Resource: "namespaces", Created: "made", Status: http.StatusCreated},
		{Verb: "create", Group: "batch", Resource: "jobs", Namespace: "made", Status: http.StatusCreated},
		{Verb: "create", Group: "batch", Resource: "jobs", Namespace: "team", Status: http.StatusCreated},
	})
	if fmt.Sprint(missing) != "[create batch/jobs team/ create core/namespaces / create core/secrets team/values get core/secrets team/other patch core/secrets team/values]" {
		t.Errorf("missing %q", missing)
	}
	if fmt.Sprint(unused) != "[ClusterRole c: [list] [apps]/[deployments] ClusterRole c: [bind] [rbac.authorization.k8s.io]/[clusterroles] named [e]]" {
		t.Errorf("unused %q", unused)
	}
	// Creating a RoleBinding of e is authorized as bind on e.
	_, unused = checkGrants(rules, []clustertest.Request{
		req("list", "apps", "deployments", "", ""), req("get", "apps", "deployments", "a", "web"),
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: "made", RoleRef: "e", Status: http.StatusCreated},
	})
	if slices.ContainsFunc(unused, func(u string) bool { return strings.Contains(u, "bind") }) {
		t.Errorf("the bind a RoleBinding's create used is reported unused: %q", unused)
	}
}

// The manifests of the Studio's own scenarios below: the production
// example (every kind the driver applies but volume claims), a release Job
// that fails (its pod's exit is read; its limits make a ResourceQuota), and a release interrupted by SIGKILL
// (the resumed run finds its Job) of an application with a volume. Image tags starting with "fail" and "slow" are the
// test cluster's stages: a pod that exits with code 1, and pods that take
// 3 to 5 s to become ready.
const failingReleaseManifest = `name: failing
applications:
  web:
    image: registry.local/web:fail-1
    resources:
      limits:
        cpu: 0.5
        memory: 256MB
    deployment:
      releaseCommand:
        command: ["/app/migrate"]
`

// neverReadyManifest's pods run but never become ready (the test
// cluster's "never" tag): the rollout fails at its deadline, and its reason
// reads the probe and the kubelet's events of the pod.
const neverReadyManifest = `name: neverready
applications:
  web:
    image: registry.local/web:never-1
    ports:
      http:
        port: 8080
    health:
      readiness:
        http:
          port: http
          path: /ready
    deployment:
      rollout:
        strategy: rolling
        timeout: 10s
`

const slowReleaseManifest = `name: slowrelease
applications:
  web:
    image: registry.local/web:slow-1
    volumes:
      cache:
        mountPath: /var/cache/web
        size: 1GB
    deployment:
      releaseCommand:
        command: ["/app/migrate"]
`

// A project whose second revision drops the worker, the database and the
// bucket (pruned after the typed confirmation, each kind a service leaves),
// drops web's route (its HTTPRoute deleted by name) and changes web's image (a blue-green switch deletes the old slot).
const prunedManifest = `name: pruned
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
    routes:
      old:
        domain: old.test
        port: http
        tls: disabled
  worker:
    image: registry.local/worker:1
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: worker.test
        port: http
        tls: automatic
    scaling:
      replicas:
        min: 1
        max: 2
      autoscaling:
        cpu:
          targetUtilization: 70
    deployment:
      releaseCommand:
        command: ["/app/migrate"]
databases:
  data:
    engine: postgres
    version: 17
    isolation: project
    storage:
      size: 1GB
buckets:
  media:
    visibility: private
`

const prunedAfter = `name: pruned
applications:
  web:
    image: registry.local/web:2
    ports:
      http:
        port: 8080
`

// deployConfirmed adds manifest as the project's newest revision and
// deploys it through the deploy form with the environment's name typed.
func deployConfirmed(t *testing.T, s *studioProcess, c *http.Client, db *store.DB, project, manifest string) int64 {
	t.Helper()
	ctx := context.Background()
	res := compiler.Compile([]byte(manifest))
	var projectID int64
	if err := db.Pool.QueryRow(ctx, `SELECT id FROM projects WHERE name = $1`, project).Scan(&projectID); err != nil {
		t.Fatal(err)
	}
	rev, _, err := db.AddRevision(ctx, store.Actor{}, projectID, store.NewRevision{Name: res.Definition.Name, Source: manifest, Canonical: res.Definition.Canonical(), Hash: res.Hash})
	if err != nil {
		t.Fatal(err)
	}
	var before int64
	db.Pool.QueryRow(ctx, `SELECT COALESCE(max(id), 0) FROM runs`).Scan(&before)
	where := postForm(t, c, s.addr+"/projects/"+project+"/environments/production/deploys", fmt.Sprintf("revision=%d&confirm=production", rev.Number))
	var runID int64
	if err := db.Pool.QueryRow(ctx, `SELECT id FROM runs WHERE id > $1 ORDER BY id LIMIT 1`, before).Scan(&runID); err != nil {
		t.Fatalf("the confirmed deploy of %s revision %d started no run (%v); the form went to %s", project, rev.Number, err, where)
	}
	return runID
}

// TestStudioManifestsRunOnTheClusterAndGrantExactlyWhatTheStudioCalls
// applies deploy/kubernetes to the test cluster as its README says (the
// Secret of the database URL and key first), checks what it declares (the
// Deployment rolls out, its Service reaches it, probes on /readyz and
// /healthz, which a real Studio answers, secrets only by Secret
// reference), then runs a real `studio serve --platform kubernetes` with
// the ServiceAccount's own token, through a proxy that records every
// request it makes to the API server, and deploys: the production
// example, a release that fails, and a release interrupted by SIGKILL and
// resumed. No request is refused (no verb missing) and every verb the
// ClusterRole grants was used (none unused). When the driver starts
// calling something new, its RBAC and a scenario here come with it.
func TestStudioManifestsRunOnTheClusterAndGrantExactlyWhatTheStudioCalls(t *testing.T) {
	t.Parallel()
	cluster := kubeCluster(t)
	kubectl(t, cluster, "", "apply", "--server-side", "-f", studioManifests)
	kubectl(t, cluster, "", "-n", "skali-studio", "create", "secret", "generic", "skali-studio-secrets",
		"--from-literal=DATABASE_URL=postgres://studio@db.example/studio", "--from-literal=STUDIO_SECRET_KEY="+store.GenerateKey())
	kubectl(t, cluster, "", "-n", "skali-studio", "rollout", "status", "deployment/skali-studio", "--timeout=2m")

	dep := kubeObject(t, cluster, "-n", "skali-studio", "deployment", "skali-studio")
	pod := dep["spec"].(map[string]any)["template"]
	c := field(pod, "spec", "serviceAccountName")
	if c != "skali-studio" || kubeObject(t, cluster, "-n", "skali-studio", "serviceaccount", c) == nil {
		t.Errorf("the Studio's pods run as service account %q, want the manifests' skali-studio", c)
	}
	binding := kubeObject(t, cluster, "clusterrolebinding", "skali-studio")
	if field(binding, "roleRef", "name") != "skali-studio" || field(binding, "subjects", 0, "name") != "skali-studio" ||
		field(binding, "subjects", 0, "namespace") != "skali-studio" {
		t.Errorf("the ClusterRoleBinding binds %v to %v", binding["roleRef"], binding["subjects"])
	}
	if field(dep, "status", "readyReplicas") != field(dep, "spec", "replicas") || field(dep, "spec", "replicas") == "1" {
		t.Errorf("the Studio's Deployment: %s of %s replicas ready, want several, all ready", field(dep, "status", "readyReplicas"), field(dep, "spec", "replicas"))
	}
	ctr := at0(pod, "spec", "containers")
	if field(ctr, "args") != "[serve --platform kubernetes]" {
		t.Errorf("the Studio runs with %s, want serve --platform kubernetes (in-cluster credentials)", field(ctr, "args"))
	}
	if field(ctr, "readinessProbe", "httpGet", "path") != "/readyz" || field(ctr, "livenessProbe", "httpGet", "path") != "/healthz" ||
		field(ctr, "readinessProbe", "httpGet", "port") != "http" || field(ctr, "ports", 0, "name") != "http" || field(ctr, "ports", 0, "containerPort") != "8080" {
		t.Errorf("probes %v %v on ports %v: want /readyz and /healthz on the port the Studio listens on", field(ctr, "readinessProbe"), field(ctr, "livenessProbe"), field(ctr, "ports"))
	}
	// Every variable is a setting of the Studio's; secret ones come from a
	// Secret only, and the database and key are there (replicas share them).
	known := map[string]bool{}
	for _, s := range (&Config{}).settings() {
		known[s.env] = true
	}
	env := map[string]any{}
	envList, _ := ctr.(map[string]any)["env"].([]any)
	for _, e := range envList {
		name := field(e, "name")
		env[name] = e
		if !known[name] {
			t.Errorf("the Deployment sets %s, which the Studio does not read", name)
		}
		if secretSettings[name] && (field(e, "value") != "" || field(e, "valueFrom", "secretKeyRef", "name") != "skali-studio-secrets") {
			t.Errorf("%s is not a reference to the Secret skali-studio-secrets", name)
		}
	}
	for _, name := range []string{"DATABASE_URL", "STUDIO_SECRET_KEY"} {
		if env[name] == nil {
			t.Errorf("the Deployment does not set %s", name)
		}
	}
	if !strings.HasSuffix(field(env["STUDIO_ADDR"], "value"), ":8080") {
		t.Errorf("STUDIO_ADDR %v, want the container port 8080", env["STUDIO_ADDR"])
	}
	checkGraceOutlastsShutdown(t, field(pod, "spec", "terminationGracePeriodSeconds"), field(env["STUDIO_SHUTDOWN_TIMEOUT"], "value"))
	svc := kubeObject(t, cluster, "-n", "skali-studio", "service", "skali-studio")
	if field(svc, "spec", "ports", 0, "targetPort") != "http" {
		t.Errorf("the Service targets %s, want the Studio's port http", field(svc, "spec", "ports", 0, "targetPort"))
	}
	for k, v := range svc["spec"].(map[string]any)["selector"].(map[string]any) {
		if field(pod, "metadata", "labels", k) != v {
			t.Errorf("the Service selects %s=%v, which the Studio's pods do not carry", k, v)
		}
	}
	// The EndpointSlice controller follows the pods a moment after they
	// are ready.
	for deadline := time.Now().Add(30 * time.Second); ; {
		endpoints := 0
		if eps := kubeItems(t, cluster, "-n", "skali-studio", "endpointslices", "-l", "kubernetes.io/service-name=skali-studio"); len(eps) > 0 {
			e, _ := eps[0]["endpoints"].([]any)
			endpoints = len(e)
		}
		pods := len(kubeItems(t, cluster, "-n", "skali-studio", "pods", "-l", "app.kubernetes.io/name=skali-studio"))
		if endpoints == pods && pods > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the Service reaches %d of the Studio's %d pods", endpoints, pods)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The real Studio, as the service account, through the recording proxy.
	token := strings.TrimSpace(kubectl(t, cluster, "", "-n", "skali-studio", "create", "token", "skali-studio", "--duration=1h"))
	proxy, err := clustertest.StartProxy(cluster.Kubeconfig, token, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	manifest, err := os.ReadFile("../../compiler/testdata/production.skali.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db, dbURL, key := newKubeProject(t, string(manifest), map[string]string{"SESSION_SECRET": "a-session-secret", "APP_DOMAIN": "wiki.test"})
	addKubeProject(t, db, key, failingReleaseManifest, nil)
	addKubeProject(t, db, key, slowReleaseManifest, nil)
	addKubeProject(t, db, key, prunedManifest, nil)
	addKubeProject(t, db, key, neverReadyManifest, nil)
	for _, ns := range []string{"team-wiki-production", "failing-production", "slowrelease-production", "pruned-production", "neverready-production"} {
		t.Cleanup(func() { kubectl(t, cluster, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false") })
	}
	// The volume's claim binds to a volume the test provides as a cluster
	// admin would (the test cluster has no storage provisioner).
	kubectl(t, cluster, `apiVersion: v1
kind: PersistentVolume
metadata: {name: kubetest-slowrelease-cache}
spec:
  capacity: {storage: 2Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/kubetest-slowrelease-cache}
`, "apply", "--server-side", "-f", "-")
	t.Cleanup(func() {
		kubectl(t, cluster, "", "delete", "pv", "kubetest-slowrelease-cache", "--ignore-not-found", "--wait=false")
	})
	flags := []string{"--platform", "kubernetes", "--kubeconfig", proxy.Kubeconfig, "--gateway", "infra/edge",
		"--dns-server", nxdomainDNS(t), "--run-lease", "10m"}
	studio := startStudio(t, dbURL, key, flags...)
	for _, path := range []string{"/readyz", "/healthz"} {
		resp, err := http.Get(studio.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the Studio answers %s with %d: its probe would fail", path, resp.StatusCode)
		}
	}

	client := signedIn(t, studio)
	run := deployNewest(t, studio, client, db, "team-wiki")
	waitForRunEnd(t, db, run)
	if status, reason := runOutcome(t, db, run); status != store.RunSucceeded && status != store.RunSucceededWithWarnings {
		t.Fatalf("the production example as the Studio's service account: %s: %s", status, reason)
	}
	run = deployNewest(t, studio, client, db, "pruned")
	waitForRunEnd(t, db, run)
	if status, reason := runOutcome(t, db, run); status != store.RunSucceeded && status != store.RunSucceededWithWarnings {
		t.Fatalf("the project to prune, first deploy: %s: %s", status, reason)
	}
	prunedFirst := run
	run = deployConfirmed(t, studio, client, db, "pruned", prunedAfter)
	waitForRunEnd(t, db, run)
	if status, reason := runOutcome(t, db, run); status != store.RunSucceeded && status != store.RunSucceededWithWarnings {
		t.Fatalf("the confirmed deploy that prunes: %s: %s", status, reason)
	}
	for _, kind := range []string{"deployments", "services", "httproutes", "horizontalpodautoscalers", "jobs"} {
		if items := kubeItems(t, cluster, "-n", "pruned-production", kind, "-l", "skali.dev/service=worker"); len(items) != 0 {
			t.Errorf("%d %s of the removed worker remain", len(items), kind)
		}
	}
	for _, kind := range []string{"clusters.postgresql.cnpg.io", "objectbucketclaims.objectbucket.io"} {
		if items := kubeItems(t, cluster, "-n", "pruned-production", kind); len(items) != 0 {
			t.Errorf("%d %s of the removed database and bucket remain", len(items), kind)
		}
	}
	if items := kubeItems(t, cluster, "-n", "pruned-production", "httproutes", "-l", "skali.dev/service=web"); len(items) != 0 {
		t.Errorf("the HTTPRoute %s of web's dropped route remains", field(items[0], "metadata", "name"))
	}
	if slot := field(kubeObject(t, cluster, "-n", "pruned-production", "service", "web"), "spec", "selector", "skali.dev/slot"); slot != "green" {
		t.Errorf("after the second deploy web's Service selects slot %q, want green", slot)
	}
	// A rollback to the first deploy brings the worker back.
	run = rollBack(t, studio, client, db, "pruned", prunedFirst)
	waitForRunEnd(t, db, run)
	if status, reason := runOutcome(t, db, run); status != store.RunSucceeded && status != store.RunSucceededWithWarnings {
		t.Fatalf("the rollback: %s: %s", status, reason)
	}
	if len(kubeItems(t, cluster, "-n", "pruned-production", "deployments", "-l", "skali.dev/service=worker")) == 0 {
		t.Errorf("after the rollback the worker's Deployment is missing")
	}
	// Deleting the environment deletes its namespace first, its rows then.
	postForm(t, client, studio.addr+"/projects/pruned/environments/production/delete", "confirm=production")
	waitFor(t, func() bool {
		var n int
		db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM environments e JOIN projects p ON p.id = e.project_id WHERE p.name = 'pruned'`).Scan(&n)
		return n == 0
	})
	if ns := kubeObject(t, cluster, "namespace", "pruned-production"); ns != nil {
		t.Errorf("the deleted environment's rows went before its namespace (%s)", field(ns, "status", "phase"))
	}
	run = deployNewest(t, studio, client, db, "failing")
	waitForRunEnd(t, db, run)
	if status, reason := runOutcome(t, db, run); status != store.RunFailed || !strings.Contains(reason, "exited with code 1") {
		t.Fatalf("a failing release: %s: %s, want failed with its exit code", status, reason)
	}
	run = deployNewest(t, studio, client, db, "neverready")
	waitForRunEnd(t, db, run)
	if status, reason := runOutcome(t, db, run); status != store.RunFailed || !strings.Contains(reason, "fails its readiness probe GET /ready on port 8080") {
		t.Fatalf("a rollout that never becomes ready: %s: %s, want failed at its deadline with the probe", status, reason)
	}
	run = deployNewest(t, studio, client, db, "slowrelease")
	waitFor(t, func() bool {
		return checkpointStatus(db, run, "release") == store.CheckpointRunning &&
			len(kubeItems(t, cluster, "-n", "slowrelease-production", "jobs")) == 1
	})
	studio.cmd.Process.Kill()
	studio.cmd.Wait()
	studio = startStudio(t, dbURL, key, flags...)
	waitForRunEnd(t, db, run)
	if status, reason := runOutcome(t, db, run); status != store.RunSucceeded {
		t.Fatalf("a release resumed after SIGKILL: %s: %s", status, reason)
	}
	studio.cmd.Process.Kill()
	studio.cmd.Wait()

	reqs := proxy.Requests()
	for _, r := range reqs {
		if r.Status == http.StatusForbidden {
			t.Errorf("the API server refused the Studio's request %s: the ClusterRole lacks it", r)
		}
	}
	// It acted in no namespace but those it created.
	created := createdNamespaces(reqs)
	for _, r := range reqs {
		if r.Namespace != "" && r.Resource != "namespaces" && !created[r.Namespace] {
			t.Errorf("the Studio called %s in a namespace it did not create", r)
		}
	}
	for _, ns := range []string{"team-wiki-production", "failing-production", "slowrelease-production", "pruned-production", "neverready-production"} {
		if !created[ns] {
			t.Errorf("the Studio did not create namespace %s itself", ns)
		}
	}
	checkStudioTokenConfined(t, cluster, token)
	missing, unused := checkGrants(grants(t), reqs)
	for _, m := range missing {
		t.Errorf("the Studio calls %s, which no rule of its ClusterRole allows (by verb, resource, name and namespace)", m)
	}
	for _, u := range unused {
		// Backups exec in real pods and start helper pods, which this
		// cluster's simulated nodes cannot run: those rules are used, as
		// the Studio's service account under this very ClusterRole, by
		// runs/platform/kubernetes' TestReal*SnapshotRestoreAndDrill on
		// the real-node cluster (a rule missing there fails them).
		if backupRule(u) {
			continue
		}
		t.Errorf("the rule %s was never used in these deploys", u)
	}
	t.Logf("%d API requests; used: %s", len(reqs), strings.Join(clustertest.Used(reqs), ", "))
}

// backupRule is a rule of the environment ClusterRole only backups use:
// pods created, got and deleted (helper pods) and pods/exec.
func backupRule(rule string) bool {
	return strings.Contains(rule, "skali-studio-environment") &&
		(strings.Contains(rule, "[pods/exec]") || strings.Contains(rule, "[create] []/[pods]") ||
			strings.Contains(rule, "[get] []/[pods]") || strings.Contains(rule, "[delete] []/[pods]"))
}

// shutdownMargin is what the grace period must leave beyond the shutdown
// timeout: the HTTP drain (up to 15 s) runs beside the runs' stop, then
// the event streams and the database close.
const shutdownMargin = 10 * time.Second

// checkGraceOutlastsShutdown checks a pod's terminationGracePeriodSeconds
// against the Studio's --shutdown-timeout (the manifest's
// STUDIO_SHUTDOWN_TIMEOUT, else the setting's default): on SIGTERM running
// steps reach a safe point within the timeout, and the kubelet's SIGKILL
// must not come first.
func checkGraceOutlastsShutdown(t *testing.T, grace, timeout string) {
	t.Helper()
	if timeout == "" {
		for _, s := range (&Config{}).settings() {
			if s.env == "STUDIO_SHUTDOWN_TIMEOUT" {
				timeout = s.def
			}
		}
	}
	d, err := time.ParseDuration(timeout)
	if err != nil {
		t.Fatalf("the shutdown timeout %q: %v", timeout, err)
	}
	if grace == "" {
		grace = "30" // Kubernetes' default
	}
	g, err := strconv.Atoi(grace)
	if err != nil {
		t.Fatalf("terminationGracePeriodSeconds %q: %v", grace, err)
	}
	if time.Duration(g)*time.Second < d+shutdownMargin {
		t.Errorf("the Studio's pods get %d s to stop after SIGTERM, but its shutdown timeout is %s (and %s beyond it to drain and close): the kubelet kills it first", g, d, shutdownMargin)
	}
}

// TestStudioManifestsGraceOutlastsTheShutdownTimeout reads
// deploy/kubernetes/studio.yaml: the Studio's pods' grace period is above
// its shutdown timeout.
func TestStudioManifestsGraceOutlastsTheShutdownTimeout(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(studioManifests)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	found := false
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if doc["kind"] != "Deployment" || field(doc, "metadata", "name") != "skali-studio" {
			continue
		}
		found = true
		pod := doc["spec"].(map[string]any)["template"]
		timeout := ""
		envList, _ := at0Parent(pod, "spec", "containers")["env"].([]any)
		for _, e := range envList {
			if field(e, "name") == "STUDIO_SHUTDOWN_TIMEOUT" {
				timeout = field(e, "value")
			}
		}
		checkGraceOutlastsShutdown(t, field(pod, "spec", "terminationGracePeriodSeconds"), timeout)
	}
	if !found {
		t.Fatalf("%s has no Deployment skali-studio", studioManifests)
	}
}

// at0Parent is the first element of a list in an object, as a map.
func at0Parent(o any, path ...any) map[string]any {
	m, _ := at0(o, path...).(map[string]any)
	return m
}

// rollBack deploys again, through the deploy form, the release of an
// earlier successful deploy (its revision and values).
func rollBack(t *testing.T, s *studioProcess, c *http.Client, db *store.DB, project string, deploy int64) int64 {
	t.Helper()
	ctx := context.Background()
	var before int64
	db.Pool.QueryRow(ctx, `SELECT COALESCE(max(id), 0) FROM runs`).Scan(&before)
	where := postForm(t, c, s.addr+"/projects/"+project+"/environments/production/deploys", fmt.Sprintf("release=%d", deploy))
	var runID int64
	if err := db.Pool.QueryRow(ctx, `SELECT id FROM runs WHERE id > $1 ORDER BY id LIMIT 1`, before).Scan(&runID); err != nil {
		t.Fatalf("the rollback of %s to run %d started no run (%v); the form went to %s", project, deploy, err, where)
	}
	return runID
}

// checkStudioTokenConfined tries, with the Studio's own ServiceAccount
// token straight at the API server, to read and write Secrets and
// Deployments, to bind itself and to delete the namespace, in kube-system
// and in a namespace the Studio did not create: every attempt is refused
// (RBAC, and the admission policy of deploy/kubernetes for what RBAC
// allows cluster-wide).
func checkStudioTokenConfined(t *testing.T, cluster *clustertest.Cluster, token string) {
	t.Helper()
	kubectl(t, cluster, `apiVersion: v1
kind: Namespace
metadata: {name: not-the-studios}
---
apiVersion: v1
kind: Secret
metadata: {name: values, namespace: not-the-studios}
stringData: {TOKEN: not-for-the-studio}
`, "apply", "--server-side", "-f", "-")
	t.Cleanup(func() {
		kubectl(t, cluster, "", "delete", "namespace", "not-the-studios", "--ignore-not-found", "--wait=false")
	})
	kubectl(t, cluster, "", "-n", "not-the-studios", "create", "deployment", "theirs", "--image=registry.local/theirs:1")
	as := func(args ...string) (string, error) {
		cmd := exec.Command(cluster.Kubectl, append([]string{"--kubeconfig", cluster.Kubeconfig, "--token", token}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, ns := range []string{"kube-system", "not-the-studios"} {
		for _, try := range [][]string{
			{"get", "secret", "values"},
			{"get", "secrets"},
			{"create", "secret", "generic", "planted", "--from-literal=a=b"},
			{"get", "deployments"},
			{"get", "deployment", "theirs"},
			{"create", "deployment", "planted", "--image=registry.local/planted:1"},
			{"create", "rolebinding", "planted", "--clusterrole=skali-studio-environment", "--serviceaccount=skali-studio:skali-studio"},
		} {
			out, err := as(append([]string{"-n", ns}, try...)...)
			if low := strings.ToLower(out); err == nil || !strings.Contains(low, "forbidden") && !strings.Contains(low, "denied") {
				t.Errorf("with the Studio's token, kubectl -n %s %s: %v: %s; want refused", ns, strings.Join(try, " "), err, out)
			}
		}
		out, err := as("delete", "namespace", ns, "--dry-run=server")
		if low := strings.ToLower(out); err == nil || !strings.Contains(low, "denied") && !strings.Contains(low, "forbidden") {
			t.Errorf("with the Studio's token, deleting namespace %s (dry run): %v: %s; want refused", ns, err, out)
		}
	}
}

// at0 is the first element of a list in an object.
func at0(o any, path ...any) any {
	for _, p := range path {
		m, _ := o.(map[string]any)
		o = m[p.(string)]
	}
	s, _ := o.([]any)
	if len(s) == 0 {
		return nil
	}
	return s[0]
}
