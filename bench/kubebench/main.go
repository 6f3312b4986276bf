// Command kubebench measures the Studio's deploys on the Kubernetes
// platform against the repository's test cluster (kwok's fast stages: pods
// are ready as soon as they are scheduled), side by side with a floor: the
// same objects applied by kubectl.
//
// For the production example with 1, 3 and 6 applications (the example's
// web application and copies of it without a route), each iteration
// deploys to a new environment (so a new namespace and every object
// created) through a real `studio serve --platform kubernetes` (built from
// ./cmd/studio), from the deploy form's POST to the run's end; then the
// floor deploys the same objects, read back from the Studio's namespace,
// into a new namespace: `kubectl apply --server-side` of all but the
// Deployments, `kubectl wait --for=condition=complete` of the release
// Jobs (a release runs before its rollout), `kubectl apply --server-side`
// of the Deployments and `kubectl rollout status` of each. It prints the
// p50 of both, their ratio (goal ≤ 1.3) and the API requests each made per
// deploy, counted by a proxy in front of the API server. A last row
// deploys one application whose pods take 3 to 5 s to become ready: the
// Studio's requests must not grow with the time spent waiting. The floor
// waits for the databases' Clusters Ready before the release Jobs, as the
// Studio does.
//
// With -nodes real (as root) the cluster has one real node
// (testcluster --nodes real) and each application is the test
// application's image with real readiness probes and a release command
// that runs; there is no slow row.
//
//	go run ./kubebench                      # starts the test cluster
//	go run ./kubebench -kubeconfig /tmp/skali-cluster/kubeconfig
//	go run ./kubebench -nodes real -iterations 3 -services 1,3
//	go run ./kubebench -watch-envs 1,10,100   # API requests a minute while idle
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"go.yaml.in/yaml/v3"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/pgserver"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kubebench:", err)
		os.Exit(1)
	}
}

type bench struct {
	dir        string
	kubeconfig string
	kubectl    string
	db         *store.DB
	vault      *store.Vault
	studio     *exec.Cmd
	studioURL  string
	client     *http.Client
	studioAPI  *clustertest.Proxy // the Studio's requests
	floorAPI   *clustertest.Proxy // kubectl's requests
	production map[string]any
	verbose    bool
	// real: the cluster's node is real (testcluster --nodes real) and the
	// applications are the test application's real pods.
	real bool
}

