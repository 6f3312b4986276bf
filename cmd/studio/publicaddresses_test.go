package main

import (
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestPublicAddressesSetting: --public-addresses (STUDIO_PUBLIC_ADDRESSES)
// takes IPv4 and IPv6 addresses, comma-separated; anything else stops the
// Studio with a sentence naming the entry.
func TestPublicAddressesSetting(t *testing.T) {
	t.Parallel()
	var cfg Config
	if err := cfg.parseFlags("serve", nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	if len(cfg.publicAddresses) != 0 {
		t.Errorf("default public addresses = %v, want none", cfg.publicAddresses)
	}
	cfg = Config{}
	if err := cfg.parseFlags("serve", []string{"--public-addresses", " 203.0.113.7, 2001:db8::7,,::ffff:198.51.100.1,203.0.113.7"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::7"), netip.MustParseAddr("198.51.100.1")}
	if !slices.Equal(cfg.publicAddresses, want) {
		t.Errorf("public addresses = %v, want %v", cfg.publicAddresses, want)
	}
	for _, bad := range []string{"edge.example.com", "203.0.113.0/24", "0.0.0.0", "fe80::1%eth0"} {
		cfg = Config{}
		err := cfg.parseFlags("serve", []string{"--public-addresses", "203.0.113.7," + bad}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--public-addresses") {
			t.Errorf("--public-addresses with %q = %v, want an error", bad, err)
		}
	}
}
