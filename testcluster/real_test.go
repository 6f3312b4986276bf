package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skali-dev/studio/testcluster/images"
)

// needRealNode skips a real-node test where it cannot run (not root, the
// runtime not installed, the binaries not built), and fails it with
// CI=true.
func needRealNode(t *testing.T) string {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if os.Geteuid() != 0 {
		skip("the real-node tests need root (they run containerd, the kubelet and kube-proxy, and set up a bridge)")
	}
	for _, tool := range []string{"containerd", "runc", "iptables", "conntrack", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			skip("the real-node tests need %s: apt-get install containerd runc containernetworking-plugins iptables conntrack nftables", tool)
		}
	}
	bin := binDir(t)
	if ok, err := built(bin); err != nil || !ok {
		skip("the cluster's binaries are not built in %s (go run . --dir /tmp/tc --bin %s --build-only)", bin, bin)
	}
	return bin
}

// realCluster is a running testcluster --nodes real.
type realCluster struct {
	cmd    *exec.Cmd
	dir    string
	stderr *strings.Builder
}

func startReal(t *testing.T, prog, bin string, args ...string) *realCluster {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(prog, append([]string{"--dir", dir, "--bin", bin, "--nodes", "real"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	})
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if sc.Text() == "ready" {
			ready = true
			break
		}
	}
	if !ready {
		_ = cmd.Wait()
		t.Fatalf("the real-node cluster stopped without printing ready (logs in %s)", filepath.Join(dir, "logs"))
	}
	go func() {
		for sc.Scan() {
		}
	}()
	t.Logf("a real-node cluster was ready in %s", time.Since(started).Round(100*time.Millisecond))
	return &realCluster{cmd: cmd, dir: dir, stderr: &stderr}
}