func run() error {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of a running test cluster (default: start one with ./testcluster, from the binaries in the user cache)")
	kubectlPath := flag.String("kubectl", "", "kubectl (default: bin/kubectl beside the kubeconfig, then the test cluster's cache)")
	iterations := flag.Int("iterations", 5, "deploys per size, for the Studio and for the floor")
	sizes := flag.String("services", "1,3,6", "numbers of applications")
	ephemeral := flag.Bool("ephemeral", false, "run the Studio's PostgreSQL without fsync")
	verbose := flag.Bool("v", false, "print each deploy")
	nodes := flag.String("nodes", "kwok", "kwok (simulated nodes) or real (one real node, the test application's pods; root only)")
	watchCounts := flag.String("watch-envs", "", "instead of the deploys: numbers of environments (e.g. 1,10,100) followed idle while the Studio's API requests are counted")
	window := flag.Duration("watch-window", 3*time.Minute, "with -watch-envs: how long requests are counted at each number")
	flag.Parse()
	if *nodes != "kwok" && *nodes != "real" {
		return fmt.Errorf("-nodes must be kwok or real, not %q", *nodes)
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 20 {
			return fmt.Errorf("-services: %q is not a number of applications from 1 to 20", s)
		}
		ns = append(ns, n)
	}
	var watchEnvs []int
	if *watchCounts != "" {
		for _, s := range strings.Split(*watchCounts, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 || n > 500 || len(watchEnvs) > 0 && n <= watchEnvs[len(watchEnvs)-1] {
				return fmt.Errorf("-watch-envs: %q is not a number of environments from 1 to 500, greater than the one before", s)
			}
			watchEnvs = append(watchEnvs, n)
		}
		if *window < 10*time.Second {
			return errors.New("-watch-window must be at least 10s")
		}
	}
	if *iterations < 1 || *iterations > 100 {
		return errors.New("-iterations must be from 1 to 100")
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "kubebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &bench{dir: dir, kubeconfig: *kubeconfig, kubectl: *kubectlPath, verbose: *verbose, real: *nodes == "real"}
	ctx := context.Background()

	if b.kubeconfig == "" {
		stop, err := b.startCluster(root)
		if err != nil {
			return err
		}
		defer stop()
	}
	if b.kubectl == "" {
		b.kubectl = filepath.Join(filepath.Dir(b.kubeconfig), "bin", "kubectl")
		if _, err := os.Stat(b.kubectl); err != nil {
			cache, _ := os.UserCacheDir()
			b.kubectl = filepath.Join(cache, "skali-testcluster", "bin", "kubectl")
		}
	}
	if b.studioAPI, err = clustertest.StartProxy(b.kubeconfig, "", dir); err != nil {
		return err
	}
	defer b.studioAPI.Close()
	floorDir := filepath.Join(dir, "floor")
	if err := os.Mkdir(floorDir, 0o755); err != nil {
		return err
	}
	if b.floorAPI, err = clustertest.StartProxy(b.kubeconfig, "", floorDir); err != nil {
		return err
	}
	defer b.floorAPI.Close()

	pg, err := pgserver.Start(ctx, pgserver.Options{Dir: dir, Ephemeral: *ephemeral, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer pg.Stop()
	if b.db, err = store.Open(ctx, pg.URL()); err != nil {
		return err
	}
	defer b.db.Close()
	if _, err := b.db.Migrate(ctx); err != nil {
		return err
	}
	key := store.GenerateKey()
	keys, err := store.OpenKeyring(ctx, b.db, store.KeyringOptions{SecretKey: key})
	if err != nil {
		return err
	}
	b.vault = store.NewVault(b.db, keys)
	data, err := os.ReadFile(filepath.Join(root, "compiler", "testdata", "production.skali.yaml"))
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, &b.production); err != nil {
		return err
	}

	fmt.Fprintln(os.Stderr, "kubebench: building ./cmd/studio")
	studioBin := filepath.Join(dir, "studio")
	build := exec.Command("go", "build", "-o", studioBin, "./cmd/studio")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the Studio: %v: %s", err, out)
	}
	dnsAddr, stopDNS, err := nxdomainDNS()
	if err != nil {
		return err
	}
	defer stopDNS()
	// The deploys' measure leaves domains alone (no probes between
	// deploys); the idle measure is of a Studio as it runs by default.
	reconcile := "1h"
	if watchEnvs != nil {
		reconcile = "1m"
	}
	if err := b.startStudio(studioBin, pg.URL(), key, dnsAddr, reconcile); err != nil {
		return err
	}
	defer func() {
		_ = b.studio.Process.Signal(syscall.SIGTERM)
		_ = b.studio.Wait()
	}()

	if watchEnvs != nil {
		fmt.Printf("kubebench: %d CPUs; the Studio's API requests while it follows idle environments, counted for %s at each number\n", numCPU(), *window)
		return b.watchEnvs(ctx, watchEnvs, *window)
	}
	nodesSaid := "kwok's fast stages"
	if b.real {
		nodesSaid = "one real node, the test application's pods (testcluster plays CloudNativePG and the bucket provisioner)"
	}
	fmt.Printf("kubebench: %d CPUs; %d deploys per size, each to a new namespace; %s; Studio's PostgreSQL durable=%v\n",
		numCPU(), *iterations, nodesSaid, !*ephemeral)
	if d, err := b.kubectlStart(); err == nil {
		fmt.Printf("kubebench: one kubectl process (version --client) takes %s here; the floor starts 3 + one per application\n", ms(d))
	}
	fmt.Printf("%-28s %12s %12s %7s %16s %16s\n", "", "Studio p50", "floor p50", "ratio", "Studio requests", "floor requests")
	for _, n := range ns {
		r, err := b.size(ctx, n, *iterations, "")
		if err != nil {
			return err
		}
		fmt.Println(r)
		fmt.Println(r.Steps())
	}
	if b.real {
		return nil // the slow pods are a kwok stage
	}
	r, err := b.size(ctx, 1, max(1, *iterations/2), "slow")
	if err != nil {
		return err
	}
	fmt.Println(r)
	fmt.Println(r.Steps())
	return nil
}

type result struct {
	label                 string
	studio, floor         []time.Duration
	studioReqs, floorReqs []int
	studioVerbs           map[string]int
	// steps sums the Studio's time by step over the deploys, in the order
	// first seen.
	steps     map[string]time.Duration
	stepOrder []string
}

func (r *result) addStep(name string, d time.Duration) {
	if _, ok := r.steps[name]; !ok {
		r.stepOrder = append(r.stepOrder, name)
	}
	r.steps[name] += d
}

// Steps says where the Studio's time went, per deploy on average.
func (r result) Steps() string {
	var parts []string
	for _, name := range r.stepOrder {
		parts = append(parts, fmt.Sprintf("%s %s", name, ms(r.steps[name]/time.Duration(len(r.studio)))))
	}
	return "    Studio's time per deploy: " + strings.Join(parts, ", ")
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func p50i(d []int) int {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func (r result) String() string {
	sp, fp := p50(r.studio), p50(r.floor)
	var verbs []string
	for v, n := range r.studioVerbs {
		verbs = append(verbs, fmt.Sprintf("%s %d", v, n))
	}
	slices.Sort(verbs)
	return fmt.Sprintf("%-28s %12s %12s %6.2fx %16d %16d   Studio's (all deploys): %s", r.label, ms(sp), ms(fp),
		float64(sp)/float64(fp), p50i(r.studioReqs), p50i(r.floorReqs), strings.Join(verbs, ", "))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// manifest is the production example with n applications: its own web
// application and n-1 copies without its route; with tag, their images are
// registry.local/web:TAG (a kwok stage by tag) instead of built ones.
func (b *bench) manifest(project string, n int, tag string) (string, error) {
	m := deepCopy(b.production).(map[string]any)
	m["name"] = project
	apps := m["applications"].(map[string]any)
	web := apps["web"].(map[string]any)
	if tag != "" {
		delete(web, "build")
		web["image"] = "registry.local/web:" + tag
	}
	if b.real {
		// The test application in place of the wiki: the same probes'
		// ports, its own paths; its release command succeeds; requests
		// small enough for both slots of every application on 2 cores.
		delete(web, "build")
		web["image"] = "registry.local/skali/testapp:latest"
		web["command"] = []any{"/testapp", "serve", "--ready-after", "1s"}
		health := web["health"].(map[string]any)
		health["readiness"].(map[string]any)["http"].(map[string]any)["path"] = "/readyz"
		dep := web["deployment"].(map[string]any)
		dep["releaseCommand"].(map[string]any)["command"] = []any{"/testapp", "exit", "--code", "0", "--stdout", "migrated"}
		web["resources"].(map[string]any)["requests"].(map[string]any)["cpu"] = 0.02
	}
	for i := 2; i <= n; i++ {
		c := deepCopy(web).(map[string]any)
		delete(c, "routes")
		apps[fmt.Sprintf("web%d", i)] = c
	}
	out, err := yaml.Marshal(m)
	return string(out), err
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = deepCopy(x)
		}
		return s
	}
	return v
}

// size measures iterations deploys of the example with n applications.
func (b *bench) size(ctx context.Context, n, iterations int, tag string) (result, error) {
	project := fmt.Sprintf("bench%d%s", n, tag)
	label := fmt.Sprintf("%d application(s)", n)
	if tag == "slow" {
		label = "1 application, pods 3-5 s"
	}
	r := result{label: label, studioVerbs: map[string]int{}, steps: map[string]time.Duration{}}
	source, err := b.manifest(project, n, tag)
	if err != nil {
		return r, err
	}
	res := compiler.Compile([]byte(source))
	if !res.Valid() {
		return r, fmt.Errorf("manifest of %d applications: %v", n, res.Errors())
	}
	p, _, err := b.db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: project, Source: source, Canonical: res.Definition.Canonical(), Hash: res.Hash})
	if err != nil {
		return r, err
	}
	for i := 0; i < iterations; i++ {
		envName := fmt.Sprintf("e%d", i+1)
		env, err := b.db.CreateEnvironment(ctx, store.Actor{}, p.ID, envName)
		if err != nil {
			return r, err
		}
		for k, v := range map[string]string{"SESSION_SECRET": "bench-session-secret", "APP_DOMAIN": fmt.Sprintf("%s-%s.bench.test", project, envName)} {
			if _, err := b.vault.SetValue(ctx, store.Actor{}, env, k, v); err != nil {
				return r, err
			}
		}
		ns := project + "-" + envName
		d, reqs, err := b.deployStudio(ctx, project, envName, env.ID)
		if err != nil {
			return r, err
		}
		if err := b.steps(ctx, env.ID, d, &r); err != nil {
			return r, err
		}
		r.studio = append(r.studio, d)
		r.studioReqs = append(r.studioReqs, len(reqs))
		for v, k := range clustertest.Verbs(reqs) {
			r.studioVerbs[v] += k
		}
		objects, deployments, jobs, err := b.readBack(ns, "floor-"+ns)
		if err != nil {
			return r, err
		}
		fd, freqs, err := b.deployFloor("floor-"+ns, objects, deployments, jobs)
		if err != nil {
			return r, err
		}
		r.floor = append(r.floor, fd)
		r.floorReqs = append(r.floorReqs, freqs)
		if b.verbose {
			fmt.Fprintf(os.Stderr, "kubebench: %s: Studio %s (%d requests), floor %s (%d requests)\n", ns, ms(d), len(reqs), ms(fd), freqs)
		}
		for _, del := range []string{ns, "floor-" + ns} {
			_ = exec.Command(b.kubectl, "--kubeconfig", b.kubeconfig, "delete", "namespace", del, "--wait=false").Run()
		}
	}
	return r, nil
}

