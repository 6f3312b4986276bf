package runs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// webhookResponseHeaderLimit bounds the headers of an answer: a receiver
// cannot make the Studio hold (or store) more.
const webhookResponseHeaderLimit = 16 << 10

// OwnAddress is an address of the Studio itself (a listener, its database)
// that a webhook delivery never reaches, whatever AllowNetworks says.
type OwnAddress struct {
	Addr netip.AddrPort
	// What names it in the refusal: "the Studio's own listener".
	What string
}

// refusedRange is a range deliveries are not sent to unless AllowNetworks
// opens it, with the words a refusal uses for it.
type refusedRange struct {
	prefix netip.Prefix
	what   string
}

// refusedRanges are the ranges a delivery refuses by default: whatever is
// not on the public internet. The first that holds an address names it.
var refusedRanges = func() []refusedRange {
	var out []refusedRange
	for _, r := range []struct{ cidr, what string }{
		{"0.0.0.0/8", "an unspecified address"}, // Linux connects 0.0.0.0 to the host itself
		{"::/128", "an unspecified address"},
		{"127.0.0.0/8", "a loopback address"},
		{"::1/128", "a loopback address"},
		{"169.254.0.0/16", "a link-local address"},
		{"fe80::/10", "a link-local address"},
		{"224.0.0.0/4", "a multicast address"},
		{"ff00::/8", "a multicast address"},
		{"10.0.0.0/8", "a private address"},
		{"172.16.0.0/12", "a private address"},
		{"192.168.0.0/16", "a private address"},
		{"fc00::/7", "a private address"},
		{"100.64.0.0/10", "a shared (carrier-grade NAT) address"},
		{"192.0.0.0/24", "a reserved address"},
		{"198.18.0.0/15", "a reserved address"},
		{"240.0.0.0/4", "a reserved address"}, // and 255.255.255.255
		{"::/96", "a reserved address"},       // IPv4-compatible, deprecated
		{"64:ff9b:1::/48", "a private address"},
	} {
		out = append(out, refusedRange{netip.MustParsePrefix(r.cidr), r.what})
	}
	return out
}()

// nat64 is the well-known NAT64 prefix: its addresses reach the IPv4
// address in their last 32 bits, which is checked instead.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// WebhookRefusal is why a delivery was not sent: the address it would have
// connected to is one webhooks do not reach.
type WebhookRefusal struct {
	Addr netip.Addr
	// What the address is: "a loopback address".
	What string
	// Own: the Studio's own listener or database, which no setting opens.
	Own bool
}

// Error is the sentence the webhooks page shows.
func (r *WebhookRefusal) Error() string {
	if r.Own {
		return fmt.Sprintf("refused: %s is %s, which webhooks never reach", r.Addr, r.What)
	}
	return fmt.Sprintf("refused: %s is %s; allow it with --webhook-allow-networks", r.Addr, r.What)
}

// refuse returns why a delivery may not connect to ap, or nil.
func (o *WebhookOptions) refuse(ap netip.AddrPort) *WebhookRefusal {
	a := ap.Addr().WithZone("").Unmap()
	for _, own := range o.Own {
		oa := own.Addr.Addr().WithZone("").Unmap()
		if oa == a && (own.Addr.Port() == 0 || own.Addr.Port() == ap.Port()) {
			return &WebhookRefusal{Addr: a, What: own.What, Own: true}
		}
	}
	for _, p := range o.AllowNetworks {
		if p.Contains(a) {
			return nil
		}
	}
	check := a
	if nat64.Contains(a) {
		b := a.As16()
		check = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	for _, r := range refusedRanges {
		if r.prefix.Contains(check) {
			return &WebhookRefusal{Addr: a, What: r.what}
		}
	}
	return nil
}

// control is the dialer's check of the address it is about to connect to:
// after the name was resolved, so a name that resolves (or re-resolves)
// to a refused address is refused too, before any packet is sent.
func (o *WebhookOptions) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refused: %q is not an address and port", address)
	}
	if r := o.refuse(ap); r != nil {
		return r
	}
	return nil
}

// transport is the deliveries' own: every connection checked by control,
// no proxy (a proxy would connect on the delivery's behalf, past the
// check), answers' headers bounded.
func (o *WebhookOptions) transport() *http.Transport {
	dialer := &net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second, Control: o.control}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    o.Timeout,
		ExpectContinueTimeout:  time.Second,
		ResponseHeaderTimeout:  o.Timeout,
		MaxResponseHeaderBytes: webhookResponseHeaderLimit,
	}
}

// asRefusal finds the refusal in a failed request's error.
func asRefusal(err error) *WebhookRefusal {
	var r *WebhookRefusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}

// WebhookURLRefusal says why a delivery to rawURL would be refused, when
// its host is an address webhooks do not reach, so that adding such an
// endpoint is refused at once; nil for a name (checked when a delivery
// connects, on the addresses it resolves to), an address they reach, or a
// Studio that sends no webhooks (no River).
func (s *Service) WebhookURLRefusal(rawURL string) *WebhookRefusal {
	if s.webhooks == nil {
		return nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	a, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil
	}
	port := uint16(80)
	if u.Scheme == "https" {
		port = 443
	}
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		port = uint16(p)
	}
	return s.webhooks.refuse(netip.AddrPortFrom(a, port))
}
