package web

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/skali-dev/studio/handlers"
)

// clientAddress puts the address each request came from in its context
// (handlers.ClientAddr), for the sign-in limits and their audit records:
// the peer of the connection, unless the peer is one of the trusted
// proxies, in which case it is the right-most address of X-Forwarded-For
// that is not itself a trusted proxy. Each proxy appends the address it
// was reached from, so the entries left of that one were written by the
// client and prove nothing. Without trusted proxies the header is ignored.
func clientAddress(trusted []netip.Prefix) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, err := net.SplitHostPort(r.RemoteAddr)
			if err != nil {
				host = r.RemoteAddr
			}
			peer, err := netip.ParseAddr(host)
			if err != nil {
				next.ServeHTTP(w, r)
				return
			}
			addr := forwardedClient(peer.Unmap(), r.Header.Values("X-Forwarded-For"), trusted)
			next.ServeHTTP(w, r.WithContext(handlers.WithClientAddr(r.Context(), addr.String())))
		})
	}
}

// forwardedClient walks X-Forwarded-For from the right, starting at peer,
// while the hop it stands on is a trusted proxy. It stops at the first
// untrusted address, and at an entry that is not an address at all (then
// the client is the trusted hop that wrote it, the last one it can tell).
func forwardedClient(peer netip.Addr, header []string, trusted []netip.Prefix) netip.Addr {
	client := peer
	if !isTrusted(client, trusted) {
		return client
	}
	entries := strings.Split(strings.Join(header, ","), ",")
	for i := len(entries) - 1; i >= 0; i-- {
		e := strings.TrimSpace(entries[i])
		if e == "" {
			continue
		}
		a, ok := parseForwarded(e)
		if !ok {
			return client
		}
		client = a
		if !isTrusted(client, trusted) {
			return client
		}
	}
	return client
}

// parseForwarded reads one X-Forwarded-For entry: an address, possibly with
// a port ("203.0.113.7:5100", "[2001:db8::1]:443").
func parseForwarded(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
