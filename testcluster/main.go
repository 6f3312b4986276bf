// Command testcluster builds and runs a real Kubernetes control plane for
// the Studio's tests and for trying its Kubernetes platform: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler built from the
// module versions pinned in go.mod, and kwok's simulated nodes, whose pods
// go through fast stages. It installs the CRDs the Studio's driver uses,
// writes DIR/kubeconfig and DIR/bin/kubectl, prints a line "ready" once the
// API server answers and a node is Ready, and runs until SIGTERM or SIGINT,
// when it stops everything it started.
//
//	cd testcluster && go run . --dir /tmp/cluster
//
// With --nodes real (root only) the cluster has one real node instead:
// containerd (Debian's), an image registry in this process on loopback
// (its address in DIR/registry; registry.local/... names it too), the
// kubelet and kube-proxy, pods on the bridge skalitc0 (10.244.0.0/24, no
// default route, no masquerade) and the API server reachable from pods at
// the kubernetes Service. One such cluster runs per machine (a lock); the
// machine's sysctls, iptables chains, links, mounts and runtime directories
// are recorded before and restored when it stops, or by the next start
// after a crash.
//
// With --cnpg as well, the CloudNativePG operator (built from its Go
// module, in cnpg/) runs in the cluster from its release manifest, with
// the real CRDs, and its instances run the PostgreSQL image built from
// the machine's Debian files; claims get hostPath volumes.
//
// Pods annotated testcluster.skali.dev/never-ready run but never become
// Ready; pods annotated testcluster.skali.dev/fail exit with code 1.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Pinned versions. Kubernetes' own and etcd's are in go.mod; these are
// repeated for the link-time version and for the modules read for CRDs.
const (
	kubernetesVersion  = "v1.36.3"
	kwokModule         = "sigs.k8s.io/kwok"
	kwokVersion        = "v0.8.0"
	certManagerModule  = "github.com/cert-manager/cert-manager"
	certManagerVersion = "v1.21.2"
	gatewayAPIModule   = "sigs.k8s.io/gateway-api"
	gatewayAPIVersion  = "v1.6.3"
)

//go:embed kwok/stages.yaml
var kwokStages string

var (
	dirFlag   = flag.String("dir", "", "directory for the cluster's data, kubeconfig and binaries (required)")
	binFlag   = flag.String("bin", "", "directory for the built binaries (default the user cache's skali-testcluster/bin, where the Studio's tests look); several clusters may share one")
	nodesFlag = flag.String("nodes", "3", "how many simulated nodes (kwok), or real: one real node (containerd, kubelet, kube-proxy; root only)")
	buildOnly = flag.Bool("build-only", false, "build the binaries into the bin directory and exit")
	checkOnly = flag.Bool("check-built", false, "exit with status 0 when the bin directory holds this version's binaries, 3 when not")
	sharedFlg = flag.String("shared", "", "a directory of locks through which several processes share this cluster: it runs while one of them uses it (see shared.go), and outlives the process that started it")
	cnpgFlag  = flag.Bool("cnpg", false, "with --nodes real: run the CloudNativePG operator (built from its Go module) instead of playing it; with --build-only and --check-built: its binary too")
)

func main() {
	flag.Parse()
	if *dirFlag == "" {
		fmt.Fprintln(os.Stderr, "testcluster: --dir is required")
		os.Exit(2)
	}
	// Started through "go run", this process dies with its parent: a
	// SIGTERM to "go run" alone would otherwise leave it behind. A shared
	// cluster outlives the process that started it, and stops when unused.
	if *sharedFlg == "" {
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "testcluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	dir, err := filepath.Abs(*dirFlag)
	if err != nil {
		return err
	}
	bin := *binFlag
	if bin == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("no user cache directory for the binaries (give --bin): %w", err)
		}
		bin = filepath.Join(cache, "skali-testcluster", "bin")
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	if *checkOnly {
		ok, err := built(bin)
		if err != nil {
			return err
		}
		if ok && *cnpgFlag {
			if ok, err = cnpgBuilt(bin); err != nil {
				return err
			}
		}
		if !ok {
			os.Exit(3)
		}
		return nil
	}
	real := *nodesFlag == "real"
	fake := 0
	if !real {
		if fake, err = strconv.Atoi(*nodesFlag); err != nil || fake < 1 {
			return fmt.Errorf("--nodes is a number of simulated nodes or real, not %q", *nodesFlag)
		}
	}
	if *cnpgFlag && !real && !*buildOnly {
		return errors.New("--cnpg needs --nodes real: the operator and its instances run in real pods")
	}
	if err := build(ctx, bin); err != nil {
		return err
	}
	if *cnpgFlag {
		if err := buildCNPG(ctx, bin); err != nil {
			return err
		}
	}
	if *buildOnly {
		return nil
	}
	if bin != filepath.Join(dir, "bin") {
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			return err
		}
		_ = os.Remove(filepath.Join(dir, "bin", "kubectl"))
		if err := os.Symlink(filepath.Join(bin, "kubectl"), filepath.Join(dir, "bin", "kubectl")); err != nil {
			return err
		}
	}
	c := &cluster{dir: dir, bin: bin, fakeNodes: fake, realNode: real, cnpg: *cnpgFlag}
	defer c.stop()
	if err := c.start(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	fmt.Fprintf(os.Stderr, "testcluster: kubeconfig %s, kubectl %s\n", filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "bin", "kubectl"))
	if *sharedFlg != "" {
		if err := announceShared(*sharedFlg, dir); err != nil {
			return err
		}
		return whileUsed(ctx, *sharedFlg)
	}
	<-ctx.Done()
	return nil
}

