package main

// The real node (--nodes real): containerd, an in-process image registry,
// the kubelet and kube-proxy, pods on a bridge of the machine's own, and
// the machine-wide state they change recorded before and restored after
// (also after a crash, by the next start).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/skali-dev/studio/testcluster/images"
)

// Machine-wide names: one real-node cluster runs per machine.
const (
	lockFile   = "/run/lock/skali-testcluster-real.lock"
	stateDir   = "/var/lib/skali-testcluster-real"
	runDir     = "/run/skali-testcluster-real"
	bridgeName = "skalitc0"
	podCIDR    = "10.244.0.0/24"
	gatewayIP  = "10.244.0.1"
	serviceNet = "10.96.0.0/16"
	// The node is named localhost: the API server reaches the kubelet,
	// which listens on loopback only, by its Hostname address (the kubelet
	// refuses a loopback node IP).
	realNode = "localhost"
	// PauseImage and TestAppImage are pushed at every start; registry.local
	// is mapped onto the in-process registry (no DNS query is made).
	pauseImage   = "registry.local/skali/pause:3.10"
	testAppImage = "registry.local/skali/testapp:latest"
	// The comment on the one rule of its own: pods cannot send anything
	// off the machine even if one adds a route.
	forwardComment = "skali-testcluster: pods stay on the machine"
)

// containerdAddress is the runtime's socket; the shims name it on their
// command lines, which is how a start after a crash finds them.
var containerdAddress = filepath.Join(runDir, "containerd", "containerd.sock")

// tunables are the sysctls the kubelet, kube-proxy and the bridge plugin
// may set; their values before the start are restored.
var tunables = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
	"net.ipv4.ip_forward", "net.ipv4.conf.all.forwarding", "net.ipv4.conf.default.forwarding",
	"net.ipv6.conf.all.forwarding", "net.ipv6.conf.default.forwarding",
	"net.ipv4.conf.all.route_localnet", "net.ipv4.conf.all.rp_filter",
	"net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables",
	"net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_tcp_timeout_established",
	"net.netfilter.nf_conntrack_tcp_timeout_close_wait", "net.netfilter.nf_conntrack_tcp_be_liberal",
}

// trackedDirs are fixed paths containerd 1.6, its shims, the CNI plugins
// and the kubelet use whatever their configured directories: what is added
// under them is removed, and each is removed if it did not exist.
var trackedDirs = []string{
	"/run/containerd/runc", "/run/containerd/s", "/run/containerd/fifo", "/run/containerd",
	"/run/netns", "/var/lib/cni/results", "/var/lib/cni/networks", "/var/lib/cni",
	"/var/log/containers", "/var/log/pods", "/var/lib/kubelet", "/etc/kubernetes",
	"/var/lib/containerd", "/opt/containerd", "/etc/cni/net.d", "/etc/cni",
}

// mountPrefixes are where the runtime and the kubelet mount (rootfs,
// shm, network namespaces, volumes).
var mountPrefixes = []string{stateDir, runDir, "/run/containerd", "/run/netns", "/var/lib/kubelet", "/var/lib/cni"}

var iptablesTables = []string{"filter", "nat", "mangle", "raw"}

// baseline is the machine's state before a start, in runDir (gone after a
// reboot, which resets all of it anyway).
type baseline struct {
	Sysctls  map[string]string
	Dirs     map[string][]string // nil: did not exist
	Mounts   []string
	Links    []string
	Cgroups  []string            // existing kubepods cgroups (none, normally)
	Iptables map[string][]string // "iptables/filter": its -S lines
	// NftTables are nft's tables ("table ip filter"): iptables-nft makes a
	// table the first time a rule goes in it, and an empty one is left.
	NftTables []string
}

func baselineFile() string { return filepath.Join(runDir, "baseline.json") }

