package main

import (
	"context"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/store"
)

// loopbackDNS is a DNS server on loopback that answers every name with
// 127.0.0.1 (and no AAAA record): every route's domain points at the
// Studio under test.
func loopbackDNS(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, q := range r.Question {
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.IPv4(127, 0, 0, 1)})
			}
		}
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

const certWaitManifest = `name: certwait
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: certwait.test
        port: http
        tls: automatic
    deployment:
      rollout:
        timeout: 2m
`

// TestKubernetesSIGTERMDuringACertificateWaitExitsAtOnceAndTheNextProcessResumes
// runs `studio serve --platform kubernetes --cluster-issuer` against the
// test cluster (which runs no cert-manager: the test plays it), starts a
// deploy whose route points at the Studio, and sends SIGTERM while the
// Issue TLS step waits for cert-manager: the process exits within seconds,
// not at the end of its 2 min shutdown timeout (the wait is given back,
// nothing of it recorded), and the next process takes the step up again
// and finishes the deploy once the Certificate is Ready, with no step
// started twice.
func TestKubernetesSIGTERMDuringACertificateWaitExitsAtOnceAndTheNextProcessResumes(t *testing.T) {
	t.Parallel()
	cluster := kubeCluster(t)
	db, dbURL, key := newKubeProject(t, certWaitManifest, nil)
	const ns = "certwait-production"
	t.Cleanup(func() { kubectl(t, cluster, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false") })
	port := strconv.Itoa(freePort(t))
	// The edge port is the Studio's own: the probe finds the domain
	// answering as this installation.
	flags := []string{"--platform", "kubernetes", "--kubeconfig", cluster.Kubeconfig, "--gateway", "infra/edge", "--cluster-issuer", "test-issuer",
		"--addr", "127.0.0.1:" + port, "--edge-port", port, "--dns-server", loopbackDNS(t), "--shutdown-timeout", "2m"}
	first := startStudio(t, dbURL, key, flags...)
	runID := deployNewest(t, first, signedIn(t, first), db, "certwait")
	name := kubernetes.CertificateName("certwait.test")
	waitFor(t, func() bool {
		if status, reason := runOutcome(t, db, runID); store.RunFinished(status) {
			t.Fatalf("the run ended (%s: %s) before its certificate wait", status, reason)
		}
		return checkpointStatus(db, runID, "issue-tls") == store.CheckpointRunning &&
			kubeObject(t, cluster, "-n", ns, "certificates.cert-manager.io", name) != nil
	})

	sent := time.Now()
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := first.cmd.Wait(); err != nil {
		t.Fatalf("the Studio did not stop cleanly: %v", err)
	}
	took := time.Since(sent)
	t.Logf("the Studio exited %s after SIGTERM", took.Round(time.Millisecond))
	// A wait that yields ends in seconds; one that held the process would
	// end at the shutdown timeout, two minutes.
	if took > time.Minute {
		t.Errorf("the Studio took %s to exit on SIGTERM during a certificate wait; want a few seconds (the wait yields, its shutdown timeout is 2 min)", took.Round(time.Second))
	}
	if s := checkpointStatus(db, runID, "issue-tls"); s != store.CheckpointRunning {
		t.Errorf("after SIGTERM the Issue TLS checkpoint is %s; want it left running for the next process", s)
	}
	if status, reason := runOutcome(t, db, runID); store.RunFinished(status) {
		t.Fatalf("SIGTERM ended the run: %s: %s", status, reason)
	}
	if pid := executorPID(db, runID); pid != 0 {
		t.Fatalf("the stopped process kept the run's lease (process %d)", pid)
	}

	second := startStudio(t, dbURL, key, flags...)
	waitFor(t, func() bool { return executorPID(db, runID) == second.cmd.Process.Pid })
	// cert-manager issues: the Certificate turns Ready.
	now := time.Now().UTC()
	kubectl(t, cluster, "", "-n", ns, "patch", "certificates.cert-manager.io", name, "--subresource=status", "--type=merge", "-p",
		`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Ready","message":"Certificate is up to date and has not expired","lastTransitionTime":"`+now.Format(time.RFC3339)+`"}],`+
			`"notBefore":"`+now.Format(time.RFC3339)+`","notAfter":"`+now.Add(90*24*time.Hour).Format(time.RFC3339)+`"}}`)
	waitForRunEnd(t, db, runID)
	checkRunSucceededOnce(t, db, runID)
	var state string
	db.Pool.QueryRow(context.Background(), `SELECT state FROM certificates WHERE domain = 'certwait.test'`).Scan(&state)
	if state != store.CertIssued {
		t.Errorf("the certificate of certwait.test is %q after the resumed deploy, want issued", state)
	}
}