var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet", "kube-proxy", "kwok"}

// ldflags set the version Kubernetes' binaries report; clients reject the
// default v0.0.0-master.
func ldflags() string {
	f := "-s -w"
	for _, p := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		f += fmt.Sprintf(" -X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=36 -X %s.gitTreeState=clean", p, kubernetesVersion, p, p, p)
	}
	return f
}

// stamp identifies a build: the pinned versions, the flags and Go.
func stamp() (string, error) {
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		return "", fmt.Errorf("run it from the testcluster directory (go.mod not found): %w", err)
	}
	sum := sha256.Sum256([]byte(string(gomod) + ldflags() + kwokVersion + runtime.Version()))
	return hex.EncodeToString(sum[:]), nil
}

// built reports whether bin holds the binaries of this stamp.
func built(bin string) (bool, error) {
	return builtWith(bin, "stamp", stamp, binaries)
}

// builtWith reports whether bin holds the names and a stamp file whose
// content is what stamp returns.
func builtWith(bin, stampFile string, stamp func() (string, error), names []string) (bool, error) {
	st, err := stamp()
	if err != nil {
		return false, err
	}
	if old, err := os.ReadFile(filepath.Join(bin, stampFile)); err != nil || string(old) != st {
		return false, nil
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(bin, n)); err != nil {
			return false, nil
		}
	}
	return true, nil
}

// build puts the binaries in bin, unless a build with the same
// versions and flags is already there. Go's build cache makes a rebuild
// after a change of flags a relink.
func build(ctx context.Context, bin string) error {
	if ok, err := built(bin); ok || err != nil {
		return err
	}
	st, _ := stamp()
	started := time.Now()
	fmt.Fprintln(os.Stderr, "testcluster: building etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet, kube-proxy and kwok (a cold build takes about 18 minutes on 2 cores)")
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", ldflags(), "-o", bin+"/",
		"./cmd/etcd", "k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager",
		"k8s.io/kubernetes/cmd/kube-scheduler", "k8s.io/kubernetes/cmd/kubectl",
		"k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-proxy")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building Kubernetes: %w", err)
	}
	// kwok is built with its own go.mod (its dependencies differ from
	// Kubernetes' pinned ones).
	cmd = exec.CommandContext(ctx, "go", "install", "-ldflags", "-s -w", kwokModule+"/cmd/kwok@"+kwokVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+bin)
	cmd.Dir = os.TempDir()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building kwok: %w", err)
	}
	fmt.Fprintf(os.Stderr, "testcluster: built in %s\n", time.Since(started).Round(time.Second))
	return os.WriteFile(filepath.Join(bin, "stamp"), []byte(st), 0o644)
}

type cluster struct {
	dir, bin  string
	fakeNodes int
	realNode  bool
	// cnpg: the CloudNativePG operator runs (cnpg.go) instead of being
	// played.
	cnpg  bool
	real  *realNodeState
	procs []*exec.Cmd
	pgid  int
}

// spawn starts a component in the cluster's process group, its output in
// DIR/logs/NAME.log.
func (c *cluster) spawn(name string, args ...string) error {
	return c.spawnPath(name, filepath.Join(c.bin, name), args...)
}

// spawnPath starts a program of the machine's (containerd) like spawn.
func (c *cluster) spawnPath(name, path string, args ...string) error {
	logs := filepath.Join(c.dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(logs, name+".log"))
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: c.pgid, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	if c.pgid == 0 {
		c.pgid = cmd.Process.Pid
	}
	c.procs = append(c.procs, cmd)
	return nil
}

