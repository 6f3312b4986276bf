// Package clustertest gives tests a real Kubernetes cluster: the
// repository's testcluster program (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok's simulated nodes),
// started once per test binary and stopped when it exits.
//
// SKALI_TEST_KUBECONFIG names a running cluster's kubeconfig to use instead.
// Without it the cluster is started from the binaries testcluster built
// (SKALI_TESTCLUSTER_BIN, default the user cache). When they were never
// built the tests skip and say how to build them; with CI=true they fail
// instead (CI builds the cluster before the tests); with
// SKALI_TESTCLUSTER_BUILD=1 the first test builds it (about 15 minutes cold
// on 2 cores: give go test a long -timeout). A cluster that was built but
// does not start fails the tests.
package clustertest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Cluster is a running test cluster.
type Cluster struct {
	// Kubeconfig is the path of its kubeconfig; Kubectl of a matching
	// kubectl (empty for a cluster given by SKALI_TEST_KUBECONFIG without
	// one beside it).
	Kubeconfig string
	Kubectl    string
	Dir        string
	// Registry is a real-node cluster's image registry (host:port on
	// loopback, DIR/registry), which its node pulls registry.local/...
	// from; empty for simulated nodes.
	Registry string
	// CNPG: the CloudNativePG operator runs in this real-node cluster
	// (testcluster --cnpg; DIR/cnpg) instead of being played, and its
	// instances run PostgresImages:MAJOR.
	CNPG bool
}

// Option asks a real-node cluster for more than its node.
type Option int

const (
	// CNPG asks for the CloudNativePG operator (testcluster --cnpg).
	CNPG Option = iota + 1
)

// PostgresImages is the repository of a --cnpg cluster's PostgreSQL
// images (its tags 17 and 18 hold the machine's Debian PostgreSQL 15),
// for the driver's Options.PostgresImages.
const PostgresImages = "registry.local/skali/postgres"

// BridgeIP is the real-node cluster's address on its pods' bridge: a
// server of a test listening there is reachable from the pods (and from
// this machine), never from outside it.
const BridgeIP = "10.244.0.1"

var (
	once    sync.Once
	shared  *Cluster
	errOnce error
	skip    bool

	realOnce  sync.Once
	realShare *Cluster
	realErr   error
	realSkip  bool
)