// deployStudio deploys revision 1 to the environment through the deploy
// form and waits for the run's end: its wall time and the API requests
// made meanwhile.
func (b *bench) deployStudio(ctx context.Context, project, env string, envID int64) (time.Duration, []clustertest.Request, error) {
	before := len(b.studioAPI.Requests())
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, b.studioURL+"/projects/"+project+"/environments/"+env+"/deploys", strings.NewReader("revision=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return 0, nil, fmt.Errorf("deploy to %s/%s: %d", project, env, resp.StatusCode)
	}
	for {
		var status, reason string
		var finished bool
		err := b.db.Pool.QueryRow(ctx, `SELECT status, reason, finished_at IS NOT NULL FROM runs WHERE environment_id = $1`, envID).Scan(&status, &reason, &finished)
		if err != nil {
			return 0, nil, err
		}
		if finished {
			d := time.Since(start)
			if status != store.RunSucceeded && status != store.RunSucceededWithWarnings {
				return 0, nil, fmt.Errorf("deploy to %s/%s: %s: %s", project, env, status, reason)
			}
			return d, b.studioAPI.Requests()[before:], nil
		}
		if time.Since(start) > 10*time.Minute {
			return 0, nil, fmt.Errorf("deploy to %s/%s did not end within 10 minutes", project, env)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// steps adds the run's time by step to r: the request before the run
// existed, the wait for an executor, each phase (the steps of one kind,
// one per service, that run at the same time; certificates one by one),
// the time between them and after the last.
func (b *bench) steps(ctx context.Context, envID int64, wall time.Duration, r *result) error {
	var created, started, finished time.Time
	if err := b.db.Pool.QueryRow(ctx, `SELECT created_at, started_at, finished_at FROM runs WHERE environment_id = $1`, envID).Scan(&created, &started, &finished); err != nil {
		return err
	}
	rows, err := b.db.Pool.Query(ctx, `SELECT c.kind, c.started_at, c.finished_at FROM run_checkpoints c JOIN runs r ON r.id = c.run_id
		WHERE r.environment_id = $1 AND c.started_at IS NOT NULL ORDER BY c.position`, envID)
	if err != nil {
		return err
	}
	defer rows.Close()
	r.addStep("request", wall-finished.Sub(created))
	r.addStep("queue", started.Sub(created))
	// Steps of one phase (one per service) run at the same time: a phase
	// counts from its first start to its last end.
	phase := func(kind string) string {
		switch kind {
		case "provision-database", "provision-bucket":
			return "provision"
		case "import":
			return "build"
		}
		return kind
	}
	last := started
	var cur string
	var from, to time.Time
	flush := func() {
		if cur != "" {
			r.addStep("between steps", from.Sub(last))
			r.addStep(cur, to.Sub(from))
			last = to
		}
	}
	for rows.Next() {
		var kind string
		var s, f time.Time
		if err := rows.Scan(&kind, &s, &f); err != nil {
			return err
		}
		if phase(kind) == cur && kind != "issue-tls" {
			from, to = minTime(from, s), maxTime(to, f)
			continue
		}
		flush()
		cur, from, to = phase(kind), s, f
	}
	flush()
	r.addStep("after the last", finished.Sub(last))
	return rows.Err()
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// The kinds read back for the floor, in the order they are applied.
var floorKinds = []string{"secrets", "services", "persistentvolumeclaims", "clusters.postgresql.cnpg.io",
	"objectbucketclaims.objectbucket.io", "httproutes.gateway.networking.k8s.io", "jobs", "horizontalpodautoscalers", "deployments"}

// readBack reads the objects the Studio made in namespace ns and returns
// them as YAML for namespace to, without what the API server or the
// controllers set: all but the Deployments, the Deployments, and the
// names of the Jobs.
func (b *bench) readBack(ns, to string) (objects, deployments string, jobs []string, err error) {
	var rest, deps []any
	rest = append(rest, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": to}})
	for _, kind := range floorKinds {
		out, err := exec.Command(b.kubectl, "--kubeconfig", b.kubeconfig, "-n", ns, "get", kind, "-l", "app.kubernetes.io/managed-by=skali-studio", "-o", "json").Output()
		if err != nil {
			return "", "", nil, fmt.Errorf("kubectl get %s: %w", kind, err)
		}
		var list struct{ Items []map[string]any }
		if err := json.Unmarshal(out, &list); err != nil {
			return "", "", nil, err
		}
		for _, o := range list.Items {
			clean(o, to)
			if o["kind"] == "Job" {
				jobs = append(jobs, o["metadata"].(map[string]any)["name"].(string))
			}
			if o["kind"] == "Deployment" {
				deps = append(deps, o)
			} else {
				rest = append(rest, o)
			}
		}
	}
	y := func(items []any) (string, error) {
		data, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
		return string(data), err
	}
	if objects, err = y(rest); err != nil {
		return "", "", nil, err
	}
	deployments, err = y(deps)
	return objects, deployments, jobs, err
}

// clean drops what the API server and controllers set on an object, and
// moves it to namespace ns.
func clean(o map[string]any, ns string) {
	delete(o, "status")
	md := o["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "ownerReferences"} {
		delete(md, k)
	}
	md["namespace"] = ns
	if a, ok := md["annotations"].(map[string]any); ok {
		delete(a, "deployment.kubernetes.io/revision")
	}
	spec, _ := o["spec"].(map[string]any)
	switch o["kind"] {
	case "Service":
		delete(spec, "clusterIP")
		delete(spec, "clusterIPs")
	case "Job":
		delete(spec, "selector")
		if l, ok := md["labels"].(map[string]any); ok {
			for _, k := range []string{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"} {
				delete(l, k)
			}
		}
		tmd := spec["template"].(map[string]any)["metadata"].(map[string]any)
		if l, ok := tmd["labels"].(map[string]any); ok {
			for _, k := range []string{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"} {
				delete(l, k)
			}
		}
	case "PersistentVolumeClaim":
		delete(spec, "volumeName")
	}
}

// deployFloor applies the objects with kubectl as a deploy script would:
// all but the Deployments, the release Jobs waited for, the Deployments,
// and the rollout status of each.
func (b *bench) deployFloor(ns, objects, deployments string, jobs []string) (time.Duration, int, error) {
	kc := b.floorAPI.Kubeconfig
	before := len(b.floorAPI.Requests())
	start := time.Now()
	kubectl := func(stdin string, args ...string) error {
		cmd := exec.Command(b.kubectl, append([]string{"--kubeconfig", kc}, args...)...)
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := kubectl(objects, "apply", "--server-side", "--field-manager", "kubebench", "-f", "-"); err != nil {
		return 0, 0, err
	}
	// As the Studio does: the databases accept connections first.
	if strings.Contains(objects, "kind: Cluster") || strings.Contains(objects, `"kind":"Cluster"`) {
		if err := kubectl("", "-n", ns, "wait", "--for=condition=Ready", "clusters.postgresql.cnpg.io", "--all", "--timeout=2m"); err != nil {
			return 0, 0, err
		}
	}
	if len(jobs) > 0 {
		args := []string{"-n", ns, "wait", "--for=condition=complete", "--timeout=5m"}
		for _, j := range jobs {
			args = append(args, "job/"+j)
		}
		if err := kubectl("", args...); err != nil {
			return 0, 0, err
		}
	}
	if err := kubectl(deployments, "apply", "--server-side", "--field-manager", "kubebench", "-f", "-"); err != nil {
		return 0, 0, err
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
		}
	}
	_ = json.Unmarshal([]byte(deployments), &list)
	for _, d := range list.Items {
		if err := kubectl("", "-n", ns, "rollout", "status", "deployment/"+d.Metadata.Name, "--timeout=5m"); err != nil {
			return 0, 0, err
		}
	}
	return time.Since(start), len(b.floorAPI.Requests()) - before, nil
}

// kubectlStart is the p50 of a kubectl process that makes no request: the
// part of the floor that is kubectl starting.
func (b *bench) kubectlStart() (time.Duration, error) {
	var ds []time.Duration
	for range 5 {
		start := time.Now()
		if err := exec.Command(b.kubectl, "version", "--client", "-o", "json").Run(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	return p50(ds), nil
}

// startStudio runs `studio serve --platform kubernetes` through the
// counting proxy and signs in.
func (b *bench) startStudio(bin, dbURL, key, dnsAddr, reconcile string) error {
	b.studio = exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--public-url", "http://127.0.0.1", "--data-dir", b.dir,
		"--platform", "kubernetes", "--kubeconfig", b.studioAPI.Kubeconfig, "--gateway", "infra/edge", "--dns-server", dnsAddr,
		"--reconcile-interval", reconcile)
	b.studio.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "STUDIO_SECRET_KEY="+key)
	b.studio.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(filepath.Join(b.dir, "studio.log"))
	if err != nil {
		return err
	}
	b.studio.Stderr = logf
	out, err := b.studio.StdoutPipe()
	if err != nil {
		return err
	}
	if err := b.studio.Start(); err != nil {
		return err
	}
	var addr, link string
	lines := bufio.NewScanner(out)
	for (addr == "" || link == "") && lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "Skali Studio is serving on "); ok {
			addr = rest
		}
		if rest, ok := strings.CutPrefix(lines.Text(), "Sign in: "); ok {
			link = strings.TrimPrefix(rest, "http://127.0.0.1")
		}
	}
	go io.Copy(io.Discard, out)
	if addr == "" || link == "" {
		return errors.New("the Studio printed no address or sign-in link; see its log")
	}
	b.studioURL = addr
	jar, _ := cookiejar.New(nil)
	b.client = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := b.client.Get(addr + link)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if u, _ := url.Parse(addr); len(jar.Cookies(u)) == 0 {
		return errors.New("signing in to the Studio gave no session")
	}
	return nil
}

// startCluster builds (when needed) and starts the test cluster.
func (b *bench) startCluster(root string) (func(), error) {
	dir := filepath.Join(b.dir, "cluster")
	prog := filepath.Join(b.dir, "testcluster")
	build := exec.Command("go", "build", "-o", prog, ".")
	build.Dir = filepath.Join(root, "testcluster")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building testcluster: %v: %s", err, out)
	}
	fmt.Fprintln(os.Stderr, "kubebench: starting the test cluster (its first build takes 15-25 minutes)")
	args := []string{"--dir", dir}
	if b.real {
		args = append(args, "--nodes", "real")
	}
	cmd := exec.Command(prog, args...)
	cmd.Dir = build.Dir
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "ready" {
			go io.Copy(io.Discard, out)
			b.kubeconfig = filepath.Join(dir, "kubeconfig")
			return func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }, nil
		}
	}
	_ = cmd.Wait()
	return nil, errors.New("the test cluster stopped before it was ready")
}

// nxdomainDNS answers every name with NXDOMAIN: routes are deferred, as
// for a domain not pointed here yet (the floor has no DNS either).
func nxdomainDNS() (string, func(), error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Rcode = dns.RcodeNameError
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	return pc.LocalAddr().String(), func() { _ = srv.Shutdown() }, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(data, []byte("module github.com/skali-dev/studio\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run kubebench from inside the repository")
		}
		dir = parent
	}
}

func numCPU() int {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return bytes.Count(data, []byte("processor\t:"))
}