func (rc *realCluster) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(rc.dir, "bin", "kubectl"), append([]string{"--kubeconfig", filepath.Join(rc.dir, "kubeconfig")}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kubectlErr runs kubectl and returns its output and error, for
// commands that are meant to fail.
func (rc *realCluster) kubectlErr(stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(rc.dir, "bin", "kubectl"), append([]string{"--kubeconfig", filepath.Join(rc.dir, "kubeconfig")}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (rc *realCluster) stop(t *testing.T) {
	t.Helper()
	if err := rc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := rc.cmd.Wait(); err != nil {
		t.Fatalf("the cluster exited with %v after SIGTERM", err)
	}
	if strings.Contains(rc.stderr.String(), "restoring the machine:") {
		t.Fatalf("restoring the machine failed: %s", rc.stderr.String())
	}
}

// machineState is what a real node may change machine-wide: every sysctl
// that is not a counter, the iptables and ip6tables rules of each table,
// the network links, the mount points, the runtime's fixed directories,
// the pods' cgroups and processes of a real node.
func machineState(t *testing.T) map[string]string {
	t.Helper()
	st := map[string]string{}
	volatile := []string{"kernel/random/", "kernel/ns_last_pid", "fs/dentry-state", "fs/file-nr", "fs/inode-nr", "fs/inode-state",
		"kernel/pty/nr", "fs/aio-nr", "net/netfilter/nf_conntrack_count", "fs/quota/", "kernel/tainted", "kernel/sched_domain/",
		"net/ipv4/tcp_fastopen_key", "fs/binfmt_misc/", "kernel/keys/", "vm/stat_refresh"}
	_ = filepath.WalkDir("/proc/sys", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel := strings.TrimPrefix(p, "/proc/sys/")
		for _, v := range volatile {
			if strings.HasPrefix(rel, v) {
				return nil
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil // write-only
		}
		st["sysctl "+rel] = strings.TrimSpace(string(b))
		return nil
	})
	for k, v := range iptablesRules() {
		sort.Strings(v)
		st[k] = strings.Join(v, "\n")
	}
	st["nft tables"] = strings.Join(nftTables(), ", ")
	links := linkNames()
	sort.Strings(links)
	st["links"] = strings.Join(links, " ")
	mounts := mountPoints()
	sort.Strings(mounts)
	st["mounts"] = strings.Join(mounts, "\n")
	for _, d := range trackedDirs {
		if _, err := os.Stat(d); err == nil {
			st["dir "+d] = strings.Join(listDir(d), " ")
		} else {
			st["dir "+d] = "(none)"
		}
	}
	for _, d := range []string{stateDir, runDir} {
		if _, err := os.Stat(d); err == nil {
			st["dir "+d] = "exists"
		}
	}
	st["kubepods cgroups"] = strings.Join(kubepodsCgroups(), " ")
	var left []string
	for pid, args := range procs() {
		if ours(pid, args) {
			left = append(left, fmt.Sprintf("%d %s", pid, strings.Join(args, " ")))
		}
	}
	sort.Strings(left)
	st["processes"] = strings.Join(left, "\n")
	return st
}

// idleMachineState is machineState read while no real-node cluster runs:
// it holds the machine's lock while it reads (waiting for another test
// binary's cluster to stop), so that a cluster of another go test binary
// is never part of a "before" or an "after".
func idleMachineState(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.OpenFile(lockFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // releases the lock
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return machineState(t)
}

// sameMachine fails with every difference: a key that existed before has
// another value or is gone, or a key that did not exist is there (a new
// sysctl is allowed only where a module the node loaded added it, never
// for a network interface).
func sameMachine(t *testing.T, when string, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range before {
		if a, ok := after[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: gone (was %q)", k, v))
		} else if a != v {
			diffs = append(diffs, fmt.Sprintf("%s: was %q, now %q", k, v, a))
		}
	}
	for k, v := range after {
		if _, ok := before[k]; ok {
			continue
		}
		if strings.HasPrefix(k, "sysctl ") && !strings.Contains(k, "/conf/") && !strings.Contains(k, "/neigh/") {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("%s: new (%q)", k, v))
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Fatalf("%s, the machine differs from before the start:\n%s", when, strings.Join(diffs, "\n"))
	}
}

func buildProg(t *testing.T) string {
	t.Helper()
	prog := filepath.Join(t.TempDir(), "testcluster")
	if out, err := exec.Command("go", "build", "-o", prog, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	return prog
}

const webYAML = `apiVersion: v1
kind: Namespace
metadata: {name: realtest}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: realtest}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.local/skali/testapp:latest
        args: [serve, --ready-after, 2s, --say, hello]
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /readyz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: realtest}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`

const jobYAML = `apiVersion: batch/v1
kind: Job
metadata: {name: release, namespace: realtest}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: release
        image: registry.local/skali/testapp:latest
        args: [exit, --code, "3", --stdout, "migrating to 7", --stderr, "error: column note is missing"]
`

// The egress pod dials an address off the machine (this machine's own
// default gateway and a public one) and the API server's Service.
const egressYAML = `apiVersion: v1
kind: Pod
metadata: {name: egress, namespace: realtest}
spec:
  restartPolicy: Never
  containers:
  - name: dial
    image: registry.local/skali/testapp:latest
    args: [dial, --to, "192.0.2.1:80,1.1.1.1:443,10.96.0.1:443"]
`

func TestRealNode(t *testing.T) {
	bin := needRealNode(t)
	prog := buildProg(t)
	before := idleMachineState(t)
	rc := startReal(t, prog, bin)

	if reg, err := os.ReadFile(filepath.Join(rc.dir, "registry")); err != nil || !strings.HasPrefix(string(reg), "127.0.0.1:") {
		t.Fatalf("DIR/registry: %q (%v)", reg, err)
	}
	if got := rc.kubectl(t, "", "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}`); strings.TrimSpace(got) != realNode+"=True" {
		t.Fatalf("nodes: %s", got)
	}

	t.Run("ADeploymentWithAReadinessProbeAnswersThroughItsService", func(t *testing.T) {
		started := time.Now()
		rc.kubectl(t, webYAML, "apply", "-f", "-")
		rc.kubectl(t, "", "-n", "realtest", "wait", "deployment/web", "--for=condition=Available", "--timeout=120s")
		t.Logf("Available in %s (the app becomes ready 2 s after it starts)", time.Since(started).Round(100*time.Millisecond))
		if time.Since(started) < 2*time.Second {
			t.Fatal("Available before the app's readiness delay passed")
		}
		ip := rc.kubectl(t, "", "-n", "realtest", "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}")
		client := &http.Client{Timeout: 2 * time.Second}
		deadline := time.Now().Add(30 * time.Second)
		var last string
		for {
			resp, err := client.Get("http://" + ip + "/")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				last = string(b)
				if resp.StatusCode == 200 && strings.HasPrefix(last, "hello from web-") {
					break
				}
			} else {
				last = err.Error()
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Service %s did not answer from the host: %s", ip, last)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("AJobThatExits3ReportsItsCodeAndItsLogs", func(t *testing.T) {
		rc.kubectl(t, jobYAML, "apply", "-f", "-")
		rc.kubectl(t, "", "-n", "realtest", "wait", "job/release", "--for=condition=Failed", "--timeout=90s")
		code := rc.kubectl(t, "", "-n", "realtest", "get", "pods", "-l", "job-name=release", "-o",
			"jsonpath={.items[0].status.containerStatuses[0].state.terminated.exitCode}")
		if code != "3" {
			t.Fatalf("exit code %q, want 3", code)
		}
		logs := rc.kubectl(t, "", "-n", "realtest", "logs", "job/release")
		if !strings.Contains(logs, "migrating to 7") || !strings.Contains(logs, "error: column note is missing") {
			t.Fatalf("logs through the API server: %q", logs)
		}
	})

	t.Run("APodReachesTheAPIServerButNothingOffTheMachine", func(t *testing.T) {
		rc.kubectl(t, egressYAML, "apply", "-f", "-")
		rc.kubectl(t, "", "-n", "realtest", "wait", "pod/egress", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=90s")
		logs := rc.kubectl(t, "", "-n", "realtest", "logs", "egress")
		for _, off := range []string{"192.0.2.1:80", "1.1.1.1:443"} {
			if !strings.Contains(logs, off+": dial tcp "+off+": connect: network is unreachable") {
				t.Errorf("dialling %s from a pod: want network is unreachable (no default route), got:\n%s", off, logs)
			}
		}
		if !strings.Contains(logs, "10.96.0.1:443: connected") {
			t.Errorf("the API server's Service from a pod:\n%s", logs)
		}
	})

	t.Run("AnAppPastItsMemoryLimitIsOOMKilled", func(t *testing.T) {
		rc.kubectl(t, oomYAML, "apply", "-f", "-")
		rc.kubectl(t, "", "-n", "realtest", "wait", "pod/hungry", "--for=jsonpath={.status.phase}=Failed", "--timeout=90s")
		reason := rc.kubectl(t, "", "-n", "realtest", "get", "pod", "hungry", "-o", "jsonpath={.status.containerStatuses[0].state.terminated.reason}")
		if reason != "OOMKilled" {
			t.Fatalf("a container past its 32 MiB limit ended with %q, want OOMKilled", reason)
		}
	})

	t.Run("KubernetesReportsACrashLoopAnUnpullableImageAndANeverReadyRollout", func(t *testing.T) {
		rc.kubectl(t, failuresYAML, "apply", "-f", "-")
		waitJSONPath := func(what, args, jsonpath, want string) {
			t.Helper()
			deadline := time.Now().Add(90 * time.Second)
			var got string
			for {
				got = rc.kubectl(t, "", append([]string{"-n", "realtest", "get", "-o", "jsonpath=" + jsonpath}, strings.Fields(args)...)...)
				if strings.Contains(got, want) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %q, want %q", what, got, want)
				}
				time.Sleep(250 * time.Millisecond)
			}
		}
		// The kubelet reports the loop as waiting CrashLoopBackOff between
		// restarts; on a loaded machine a sample may fall on a restart, so
		// the loop also counts as reported once the container has restarted
		// twice after exiting 2.
		func() {
			deadline := time.Now().Add(90 * time.Second)
			var got string
			for {
				got = rc.kubectl(t, "", "-n", "realtest", "get", "pods", "-l", "app=crash", "-o",
					"jsonpath={.items[0].status.containerStatuses[0].state.waiting.reason} exit {.items[0].status.containerStatuses[0].lastState.terminated.exitCode} restarts {.items[0].status.containerStatuses[0].restartCount}")
				f := strings.Fields(got)
				restarts := 0
				if len(f) > 0 {
					restarts, _ = strconv.Atoi(f[len(f)-1])
				}
				if strings.Contains(got, "CrashLoopBackOff exit 2") || (strings.Contains(got, "exit 2 ") && restarts >= 2) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the crash-looping pod: %q, want CrashLoopBackOff after exit 2", got)
				}
				time.Sleep(250 * time.Millisecond)
			}
		}()
		if logs := rc.kubectl(t, "", "-n", "realtest", "logs", "deployment/crash", "--previous"); !strings.Contains(logs, "cannot open the config") {
			t.Errorf("the crashed container's last log lines: %q", logs)
		}
		waitJSONPath("the pod whose image does not exist", "pods -l app=nope",
			"{.items[0].status.containerStatuses[0].state.waiting.reason}", "ImagePull")
		msg := rc.kubectl(t, "", "-n", "realtest", "get", "pods", "-l", "app=nope", "-o", "jsonpath={.items[0].status.containerStatuses[0].state.waiting.message}")
		if !strings.Contains(msg, "registry.local/skali/nope:1") || !strings.Contains(msg, "not found") {
			t.Errorf("the pull failure's message: %q", msg)
		}
		waitJSONPath("the never-ready rollout", "deployment never",
			`{.status.conditions[?(@.type=="Progressing")].reason}`, "ProgressDeadlineExceeded")
	})

	t.Run("TheAppMigratesAndReadsARowOfPostgreSQLInAPodAndTheStudiosImageRunsAgainstIt", func(t *testing.T) {
		reg, _ := os.ReadFile(filepath.Join(rc.dir, "registry"))
		started := time.Now()
		img, err := images.Postgres()
		if err != nil {
			t.Fatal(err)
		}
		if err := images.Push(strings.TrimSpace(string(reg))+"/skali/postgres:15", img); err != nil {
			t.Fatal(err)
		}
		t.Logf("the PostgreSQL image was built from this machine's files and pushed in %s", time.Since(started).Round(100*time.Millisecond))
		rc.kubectl(t, postgresYAML, "apply", "-f", "-")
		rc.kubectl(t, "", "-n", "realtest", "wait", "deployment/pg", "--for=condition=Available", "--timeout=120s")
		ip := rc.kubectl(t, "", "-n", "realtest", "get", "service", "pg", "-o", "jsonpath={.spec.clusterIP}")
		url := "postgres://app:s3cret@" + ip + ":5432/postgres?sslmode=disable"
		rc.kubectl(t, strings.ReplaceAll(appYAML, "DATABASE_URL_VALUE", url), "apply", "-f", "-")
		rc.kubectl(t, "", "-n", "realtest", "wait", "job/migrate", "--for=condition=Complete", "--timeout=90s")
		if logs := rc.kubectl(t, "", "-n", "realtest", "logs", "job/migrate"); !strings.Contains(logs, "row added: from the release command") {
			t.Fatalf("the release command's output: %q", logs)
		}
		rc.kubectl(t, "", "-n", "realtest", "wait", "deployment/app", "--for=condition=Available", "--timeout=90s")
		appIP := rc.kubectl(t, "", "-n", "realtest", "get", "service", "app", "-o", "jsonpath={.spec.clusterIP}")
		client := &http.Client{Timeout: 5 * time.Second}
		deadline := time.Now().Add(30 * time.Second)
		var last string
		for {
			resp, err := client.Get("http://" + appIP + "/rows")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				last = fmt.Sprintf("%d %s", resp.StatusCode, b)
				if resp.StatusCode == 200 && string(b) == "1 from the release command\n" {
					break
				}
			} else {
				last = err.Error()
			}
			if time.Now().After(deadline) {
				t.Fatalf("the app's rows through its Service: %s", last)
			}
			time.Sleep(200 * time.Millisecond)
		}

		// The Studio's image, built by the image tool's code, runs here
		// against that database and becomes Ready on /readyz.
		started = time.Now()
		studio, err := images.Studio("..")
		if err != nil {
			t.Fatal(err)
		}
		if err := images.Push(strings.TrimSpace(string(reg))+"/skali/studio:latest", studio); err != nil {
			t.Fatal(err)
		}
		t.Logf("the Studio's image was built and pushed in %s", time.Since(started).Round(100*time.Millisecond))
		started = time.Now()
		rc.kubectl(t, strings.ReplaceAll(studioYAML, "DATABASE_URL_VALUE", url), "apply", "-f", "-")
		rc.kubectl(t, "", "-n", "realtest", "wait", "deployment/studio", "--for=condition=Available", "--timeout=120s")
		t.Logf("the Studio's pod was Ready on /readyz %s after it was applied", time.Since(started).Round(100*time.Millisecond))
	})

	rc.stop(t)
	sameMachine(t, "after SIGTERM", before, idleMachineState(t))
}

const failuresYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: crash, namespace: realtest}
spec:
  replicas: 1
  selector: {matchLabels: {app: crash}}
  template:
    metadata: {labels: {app: crash}}
    spec:
      containers:
      - name: crash
        image: registry.local/skali/testapp:latest
        args: [exit, --code, "2", --stderr, "cannot open the config"]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: nope, namespace: realtest}
spec:
  replicas: 1
  selector: {matchLabels: {app: nope}}
  template:
    metadata: {labels: {app: nope}}
    spec:
      containers:
      - {name: nope, image: "registry.local/skali/nope:1"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: never, namespace: realtest}
spec:
  replicas: 1
  progressDeadlineSeconds: 5
  selector: {matchLabels: {app: never}}
  template:
    metadata: {labels: {app: never}}
    spec:
      containers:
      - name: never
        image: registry.local/skali/testapp:latest
        args: [serve, --never-ready]
        readinessProbe: {httpGet: {path: /readyz, port: 8080}, periodSeconds: 1}
`

const oomYAML = `apiVersion: v1
kind: Pod
metadata: {name: hungry, namespace: realtest}
spec:
  restartPolicy: Never
  containers:
  - name: hungry
    image: registry.local/skali/testapp:latest
    args: [allocate, --mib, "96"]
    resources: {limits: {memory: 32Mi}}
`

// postgresYAML runs the PostgreSQL image built from this machine's files:
// initdb into the pod's /tmp, a password, connections from pods.
const postgresYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: pg, namespace: realtest}
spec:
  replicas: 1
  selector: {matchLabels: {app: pg}}
  template:
    metadata: {labels: {app: pg}}
    spec:
      containers:
      - name: postgres
        image: registry.local/skali/postgres:15
        command: [/bin/sh, -c, 'echo s3cret > /tmp/pw && initdb -D /tmp/data -U app --pwfile=/tmp/pw --auth=scram-sha-256 -E UTF8 --locale=C >/dev/null && echo "host all all 0.0.0.0/0 scram-sha-256" >> /tmp/data/pg_hba.conf && exec postgres -D /tmp/data -c listen_addresses=*']
        readinessProbe: {tcpSocket: {port: 5432}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: pg, namespace: realtest}
spec:
  selector: {app: pg}
  ports: [{port: 5432}]
`

const studioYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: studio, namespace: realtest}
spec:
  replicas: 1
  selector: {matchLabels: {app: studio}}
  template:
    metadata: {labels: {app: studio}}
    spec:
      securityContext: {runAsNonRoot: true}
      containers:
      - name: studio
        image: registry.local/skali/studio:latest
        env:
        - {name: DATABASE_URL, value: "DATABASE_URL_VALUE"}
        - {name: STUDIO_SECRET_KEY, value: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}
        readinessProbe: {httpGet: {path: /readyz, port: 8080}, periodSeconds: 1}
`

// appYAML is the test application with a database: its release command
// (a Job) migrates, its page reads the row.
const appYAML = `apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: realtest}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: registry.local/skali/testapp:latest
        args: [migrate]
        env:
        - {name: DATABASE_URL, value: "DATABASE_URL_VALUE"}
        - {name: TESTAPP_NOTE, value: from the release command}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: realtest}