// lockMachine takes the machine-wide lock, waiting while another real-node
// cluster holds it. The lock goes with the process.
func lockMachine(ctx context.Context) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(lockFile), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lockFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		if !told {
			holder, _ := os.ReadFile(lockFile)
			fmt.Fprintf(os.Stderr, "testcluster: waiting for the real-node cluster of process %s to stop (one runs per machine; lock %s)\n", strings.TrimSpace(string(holder)), lockFile)
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func readSysctl(k string) (string, bool) {
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(k, ".", "/"))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

func writeSysctl(k, v string) error {
	return os.WriteFile("/proc/sys/"+strings.ReplaceAll(k, ".", "/"), []byte(v), 0o644)
}

func listDir(d string) []string {
	entries, err := os.ReadDir(d)
	if err != nil {
		return nil
	}
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// mountPoints lists the machine's mount points (this process sees the
// host's mount namespace).
func mountPoints() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func linkNames() []string {
	var out []string
	entries, _ := os.ReadDir("/sys/class/net")
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func kubepodsCgroups() []string {
	var out []string
	ctrls, _ := os.ReadDir("/sys/fs/cgroup")
	for _, c := range ctrls {
		p := filepath.Join("/sys/fs/cgroup", c.Name(), "kubepods")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			out = append(out, p)
		}
	}
	return out
}

func iptablesRules() map[string][]string {
	out := map[string][]string{}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, t := range iptablesTables {
			b, err := exec.Command(cmd, "-w", "5", "-t", t, "-S").Output()
			if err != nil {
				continue
			}
			out[cmd+"/"+t] = strings.Split(strings.TrimSpace(string(b)), "\n")
		}
	}
	return out
}

// nftTables lists nft's tables (none when nft is not installed).
func nftTables() []string {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	var tables []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			tables = append(tables, l)
		}
	}
	sort.Strings(tables)
	return tables
}

func recordBaseline() (*baseline, error) {
	b := &baseline{Sysctls: map[string]string{}, Dirs: map[string][]string{}}
	for _, k := range tunables {
		if v, ok := readSysctl(k); ok {
			b.Sysctls[k] = v
		}
	}
	for _, d := range trackedDirs {
		if _, err := os.Stat(d); err == nil {
			b.Dirs[d] = listDir(d)
		} else {
			b.Dirs[d] = nil
		}
	}
	b.Mounts = mountPoints()
	b.Links = linkNames()
	b.Cgroups = kubepodsCgroups()
	b.Iptables = iptablesRules()
	b.NftTables = nftTables()
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp := baselineFile() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return nil, err
	}
	return b, os.Rename(tmp, baselineFile())
}

// restoreAfterCrash restores the state a cluster that did not stop left
// (its baseline is still there).
func restoreAfterCrash() error {
	data, err := os.ReadFile(baselineFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var b baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return fmt.Errorf("reading %s: %w", baselineFile(), err)
	}
	fmt.Fprintln(os.Stderr, "testcluster: a real-node cluster did not stop cleanly; restoring the machine's state it recorded")
	return restore(&b)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func under(p, prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }

// procs lists running processes with their command lines.
func procs() map[int][]string {
	out := map[int][]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		out[pid] = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	}
	return out
}

// ours reports whether a process belongs to a real-node cluster: the
// runtime, its shims, the kubelet and kube-proxy (by their state paths),
// and every process in the pods' cgroups.
func ours(pid int, args []string) bool {
	line := strings.Join(args, " ")
	if strings.Contains(line, containerdAddress) || strings.Contains(line, stateDir) || strings.Contains(line, runDir) {
		return true
	}
	cg, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	for _, l := range strings.Split(string(cg), "\n") {
		if i := strings.LastIndexByte(l, ':'); i >= 0 && strings.HasPrefix(l[i+1:], "/kubepods") {
			return true
		}
	}
	return false
}

