package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// The cluster DNS answers a Service's name (its full name and the forms a
// pod's search path makes) with its cluster IP, from the API server, and
// every other name with NXDOMAIN: nothing is forwarded.
func TestClusterDNSAnswersServicesOnly(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/namespaces/shop/services/data-rw":
			_ = json.NewEncoder(w).Encode(map[string]any{"spec": map[string]any{"clusterIP": "10.96.4.7"}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	o := &operators{server: api.URL, client: api.Client()}
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go o.serveDNS(ctx, conn)

	ask := func(name string, typ dnsmessage.Type) dnsmessage.Message {
		t.Helper()
		q := dnsmessage.Message{Header: dnsmessage.Header{ID: 7, RecursionDesired: true},
			Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}}}
		b, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("udp4", conn.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1500)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		var m dnsmessage.Message
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		if m.ID != 7 {
			t.Fatalf("answer id %d", m.ID)
		}
		return m
	}
	m := ask("data-rw.shop.svc.cluster.local.", dnsmessage.TypeA)
	if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 {
		t.Fatalf("a Service's name: %v, %d answers", m.RCode, len(m.Answers))
	}
	if a, ok := m.Answers[0].Body.(*dnsmessage.AResource); !ok || net.IP(a.A[:]).String() != "10.96.4.7" {
		t.Fatalf("a Service's address: %v", m.Answers[0].Body)
	}
	if m := ask("data-rw.shop.svc.cluster.local.", dnsmessage.TypeAAAA); m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 0 {
		t.Fatalf("AAAA of a Service: %v, %d answers; want no records", m.RCode, len(m.Answers))
	}
	for _, name := range []string{"data-rw.shop.shop.svc.cluster.local.", "nope.shop.svc.cluster.local.", "example.com.", "data-rw.shop."} {
		if m := ask(name, dnsmessage.TypeA); m.RCode != dnsmessage.RCodeNameError || len(m.Answers) != 0 {
			t.Errorf("%s: %v with %d answers, want NXDOMAIN", name, m.RCode, len(m.Answers))
		}
	}
}
