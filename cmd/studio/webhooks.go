package main

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skali-dev/studio/runs"
)

// webhookOwnAddresses are the Studio's own listeners and its database's
// addresses, which webhook deliveries never reach. A listener on every
// interface (0.0.0.0, ::) is each of the machine's addresses at its port;
// the database's host names are resolved now (a Unix socket has none).
func webhookOwnAddresses(ctx context.Context, databaseURL string, listeners ...net.Addr) []runs.OwnAddress {
	var out []runs.OwnAddress
	var local []netip.Addr
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					local = append(local, ip.Unmap())
				}
			}
		}
	}
	for _, l := range listeners {
		t, ok := l.(*net.TCPAddr)
		if !ok {
			continue
		}
		ap := t.AddrPort()
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if !ap.Addr().IsUnspecified() {
			out = append(out, runs.OwnAddress{Addr: ap, What: "the Studio's own listener"})
			continue
		}
		for _, ip := range local {
			out = append(out, runs.OwnAddress{Addr: netip.AddrPortFrom(ip, ap.Port()), What: "the Studio's own listener"})
		}
	}
	cfg, err := pgconn.ParseConfig(databaseURL)
	if err != nil {
		return out // the store opened it: it parses
	}
	hosts := []*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port}}
	hosts = append(hosts, cfg.Fallbacks...)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, h := range hosts {
		if h.Host == "" || strings.HasPrefix(h.Host, "/") {
			continue
		}
		ips := []netip.Addr{}
		if ip, err := netip.ParseAddr(h.Host); err == nil {
			ips = append(ips, ip)
		} else if found, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h.Host); err == nil {
			ips = found
		}
		for _, ip := range ips {
			if ip.Unmap().IsUnspecified() {
				for _, l := range local {
					out = append(out, runs.OwnAddress{Addr: netip.AddrPortFrom(l, h.Port), What: "the Studio's database"})
				}
				continue
			}
			out = append(out, runs.OwnAddress{Addr: netip.AddrPortFrom(ip.Unmap(), h.Port), What: "the Studio's database"})
		}
	}
	slices.SortFunc(out, func(a, b runs.OwnAddress) int { return a.Addr.Compare(b.Addr) })
	return slices.CompactFunc(out, func(a, b runs.OwnAddress) bool { return a.Addr == b.Addr })
}
