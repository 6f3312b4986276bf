package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// binDir is where the binaries were built (the Studio's tests use the same
// default).
func binDir(t *testing.T) string {
	if b := os.Getenv("SKALI_TESTCLUSTER_BIN"); b != "" {
		return b
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(cache, "skali-testcluster", "bin")
}

// startCluster runs the program until it prints ready and returns it with
// the processes it started.
func startCluster(t *testing.T) (*exec.Cmd, []int, string) {
	t.Helper()
	bin := binDir(t)
	if ok, err := built(bin); err != nil || !ok {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the cluster's binaries are not built in %s", bin)
		}
		t.Skipf("the cluster's binaries are not built in %s (go run . --dir /tmp/tc --bin %s --build-only)", bin, bin)
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "testcluster")
	if out, err := exec.Command("go", "build", "-o", prog, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	cmd := exec.Command(prog, "--dir", dir, "--bin", bin, "--nodes", "2")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if sc.Text() == "ready" {
			ready = true
			break
		}
	}
	if !ready {
		t.Fatal("the cluster stopped without printing ready")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	// It answers, with two Ready nodes and the driver's CRDs.
	kubectl := filepath.Join(dir, "bin", "kubectl")
	got, err := exec.Command(kubectl, "--kubeconfig", filepath.Join(dir, "kubeconfig"), "get", "nodes", "-o",
		`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}`).CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "kwok-node-0=True kwok-node-1=True" {
		t.Fatalf("nodes: %s (%v)", got, err)
	}
	crds, err := exec.Command(kubectl, "--kubeconfig", filepath.Join(dir, "kubeconfig"), "get", "crd", "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatalf("crds: %s (%v)", crds, err)
	}
	for _, want := range []string{"certificates.cert-manager.io", "httproutes.gateway.networking.k8s.io", "clusters.postgresql.cnpg.io", "objectbucketclaims.objectbucket.io"} {
		if !strings.Contains(string(crds), want) {
			t.Errorf("CRD %s is not served: %s", want, crds)
		}
	}
	return cmd, children(t, cmd.Process.Pid), dir
}

// children are the processes whose parent is pid.
func children(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ")".
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok.
	if len(out) != 5 {
		t.Fatalf("the cluster runs %d processes, want 5", len(out))
	}
	return out
}

func gone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range pids {
		for {
			err := syscall.Kill(p, 0)
			if errors.Is(err, syscall.ESRCH) {
				break
			}
			// A zombie (not yet reaped by init) is gone too.
			if stat, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat"); strings.Contains(string(stat), ") Z ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d is still running after the cluster stopped", p)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func TestSIGTERMStopsEverythingItStarted(t *testing.T) {
	cmd, pids, _ := startCluster(t)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the cluster exited with %v after SIGTERM", err)
	}
	gone(t, pids)
}

func TestKilledItTakesItsProcessesAlong(t *testing.T) {
	cmd, pids, _ := startCluster(t)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	gone(t, pids)
}
