package main

import (
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestTrustedProxiesSetting: STUDIO_TRUSTED_PROXIES (or --trusted-proxies)
// takes addresses and CIDR ranges; anything else stops the Studio with a
// sentence naming the entry, and none means the header is never believed.
func TestTrustedProxiesSetting(t *testing.T) {
	// Serial: t.Setenv(STUDIO_TRUSTED_PROXIES), the variable under test.
	var cfg Config
	if err := cfg.parseFlags("serve", nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	if len(cfg.trustedProxies) != 0 {
		t.Errorf("default trusted proxies = %v, want none", cfg.trustedProxies)
	}

	t.Setenv("STUDIO_TRUSTED_PROXIES", " 10.0.0.0/8, 192.0.2.7 ,2001:db8::/32,,::ffff:172.16.0.0/108,10.1.2.3/8")
	cfg = Config{}
	if err := cfg.parseFlags("serve", nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("10.0.0.0/8"),
	}
	if !slices.Equal(cfg.trustedProxies, want) {
		t.Errorf("trusted proxies = %v, want %v", cfg.trustedProxies, want)
	}

	cfg = Config{}
	if err := cfg.parseFlags("serve", []string{"--trusted-proxies", "127.0.0.1"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}; !slices.Equal(cfg.trustedProxies, want) {
		t.Errorf("the flag gives %v, want %v over the variable", cfg.trustedProxies, want)
	}

	for _, bad := range []string{"proxy.internal", "10.0.0.0/33", "10.0.0.0-10.0.0.9"} {
		cfg = Config{}
		err := cfg.parseFlags("serve", []string{"--trusted-proxies", "10.0.0.0/8," + bad}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("--trusted-proxies with %q = %v, want an error naming it", bad, err)
		}
	}
}