// restore puts back what the baseline recorded: it ends the containers and
// the processes left, unmounts, removes the runtime's and kubelet's files,
// the cgroups, the iptables rules and chains, the bridge, and sets the
// sysctls back. Each step goes on after an error; the errors are returned
// together.
func restore(b *baseline) error {
	var errs []error
	// Containers through runc (it ends their processes and cgroups), then
	// every process left.
	runcRoot := "/run/containerd/runc/k8s.io"
	if out, err := exec.Command("runc", "--root", runcRoot, "list", "-q").Output(); err == nil {
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("runc", "--root", runcRoot, "delete", "--force", id).Run()
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := 0
		for pid, args := range procs() {
			if ours(pid, args) {
				left++
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("%d processes of the real node did not end", left))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Mounts, deepest first, until none of ours is left.
	for range 5 {
		var todo []string
		for _, m := range mountPoints() {
			if contains(b.Mounts, m) {
				continue
			}
			for _, p := range mountPrefixes {
				if under(m, p) {
					todo = append(todo, m)
					break
				}
			}
		}
		if len(todo) == 0 {
			break
		}
		sort.Slice(todo, func(i, j int) bool { return len(todo[i]) > len(todo[j]) })
		for _, m := range todo {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
			}
		}
	}
	// Cgroups, deepest first (their processes are gone).
	for _, root := range kubepodsCgroups() {
		if contains(b.Cgroups, root) {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	// Files: the fixed paths, then its own directories.
	for _, d := range trackedDirs {
		was, ok := b.Dirs[d]
		if !ok {
			continue
		}
		if was == nil {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		for _, n := range listDir(d) {
			if !contains(was, n) {
				if err := os.RemoveAll(filepath.Join(d, n)); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := os.RemoveAll(stateDir); err != nil {
		errs = append(errs, err)
	}
	// iptables: rules in built-in chains that were not there, then chains
	// that were not there (flushed first, then deleted: they refer to each
	// other).
	now := iptablesRules()
	for key, lines := range now {
		cmd, table, _ := strings.Cut(key, "/")
		was := b.Iptables[key]
		var chains []string
		for _, l := range lines {
			if contains(was, l) {
				continue
			}
			args := splitRule(l)
			switch {
			case len(args) > 1 && args[0] == "-A" && !(contains(lines, "-N "+args[1]) && !contains(was, "-N "+args[1])):
				// A rule in a chain that was there (a new chain is flushed).
				args[0] = "-D"
				if out, err := exec.Command(cmd, append([]string{"-w", "5", "-t", table}, args...)...).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s -t %s %s: %v: %s", cmd, table, strings.Join(args, " "), err, out))
				}
			case len(args) == 2 && args[0] == "-N":
				chains = append(chains, args[1])
			}
		}
		for _, op := range []string{"-F", "-X"} {
			for _, ch := range chains {
				if out, err := exec.Command(cmd, "-w", "5", "-t", table, op, ch).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s -t %s %s %s: %v: %s", cmd, table, op, ch, err, out))
				}
			}
		}
	}
	// nft tables that were not there: kube-proxy's own, and those
	// iptables-nft made that hold no rule now (only their policies).
	for _, tbl := range nftTables() {
		if contains(b.NftTables, tbl) {
			continue
		}
		f := strings.Fields(tbl) // table FAMILY NAME
		if len(f) != 3 {
			continue
		}
		empty := false
		if cmd := map[string]string{"ip": "iptables", "ip6": "ip6tables"}[f[1]]; cmd != "" {
			rules := iptablesRules()[cmd+"/"+f[2]]
			empty = len(rules) > 0
			for _, r := range rules {
				if !strings.HasPrefix(r, "-P ") {
					empty = false
				}
			}
		}
		if empty || f[2] == "kube-proxy" {
			if out, err := exec.Command("nft", "delete", "table", f[1], f[2]).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("nft delete %s: %v: %s", tbl, err, out))
			}
		}
	}
	// Links: the bridge (veths went with their namespaces).
	for _, l := range linkNames() {
		if !contains(b.Links, l) && (l == bridgeName || strings.HasPrefix(l, "veth")) {
			if out, err := exec.Command("ip", "link", "delete", l).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("deleting link %s: %v: %s", l, err, out))
			}
		}
	}
	for k, v := range b.Sysctls {
		if cur, ok := readSysctl(k); ok && cur != v {
			if err := writeSysctl(k, v); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s to %s: %w", k, v, err))
			}
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(runDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// splitRule splits an iptables -S line into arguments (quoted comments
// hold spaces).
func splitRule(l string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(l); i++ {
		ch := l[i]
		switch {
		case ch == '\\' && inQuote && i+1 < len(l):
			i++
			cur.WriteByte(l[i])
		case ch == '"':
			inQuote = !inQuote
			have = true
		case ch == ' ' && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// realNode is the state of the real node while it runs.
type realNodeState struct {
	lock     *os.File
	base     *baseline
	registry string // 127.0.0.1:PORT
	srv      *http.Server
	relay    net.Listener
}

// prepareReal runs before the control plane: the lock, a restore after a
// crash, the baseline, the registry (with the pause and test application
// images) and containerd's and the CNI's configuration.
func (c *cluster) prepareReal(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("--nodes real needs root (it runs containerd, the kubelet and kube-proxy, and sets up a bridge)")
	}
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "runc", "iptables", "ip6tables", "ip", "conntrack", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("--nodes real needs %s on PATH (apt-get install containerd runc containernetworking-plugins iptables conntrack nftables)", tool)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		return errors.New("--nodes real needs the CNI plugins in /usr/lib/cni (apt-get install containernetworking-plugins)")
	}
	lock, err := lockMachine(ctx)
	if err != nil {
		return err
	}
	r := &realNodeState{lock: lock}
	c.real = r
	if err := restoreAfterCrash(); err != nil {
		return fmt.Errorf("restoring the machine after a cluster that did not stop: %w", err)
	}
	if r.base, err = recordBaseline(); err != nil {
		return err
	}
	for _, d := range []string{stateDir, filepath.Join(runDir, "containerd")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}

	// The registry, on loopback, in this process.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	r.registry = l.Addr().String()
	r.srv = &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(l) }()
	if err := os.WriteFile(filepath.Join(c.dir, "registry"), []byte(r.registry+"\n"), 0o644); err != nil {
		return err
	}
	testapp := filepath.Join(c.dir, "bin", "testapp")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", testapp, "./testapp")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the test application: %v: %s", err, out)
	}
	pause, err := images.Pause(testapp)
	if err != nil {
		return err
	}
	app, err := images.TestApp(testapp)
	if err != nil {
		return err
	}
	if err := images.Push(r.registry+strings.TrimPrefix(pauseImage, "registry.local"), pause); err != nil {
		return fmt.Errorf("pushing the pause image: %w", err)
	}
	if err := images.Push(r.registry+strings.TrimPrefix(testAppImage, "registry.local"), app); err != nil {
		return fmt.Errorf("pushing the test application's image: %w", err)
	}

	// containerd: its own root, state and socket; registry.local and the
	// registry's own address pulled over plain HTTP from the registry.
	certs := filepath.Join(stateDir, "containerd", "certs.d")
	for _, host := range []string{"registry.local", r.registry} {
		hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+r.registry, "http://"+r.registry)
		if err := os.MkdirAll(filepath.Join(certs, host), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(certs, host, "hosts.toml"), []byte(hosts), 0o644); err != nil {
			return err
		}
	}
	cniConf := filepath.Join(stateDir, "cni", "net.d")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		return err
	}
	cni := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "skalitc",
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": true, "isDefaultGateway": false, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": %q,
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": %q, "gw": %q}]}
  }]
}
`, bridgeName, filepath.Join(stateDir, "cni", "ipam"), podCIDR, gatewayIP, serviceNet, gatewayIP)
	if err := os.WriteFile(filepath.Join(cniConf, "10-skalitc.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # root lacks CAP_SYS_RESOURCE here: the pause container's oom_score_adj
  # of -998 would fail every sandbox.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, filepath.Join(stateDir, "containerd", "root"), filepath.Join(runDir, "containerd", "state"), containerdAddress,
		filepath.Join(stateDir, "containerd", "opt"), pauseImage, cniConf, certs)
	confFile := filepath.Join(stateDir, "containerd", "config.toml")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		return err
	}

	// The bridge with its gateway address now, so that the relay to the
	// API server can listen there before the first pod.
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", gatewayIP + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
		// The Service range onto the bridge: the host's packets to a
		// ClusterIP kube-proxy has not programmed (yet) go nowhere instead
		// of to the machine's default route. The route goes with the link.
		{"route", "add", serviceNet, "dev", bridgeName},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := exec.Command("iptables", "-w", "5", "-I", "FORWARD", "1", "-i", bridgeName, "!", "-o", bridgeName,
		"-m", "comment", "--comment", forwardComment, "-j", "DROP").CombinedOutput(); err != nil {
		return fmt.Errorf("iptables: %v: %s", err, out)
	}
	return c.spawnPath("containerd", "containerd", "--config", confFile)
}

// startReal runs once the control plane answers: the relay, the kubelet
// and kube-proxy, and the API server's endpoint for in-cluster clients.
func (c *cluster) startReal(ctx context.Context, apiPort int, nodeToken, proxyToken string, caPEM []byte) error {
	r := c.real
	deadline := time.Now().Add(30 * time.Second)
	for {
		if conn, err := net.Dial("unix", containerdAddress); err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			return errors.New("containerd did not listen within 30 s (see logs/containerd.log)")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// In-cluster clients reach the API server through the bridge's gateway
	// address: the kubernetes Service's endpoint.
	l, err := net.Listen("tcp", net.JoinHostPort(gatewayIP, strconv.Itoa(apiPort)))
	if err != nil {
		return fmt.Errorf("the relay to the API server: %w", err)
	}
	r.relay = l
	go relay(l, fmt.Sprintf("127.0.0.1:%d", apiPort))

	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	kdir := filepath.Join(stateDir, "kubelet")
	if err := os.MkdirAll(kdir, 0o700); err != nil {
		return err
	}
	nodeKC := filepath.Join(c.dir, "pki", "kubelet.kubeconfig")
	if err := writeKubeconfig(nodeKC, server, caPEM, nodeToken); err != nil {
		return err
	}
	proxyKC := filepath.Join(c.dir, "pki", "kube-proxy.kubeconfig")
	if err := writeKubeconfig(proxyKC, server, caPEM, proxyToken); err != nil {
		return err
	}
	kubeletConf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The API server fetches logs and runs exec on loopback, as anyone: the
# kubelet listens on 127.0.0.1 only.
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
# This machine's cgroups are v1 (hybrid).
failCgroupV1: false
failSwapOn: false
podLogsDir: %s
serializeImagePulls: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
shutdownGracePeriod: 0s
# Service names resolve through the test cluster's own DNS on the bridge
# (dns.go); the machine's resolv.conf is not handed to pods.
clusterDNS: [%s]
clusterDomain: %s
resolvConf: ""
`, containerdAddress, filepath.Join(stateDir, "pod-logs"), gatewayIP, clusterDomain)
	kubeletFile := filepath.Join(kdir, "config.yaml")
	if err := os.WriteFile(kubeletFile, []byte(kubeletConf), 0o644); err != nil {
		return err
	}
	if err := c.spawn("kubelet", "--config", kubeletFile, "--kubeconfig", nodeKC, "--root-dir", kdir,
		"--hostname-override", realNode, "--node-ip", gatewayIP); err != nil {
		return err
	}
	proxyConf := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
