package main

import (
	"context"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/skali-dev/studio/runs"
)

// TestWebhookAllowNetworksSetting: STUDIO_WEBHOOK_ALLOW_NETWORKS (or
// --webhook-allow-networks) takes addresses and CIDR ranges, none by
// default; anything else stops the Studio with a sentence naming it.
func TestWebhookAllowNetworksSetting(t *testing.T) {
	// Serial: t.Setenv(STUDIO_WEBHOOK_ALLOW_NETWORKS), the variable under test.
	var cfg Config
	if err := cfg.parseFlags("serve", nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	if len(cfg.webhookAllow) != 0 {
		t.Errorf("default allowed webhook networks = %v, want none", cfg.webhookAllow)
	}
	t.Setenv("STUDIO_WEBHOOK_ALLOW_NETWORKS", "10.0.0.0/8, 192.168.1.7")
	cfg = Config{}
	if err := cfg.parseFlags("serve", nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32")}; !slices.Equal(cfg.webhookAllow, want) {
		t.Errorf("allowed webhook networks = %v, want %v", cfg.webhookAllow, want)
	}
	cfg = Config{}
	err := cfg.parseFlags("serve", []string{"--webhook-allow-networks", "10.0.0.0/8,intranet"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `--webhook-allow-networks: "intranet"`) {
		t.Errorf("--webhook-allow-networks with a name = %v, want an error naming it", err)
	}
}

// TestWebhookOwnAddresses: a listener on every interface is the Studio's
// own address on each of them (loopback included) at its port, and the
// database's host and port are the database's.
func TestWebhookOwnAddresses(t *testing.T) {
	t.Parallel()
	listener := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	metrics := &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 9090}
	own := webhookOwnAddresses(context.Background(), "postgres://studio@198.51.100.5:5433/studio", listener, metrics)
	has := func(addr, what string) bool {
		return slices.Contains(own, runs.OwnAddress{Addr: netip.MustParseAddrPort(addr), What: what})
	}
	if !has("127.0.0.1:8080", "the Studio's own listener") || !has("192.0.2.10:9090", "the Studio's own listener") ||
		!has("198.51.100.5:5433", "the Studio's database") {
		t.Errorf("own addresses %v, want 127.0.0.1:8080 and 192.0.2.10:9090 (listeners), 198.51.100.5:5433 (database)", own)
	}
}
