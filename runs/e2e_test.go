package runs_test

import (
	"net"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// dnsServer is a real DNS server on loopback answering A records from a
// table (and no AAAA records).
type dnsServer struct {
	mu  sync.Mutex
	a   map[string][]string
	srv *dns.Server
}

func startDNS(t *testing.T) (*dnsServer, string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dnsServer{a: map[string][]string{}}
	d.srv = &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(d.serve)}
	started := make(chan struct{})
	d.srv.NotifyStartedFunc = func() { close(started) }
	go d.srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { d.srv.Shutdown() })
	return d, pc.LocalAddr().String()
}

func (d *dnsServer) set(name string, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.a[dns.Fqdn(name)] = addrs
}

func (d *dnsServer) serve(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	d.mu.Lock()
	addrs, ok := d.a[r.Question[0].Name]
	d.mu.Unlock()
	if !ok {
		m.Rcode = dns.RcodeNameError
	} else if r.Question[0].Qtype == dns.TypeA {
		for _, a := range addrs {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0}, A: net.ParseIP(a)})
		}
	}
	w.WriteMsg(m)
}

// TestEndToEndWithARealDNSServer resolves through a DNS server on loopback
// (the --dns-server path) and probes the real edge: elsewhere, then here.
func TestEndToEndWithARealDNSServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	d, addr := startDNS(t)
	f.local.Prober.Resolver = platform.NewResolver(addr)
	d.set("wiki.test", nobody)
	d.set("www.wiki.test", otherEdge)

	run := f.deploy(runs.DeployRequest{})
	f.execute(run.ID)
	if got := f.run(run.ID); got.Status != store.RunSucceededWithWarnings {
		t.Fatalf("run %s %s", got.Status, got.Reason)
	}
	_, det := f.checkpoint(run.ID, runs.KindIssueTLS)
	if det.TLS.Verdict != runs.PointsElsewhere || det.TLS.Addresses[0].Answer != runs.NoAnswerRefused {
		t.Fatalf("TLS detail %+v", det.TLS)
	}
	d.set("wiki.test", here)
	d.set("www.wiki.test", here)
	if err := f.svc.Reconcile(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ExecuteUnfinished(f.ctx); err != nil {
		t.Fatal(err)
	}
	for _, domain := range []string{"wiki.test", "www.wiki.test"} {
		if c := f.certificate(domain); c.State != store.CertIssued {
			t.Fatalf("%s: %s %s", domain, c.State, c.Reason)
		}
	}
}