mode: iptables
hostnameOverride: %s
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: %s
# Leave the machine's conntrack settings alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
# NodePorts on the bridge's gateway only: nothing listens toward the
# machine's network.
nodePortAddresses: [%s/32]
`, proxyKC, realNode, podCIDR, gatewayIP)
	proxyFile := filepath.Join(stateDir, "kube-proxy.yaml")
	if err := os.WriteFile(proxyFile, []byte(proxyConf), 0o644); err != nil {
		return err
	}
	if err := c.spawn("kube-proxy", "--config", proxyFile); err != nil {
		return err
	}
	slice := fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes
  namespace: default
  labels:
    kubernetes.io/service-name: kubernetes
    endpointslice.kubernetes.io/managed-by: testcluster.skali.dev
addressType: IPv4
endpoints:
- addresses: [%q]
  conditions: {ready: true}
ports:
- {name: https, port: %d, protocol: TCP}
`, gatewayIP, apiPort)
	return c.kubectlApply(ctx, slice)
}

func relay(l net.Listener, to string) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			up, err := net.DialTimeout("tcp", to, 5*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
			go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
			<-done
		}()
	}
}

// stopReal runs after every process stopped: the machine back as it was,
// then the lock released.
func (c *cluster) stopReal() {
	r := c.real
	if r == nil {
		return
	}
	if r.relay != nil {
		r.relay.Close()
	}
	if r.srv != nil {
		_ = r.srv.Close()
	}
	if r.base != nil {
		if err := restore(r.base); err != nil {
			fmt.Fprintln(os.Stderr, "testcluster: restoring the machine:", err)
		}
	}
	_ = os.Remove(filepath.Join(c.dir, "registry"))
	_ = os.Remove(filepath.Join(c.dir, "cnpg"))
	r.lock.Close()
}