spec:
  replicas: 1
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers:
      - name: app
        image: registry.local/skali/testapp:latest
        args: [serve]
        env: [{name: DATABASE_URL, value: "DATABASE_URL_VALUE"}]
        readinessProbe: {httpGet: {path: /readyz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: realtest}
spec:
  selector: {app: app}
  ports: [{port: 80, targetPort: 8080}]
`

// TestRealNodeKilledIsRestoredByTheNextStart kills a real-node cluster with
// SIGKILL while a pod runs (its shim, container, mounts, bridge, iptables
// rules and sysctls are left), then starts another, which restores the
// machine first, and stops it: the machine is as before.
func TestRealNodeKilledIsRestoredByTheNextStart(t *testing.T) {
	bin := needRealNode(t)
	prog := buildProg(t)
	before := idleMachineState(t)
	rc := startReal(t, prog, bin)
	rc.kubectl(t, webYAML, "apply", "-f", "-")
	rc.kubectl(t, "", "-n", "realtest", "wait", "deployment/web", "--for=condition=Available", "--timeout=120s")
	if err := rc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = rc.cmd.Wait()
	left := machineState(t)
	if left["processes"] == "" || !strings.Contains(left["links"], bridgeName) {
		t.Fatalf("after SIGKILL nothing was left to restore (processes %q, links %q): the test proves nothing", left["processes"], left["links"])
	}
	rc = startReal(t, prog, bin)
	if !strings.Contains(rc.stderr.String(), "did not stop cleanly") {
		t.Errorf("the next start did not say it restored the machine: %s", rc.stderr.String())
	}
	rc.stop(t)
	sameMachine(t, "after SIGKILL, a start and a SIGTERM", before, idleMachineState(t))
}