// stop ends every component, newest first, then the whole process group,
// and removes etcd's data.
func (c *cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	if c.pgid != 0 {
		_ = syscall.Kill(-c.pgid, syscall.SIGKILL)
	}
	// etcd's data (about 70 MB, mostly its preallocated log) is of no use
	// once stopped: a start begins afresh. The logs stay for a look.
	_ = os.RemoveAll(filepath.Join(c.dir, "etcd"))
	c.stopReal()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *cluster) start(ctx context.Context) error {
	for _, d := range []string{"etcd", "pki"} {
		_ = os.RemoveAll(filepath.Join(c.dir, d))
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o700); err != nil {
			return err
		}
	}
	pki := filepath.Join(c.dir, "pki")
	caPEM, err := writePKI(pki)
	if err != nil {
		return err
	}
	token := randomHex(24)
	tokens := token + `,admin,admin,"system:masters"` + "\n"
	nodeToken, proxyToken := randomHex(24), randomHex(24)
	if c.realNode {
		// The kubelet as its node (Node authorization, NodeRestriction);
		// kube-proxy as the user the default node-proxier binding names.
		tokens += nodeToken + ",system:node:" + realNode + ",system:node:" + realNode + `,"system:nodes"` + "\n" +
			proxyToken + ",system:kube-proxy,system:kube-proxy\n"
		if err := c.prepareReal(ctx); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(pki, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}

	etcdPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	if err := c.spawn("etcd", "--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return err
	}

	apiPort, err := freePort()
	if err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	var realFlags []string
	if c.realNode {
		// The kubelet listens on loopback: its node's Hostname address,
		// localhost, is where the API server finds it.
		realFlags = append(realFlags, "--kubelet-preferred-address-types=Hostname")
	}
	if err := c.spawn("kube-apiserver", append([]string{
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(apiPort),
		"--tls-cert-file", filepath.Join(pki, "server.crt"), "--tls-private-key-file", filepath.Join(pki, "server.key"),
		"--client-ca-file", filepath.Join(pki, "ca.crt"),
		"--token-auth-file", filepath.Join(pki, "tokens.csv"),
		"--authorization-mode", "Node,RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(pki, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--endpoint-reconciler-type", "none",
		"--enable-priority-and-fairness=false",
		"--allow-privileged=true",
		"--cert-dir", filepath.Join(c.dir, "pki", "apiserver"),
	}, realFlags...)...); err != nil {
		return err
	}

	kubeconfig := filepath.Join(c.dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, server, caPEM, token); err != nil {
		return err
	}
	if err := waitReadyz(ctx, server, caPEM, token); err != nil {
		return err
	}

	if err := c.spawn("kube-controller-manager", "--kubeconfig", kubeconfig,
		"--controllers", "deployment-controller,replicaset-controller,job-controller,horizontal-pod-autoscaler-controller,"+
			"serviceaccount-controller,serviceaccount-token-controller,namespace-controller,garbage-collector-controller,"+
			"endpointslice-controller,ttl-after-finished-controller,persistentvolume-binder-controller,node-lifecycle-controller,"+
			// kube-root-ca.crt, which every pod's service-account volume
			// needs; without the protection controllers a namespace with
			// a claim never finishes deleting.
			"root-ca-certificate-publisher-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller",
		"--leader-elect=false", "--secure-port=0",
		"--service-account-private-key-file", filepath.Join(pki, "sa.key"),
		"--root-ca-file", filepath.Join(pki, "ca.crt"),
		"--horizontal-pod-autoscaler-sync-period=2s",
	); err != nil {
		return err
	}
	if err := c.spawn("kube-scheduler", "--kubeconfig", kubeconfig, "--leader-elect=false", "--secure-port=0"); err != nil {
		return err
	}
	if c.realNode {
		if err := c.startReal(ctx, apiPort, nodeToken, proxyToken, caPEM); err != nil {
			return err
		}
	} else {
		stages := filepath.Join(c.dir, "kwok.yaml")
		if err := os.WriteFile(stages, []byte(kwokStages), 0o644); err != nil {
			return err
		}
		// kwok drives only the nodes annotated as its own, never a real one.
		if err := c.spawn("kwok", "--kubeconfig", kubeconfig, "--config", stages,
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--node-lease-duration-seconds=40", "--server-address="); err != nil {
			return err
		}
		if err := c.kubectlApply(ctx, nodesYAML(c.fakeNodes)); err != nil {
			return fmt.Errorf("creating nodes: %w", err)
		}
	}
	if err := c.installCRDs(ctx); err != nil {
		return err
	}
	// No bucket provisioner runs here, nor CloudNativePG without --cnpg:
	// the cluster plays them (operators.go), and on a real node a
	// provisioner of hostPath volumes.
	ops := newOperators(server, caPEM, token)
	ops.playCNPG = !c.cnpg
	if c.realNode {
		ops.volumes = filepath.Join(stateDir, "volumes")
		if err := c.kubectlApply(ctx, storageYAML); err != nil {
			return err
		}
		// The pods' cluster DNS (dns.go), on the bridge only.
		conn, err := net.ListenPacket("udp4", net.JoinHostPort(gatewayIP, "53"))
		if err != nil {
			return fmt.Errorf("the cluster DNS: %w", err)
		}
		go ops.serveDNS(ctx, conn)
	}
	ops.run(ctx)
	if err := c.kubectl(ctx, nil, "wait", "--for=condition=Ready", "node", "--all", "--timeout=120s"); err != nil {
		return err
	}
	if c.realNode {
		// Pods wait for kube-root-ca.crt in ContainerCreating otherwise.
		if err := c.kubectl(ctx, nil, "wait", "--for=create", "configmap/kube-root-ca.crt", "-n", "default", "--timeout=60s"); err != nil {
			return err
		}
	}
	if c.cnpg {
		if err := c.pushCNPGImages(); err != nil {
			return err
		}
		return c.installCNPG(ctx)
	}
	return nil
}