// StartReal returns the test binary's real-node cluster (testcluster
// --nodes real: containerd, a kubelet and kube-proxy running real pods,
// with the test application's image, registry.local/skali/testapp:latest,
// in its registry), starting it at first use; every test of the binary
// shares it, and so do the other test binaries running on the machine
// (joinShared): it stops once none has used it for a few seconds. SKALI_TEST_REAL_KUBECONFIG names a running one to
// use instead. Where it cannot run (not root, the runtime or the binaries
// missing) the test skips with a note, and fails with CI=true.
//
// With CNPG the test needs the CloudNativePG operator. Since the binary's
// tests share one cluster, it is started with the operator whenever the
// operator is built (or the first test asks for it), so that a later test
// that asks finds it.
func StartReal(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	wantCNPG := slices.Contains(opts, CNPG)
	realOnce.Do(func() { realShare, realSkip, realErr = startReal(wantCNPG) })
	if realErr != nil {
		if realSkip && os.Getenv("CI") != "true" {
			t.Skipf("no real-node test cluster: %v", realErr)
		}
		t.Fatalf("no real-node test cluster: %v", realErr)
	}
	if wantCNPG && !realShare.CNPG {
		msg := "the real-node test cluster runs no CloudNativePG operator: it is not built; build it once (about 3.5 minutes cold) with: cd testcluster && go run . --dir /tmp/testcluster --build-only --cnpg"
		if os.Getenv("CI") != "true" {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return realShare
}

func startReal(wantCNPG bool) (*Cluster, bool, error) {
	if kc := os.Getenv("SKALI_TEST_REAL_KUBECONFIG"); kc != "" {
		c := &Cluster{Kubeconfig: kc, Dir: filepath.Dir(kc)}
		if k := filepath.Join(c.Dir, "bin", "kubectl"); fileExists(k) {
			c.Kubectl = k
		}
		reg, err := os.ReadFile(filepath.Join(c.Dir, "registry"))
		if err != nil {
			return nil, false, fmt.Errorf("SKALI_TEST_REAL_KUBECONFIG: no registry beside it: %v", err)
		}
		c.Registry = strings.TrimSpace(string(reg))
		c.CNPG = fileExists(filepath.Join(c.Dir, "cnpg"))
		return c, false, nil
	}
	if os.Geteuid() != 0 {
		return nil, true, errors.New("real pods need root (containerd, the kubelet and kube-proxy, a bridge)")
	}
	for _, tool := range []string{"containerd", "runc", "iptables", "conntrack", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, true, fmt.Errorf("real pods need %s: apt-get install containerd runc containernetworking-plugins iptables conntrack nftables", tool)
		}
	}
	prog, src, bin, dir, args, skip, err := build(func(check func(...string) bool) []string {
		if wantCNPG || check("--cnpg") {
			return []string{"--nodes", "real", "--cnpg"}
		}
		return []string{"--nodes", "real"}
	})
	if err != nil {
		return nil, skip, err
	}
	c, err := joinShared(prog, src, bin, dir, args)
	if err != nil {
		return nil, false, err
	}
	c.CNPG = fileExists(filepath.Join(c.Dir, "cnpg"))
	reg, err := os.ReadFile(filepath.Join(c.Dir, "registry"))
	if err != nil {
		return nil, false, err
	}
	c.Registry = strings.TrimSpace(string(reg))
	return c, false, nil
}

// Start returns the test binary's cluster, starting it at first use. It
// skips the test when no cluster can be had, or fails it under CI=true.
func Start(t testing.TB) *Cluster {
	t.Helper()
	once.Do(func() { shared, skip, errOnce = start() })
	if errOnce != nil {
		if skip && os.Getenv("CI") != "true" {
			t.Skipf("no Kubernetes test cluster: %v", errOnce)
		}
		t.Fatalf("no Kubernetes test cluster: %v", errOnce)
	}
	return shared
}

func start() (*Cluster, bool, error) {
	if kc := os.Getenv("SKALI_TEST_KUBECONFIG"); kc != "" {
		c := &Cluster{Kubeconfig: kc, Dir: filepath.Dir(kc)}
		if k := filepath.Join(c.Dir, "bin", "kubectl"); fileExists(k) {
			c.Kubectl = k
		}
		return c, false, nil
	}
	return run(nil)
}

// run builds testcluster and runs it until the test binary ends, with the
// arguments argsOf returns (given a check of whether the binaries of more
// arguments are built).
func run(argsOf func(check func(...string) bool) []string) (*Cluster, bool, error) {
	prog, src, bin, dir, args, skip, err := build(argsOf)
	if err != nil {
		return nil, skip, err
	}
	return runOwn(prog, src, bin, dir, args)
}

// build builds testcluster into a new directory (dir, where a cluster of
// this binary's own runs) and checks its binaries are built for args.
func build(argsOf func(check func(...string) bool) []string) (prog, src, bin, dir string, args []string, skip bool, err error) {
	src, err = sourceDir()
	if err != nil {
		return "", "", "", "", nil, true, err
	}
	if _, err := exec.LookPath("go"); err != nil {
		return "", "", "", "", nil, true, errors.New("the go command is not on PATH")
	}
	bin = os.Getenv("SKALI_TESTCLUSTER_BIN")
	if bin == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", "", "", "", nil, true, err
		}
		bin = filepath.Join(cache, "skali-testcluster", "bin")
	}
	dir, err = os.MkdirTemp("", "skali-testcluster-")
	if err != nil {
		return "", "", "", "", nil, true, err
	}
	prog = filepath.Join(dir, "testcluster")
	cmd := exec.Command("go", "build", "-o", prog, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", "", "", nil, true, fmt.Errorf("building %s: %v: %s", src, err, out)
	}
	built := func(more ...string) bool {
		check := exec.Command(prog, append([]string{"--dir", dir, "--bin", bin, "--check-built"}, more...)...)
		check.Dir = src
		return check.Run() == nil
	}
	if argsOf != nil {
		args = argsOf(built)
	}
	if !built(args...) && os.Getenv("SKALI_TESTCLUSTER_BUILD") != "1" {
		// Not built inside a test (a cold build outlasts a test's timeout):
		// CI builds it before the tests, and fails here when it did not.
		return "", "", "", "", nil, true, fmt.Errorf("its binaries are not built in %s; build them once (about 15 minutes cold) with: cd %s && go run . --dir /tmp/testcluster --bin %s --build-only, or set SKALI_TESTCLUSTER_BUILD=1", bin, src, bin)
	}
	return prog, src, bin, dir, args, false, nil
}

// runOwn runs the cluster built by build in dir until this process ends.
func runOwn(prog, src, bin, dir string, args []string) (*Cluster, bool, error) {
	c := &Cluster{Kubeconfig: filepath.Join(dir, "kubeconfig"), Kubectl: filepath.Join(dir, "bin", "kubectl"), Dir: dir}
	ready := make(chan error, 1)
	// The cluster dies with this test binary: it gets SIGTERM when the
	// thread that started it ends, and this thread never ends before the
	// process does.
	go func() {
		runtime.LockOSThread()
		cmd := exec.Command(prog, append([]string{"--dir", dir, "--bin", bin}, args...)...)
		cmd.Dir = src
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		logf, err := os.Create(filepath.Join(dir, "testcluster.log"))
		if err != nil {
			ready <- err
			return
		}
		cmd.Stderr = logf
		out, err := cmd.StdoutPipe()
		if err != nil {
			ready <- err
			return
		}
		if err := cmd.Start(); err != nil {
			ready <- err
			return
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				ready <- nil
				break
			}
		}
		go func() { _, _ = bufioDrain(sc) }()
		err = cmd.Wait()
		logf.Close()
		select {
		case ready <- fmt.Errorf("testcluster stopped before it was ready (%v); see %s", err, filepath.Join(dir, "testcluster.log")):
		default:
		}
		select {} // keep the thread, and so the cluster, until the process ends
	}()
	select {
	case err := <-ready:
		if err != nil {
			return nil, false, err
		}
	case <-time.After(45 * time.Minute):
		return nil, false, errors.New("testcluster did not print ready within 45 minutes")
	}
	return c, false, nil
}

func bufioDrain(sc *bufio.Scanner) (int, error) {
	n := 0
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}

// sourceDir finds the repository's testcluster directory above the
// current one.
func sourceDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "testcluster", "go.mod")) {
			return filepath.Join(dir, "testcluster"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the repository's testcluster directory was not found")
		}
		dir = parent
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
