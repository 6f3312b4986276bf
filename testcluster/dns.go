package main

// Cluster DNS for a real node: Service names (NAME.NAMESPACE.svc.
// cluster.local and the shorter forms pods' search paths make of them)
// answered from the API server, on the bridge's gateway address, for the
// pods' resolvers (the kubelet's clusterDNS). Nothing else is answered and
// nothing is forwarded: a pod learns no address off the machine.

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const clusterDomain = "cluster.local"

// serveDNS answers queries on conn until ctx ends.
func (o *operators) serveDNS(ctx context.Context, conn net.PacketConn) {
	go func() { <-ctx.Done(); conn.Close() }()
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() == nil && !strings.Contains(err.Error(), "closed") {
				log.Printf("testcluster: cluster DNS: %v", err)
			}
			return
		}
		query := append([]byte(nil), buf[:n]...)
		go func() {
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if resp := o.answerDNS(qctx, query); resp != nil {
				_, _ = conn.WriteTo(resp, from)
			}
		}()
	}
}

// answerDNS builds the answer to one query: A records of a Service's
// cluster IP (or a headless Service's ready endpoints), no records for
// other types of a known name, NXDOMAIN for everything else.
func (o *operators) answerDNS(ctx context.Context, query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	resp := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired})
	resp.EnableCompression()
	ips, known := o.lookupService(ctx, q.Name.String())
	if !known {
		resp = dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true,
			RecursionDesired: h.RecursionDesired, RCode: dnsmessage.RCodeNameError})
	}
	if err := resp.StartQuestions(); err != nil {
		return nil
	}
	if err := resp.Question(q); err != nil {
		return nil
	}
	if err := resp.StartAnswers(); err != nil {
		return nil
	}
	if q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		for _, ip := range ips {
			var a [4]byte
			copy(a[:], ip.To4())
			if err := resp.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}, dnsmessage.AResource{A: a}); err != nil {
				return nil
			}
		}
	}
	out, err := resp.Finish()
	if err != nil {
		return nil
	}
	return out
}

// lookupService resolves SERVICE.NAMESPACE.svc.cluster.local. through the
// API server.
func (o *operators) lookupService(ctx context.Context, name string) ([]net.IP, bool) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	rest, ok := strings.CutSuffix(name, ".svc."+clusterDomain)
	if !ok {
		return nil, false
	}
	svc, ns, ok := strings.Cut(rest, ".")
	if !ok || svc == "" || strings.Contains(ns, ".") {
		return nil, false
	}
	got, code, err := o.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/namespaces/%s/services/%s", ns, svc), "", nil)
	if err != nil || code != http.StatusOK {
		return nil, false
	}
	if ip := net.ParseIP(text(got, "spec", "clusterIP")); ip != nil && ip.To4() != nil {
		return []net.IP{ip}, true
	}
	// Headless: the ready endpoints.
	slices, code, err := o.do(ctx, http.MethodGet, fmt.Sprintf("/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices?labelSelector=kubernetes.io/service-name=%s", ns, svc), "", nil)
	if err != nil || code != http.StatusOK {
		return nil, true
	}
	var ips []net.IP
	items, _ := slices["items"].([]any)
	for _, it := range items {
		eps, _ := field(it.(map[string]any), "endpoints").([]any)
		for _, e := range eps {
			em, _ := e.(map[string]any)
			if ready, ok := field(em, "conditions", "ready").(bool); ok && !ready {
				continue
			}
			addrs, _ := em["addresses"].([]any)
			for _, a := range addrs {
				if s, _ := a.(string); net.ParseIP(s) != nil && net.ParseIP(s).To4() != nil {
					ips = append(ips, net.ParseIP(s))
				}
			}
		}
	}
	return ips, true
}
