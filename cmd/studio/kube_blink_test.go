package main

import (
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/skali-dev/studio/store"
)

// tcpGate forwards a loopback port to the API server, and can be closed
// (the port refuses connections, those open are cut) and opened again on
// the same port: to the Studio, an API server that stops and comes back.
type tcpGate struct {
	t      *testing.T
	addr   string // the gate's own host:port
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newTCPGate(t *testing.T, target string) *tcpGate {
	g := &tcpGate{t: t, target: target, addr: "127.0.0.1:0", conns: map[net.Conn]bool{}}
	g.open()
	t.Cleanup(g.close)
	return g
}

func (g *tcpGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		g.t.Fatalf("open the gate at %s: %v", g.addr, err)
	}
	g.ln, g.addr = ln, ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", g.target)
			if err != nil {
				c.Close()
				continue
			}
			g.mu.Lock()
			g.conns[c], g.conns[up] = true, true
			g.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// close refuses new connections and cuts those open.
func (g *tcpGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		g.ln.Close()
		g.ln = nil
	}
	for c := range g.conns {
		c.Close()
	}
	clear(g.conns)
}

var kubeServerLine = regexp.MustCompile(`(?m)^(\s*server:\s*)(\S+)\s*$`)

// gatedKubeconfig writes a copy of kubeconfig whose server is a gate in
// front of its API server, and returns its path, the gate and the URL the
// Studio sees.
func gatedKubeconfig(t *testing.T, kubeconfig string) (string, *tcpGate, string) {
	t.Helper()
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	m := kubeServerLine.FindSubmatch(data)
	if m == nil {
		t.Fatalf("no server in %s", kubeconfig)
	}
	u, err := url.Parse(string(m[2]))
	if err != nil {
		t.Fatal(err)
	}
	gate := newTCPGate(t, u.Host)
	u.Host = gate.addr
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeServerLine.ReplaceAll(data, []byte("${1}"+u.String())), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, gate, u.String()
}

// checkpointWarning is the warning a checkpoint of the run shows now.
func checkpointWarning(db *store.DB, runID int64, kind string) string {
	var w string
	db.Pool.QueryRow(context.Background(), `SELECT warning FROM run_checkpoints WHERE run_id = $1 AND kind = $2`, runID, kind).Scan(&w)
	return w
}

// runLog is the run's log lines of a checkpoint kind, one text.
func runLog(db *store.DB, runID int64, kind string) string {
	rows, err := db.Pool.Query(context.Background(), `SELECT l.text FROM run_log_lines l JOIN run_checkpoints c ON c.run_id = l.run_id AND c.position = l.position
		WHERE l.run_id = $1 AND c.kind = $2 ORDER BY l.n`, runID, kind)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var s string
		rows.Scan(&s)
		b.WriteString(s + "\n")
	}
	return b.String()
}

// blinkManifest is one application whose pods run but do not become
// ready by themselves (the test cluster's "never" image tag): its rollout
// lasts until the test makes them ready.
const blinkManifest = `name: blink
applications:
  web:
    image: registry.local/web:never-1
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
        timeout: 5m
`

// TestKubernetesAPIServerThatBlinksIsWaitedForAndSaid runs `studio serve
// --platform kubernetes` through a gate in front of the test cluster's API
// server and closes the gate (connections refused, those open cut) twice:
// before a deploy, which then waits at its first step instead of failing,
// its checkpoint saying "Waiting for the Kubernetes API server at … since
// …: connection refused" live; and during the deploy's rollout, which
// says so too. Each time the gate opens again, the step's log says the API
// server answers again, the note goes, and the deploy succeeds without a
// warning.
func TestKubernetesAPIServerThatBlinksIsWaitedForAndSaid(t *testing.T) {
	t.Parallel()
	cluster := kubeCluster(t)
	db, dbURL, key := newKubeProject(t, blinkManifest, nil)
	const ns = "blink-production"
	t.Cleanup(func() { kubectl(t, cluster, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false") })
	kc, gate, server := gatedKubeconfig(t, cluster.Kubeconfig)
	s := startStudio(t, dbURL, key, "--platform", "kubernetes", "--kubeconfig", kc)
	c := signedIn(t, s)

	// Down before the deploy.
	gate.close()
	runID := deployNewest(t, s, c, db, "blink")
	want := "Waiting for the Kubernetes API server at " + server + " since "
	waitFor(t, func() bool {
		if status, reason := runOutcome(t, db, runID); store.RunFinished(status) {
			t.Fatalf("the deploy ended (%s: %s) while the API server was down", status, reason)
		}
		return strings.HasPrefix(checkpointWarning(db, runID, "check-values"), want)
	})
	if w := checkpointWarning(db, runID, "check-values"); !strings.HasSuffix(w, ": connection refused.") {
		t.Errorf("the waiting checkpoint says %q; want the cause, connection refused", w)
	}
	gate.open()

	// Down during the rollout.
	waitFor(t, func() bool {
		if status, reason := runOutcome(t, db, runID); store.RunFinished(status) {
			t.Fatalf("the deploy ended (%s: %s) before its rollout", status, reason)
		}
		return checkpointStatus(db, runID, "rollout") == store.CheckpointRunning && kubeObject(t, cluster, "-n", ns, "deployment", "web") != nil
	})
	gate.close()
	waitFor(t, func() bool {
		if status, reason := runOutcome(t, db, runID); store.RunFinished(status) {
			t.Fatalf("the deploy ended (%s: %s) while the API server was down during its rollout", status, reason)
		}
		return strings.HasPrefix(checkpointWarning(db, runID, "rollout"), want)
	})
	gate.open()
	// The pods become ready now (the test plays the kubelet): the rollout
	// was in its middle for as long as the test needed, however slow the
	// machine.
	for _, pod := range kubeItems(t, cluster, "-n", ns, "pods") {
		kubectl(t, cluster, "", "-n", ns, "patch", "pod", field(pod, "metadata", "name"), "--subresource=status", "--type=merge", "-p",
			`{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"ContainersReady","status":"True"}]}}`)
	}

	waitForRunEnd(t, db, runID)
	if status, reason := runOutcome(t, db, runID); status != store.RunSucceeded {
		t.Fatalf("after the API server came back the deploy is %s: %s\ncheck values log:\n%s\nrollout log:\n%s", status, reason,
			runLog(db, runID, "check-values"), runLog(db, runID, "rollout"))
	}
	for _, kind := range []string{"check-values", "rollout"} {
		if w := checkpointWarning(db, runID, kind); w != "" {
			t.Errorf("the %s checkpoint still warns %q after the API server came back", kind, w)
		}
		log := runLog(db, runID, kind)
		if !strings.Contains(log, want) || !strings.Contains(log, "The Kubernetes API server at "+server+" answers again at ") {
			t.Errorf("the %s step's log does not say it waited for the API server and when it was back:\n%s", kind, log)
		}
	}
}