func (c *cluster) kubectl(ctx context.Context, stdin *strings.Reader, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig", filepath.Join(c.dir, "kubeconfig")}, args...)...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (c *cluster) kubectlApply(ctx context.Context, yaml string) error {
	return c.kubectl(ctx, strings.NewReader(yaml), "apply", "--server-side", "--field-manager=testcluster", "-f", "-")
}

func nodesYAML(n int) string {
	var b strings.Builder
	for i := 0; i < max(n, 1); i++ {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-%d
  labels:
    type: kwok
    kubernetes.io/hostname: kwok-node-%d
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
  annotations:
    kwok.x-k8s.io/node: fake
status:
  allocatable: {cpu: "32", memory: 256Gi, ephemeral-storage: 1Ti, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, ephemeral-storage: 1Ti, pods: "110"}
`, i, i)
	}
	return b.String()
}

// installCRDs applies cert-manager's and Gateway API's CRDs from their Go
// modules and the vendored minimal ones (crds/), and waits until served.
func (c *cluster) installCRDs(ctx context.Context) error {
	dirs := []string{"crds"}
	for _, m := range []struct{ mod, sub string }{
		{certManagerModule + "@" + certManagerVersion, "deploy/crds"},
		{gatewayAPIModule + "@" + gatewayAPIVersion, "config/crd/standard"},
	} {
		cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", m.mod)
		cmd.Dir = os.TempDir()
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("downloading %s: %w", m.mod, err)
		}
		var info struct{ Dir, Error string }
		if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
			return fmt.Errorf("downloading %s: %s", m.mod, info.Error)
		}
		dirs = append(dirs, filepath.Join(info.Dir, m.sub))
	}
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(d, "*.yaml"))
		if err != nil {
			return err
		}
		for _, f := range files {
			if strings.Contains(filepath.Base(f), "vap_") {
				continue // a ValidatingAdmissionPolicy against upgrades, not a CRD
			}
			if c.cnpg && strings.HasPrefix(filepath.Base(f), "postgresql.cnpg.io_") {
				continue // the operator's release manifest installs the real ones
			}
			if err := c.kubectl(ctx, nil, "apply", "--server-side", "--field-manager=testcluster", "-f", f); err != nil {
				return fmt.Errorf("installing CRDs: %w", err)
			}
		}
	}
	return c.kubectl(ctx, nil, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
}

func waitReadyz(ctx context.Context, server string, caPEM []byte, token string) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(90 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("the API server did not become ready within 90 s (see logs/kube-apiserver.log)")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func writeKubeconfig(path, server string, caPEM []byte, token string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testcluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: testcluster
  context:
    cluster: testcluster
    user: admin
current-context: testcluster
`, server, base64.StdEncoding.EncodeToString(caPEM), token)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// writePKI writes a CA, the API server's serving certificate for the
// loopback address and the service-account signing key pair.
func writePKI(dir string) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "testcluster-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1"), net.ParseIP(gatewayIP)}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		"ca.crt":     caPEM,
		"server.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
	}
	for name, k := range map[string]*ecdsa.PrivateKey{"server.key": srvKey, "sa.key": saKey} {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, err
		}
		files[name] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	files["sa.pub"] = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
