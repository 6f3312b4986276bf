package views

import (
	"net/netip"
	"time"

	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/runs"
)

// DNSPendingView says what to do about a domain that does not point at this
// installation yet: what it resolves to now, the records to create, and
// when it is checked again.
type DNSPendingView struct {
	Domain string
	// Addresses are what the domain resolved to at its latest recorded
	// probe (ProbedAt, a clock time), each with its answer; DNSError says
	// why nothing resolved.
	Addresses []AddressView
	ProbedAt  string
	DNSError  string
	// Records are the DNS records to create; NoPublicAddresses says the
	// installation's addresses are not configured (--public-addresses).
	Records           []DNSRecordView
	NoPublicAddresses bool
	// Elsewhere: some address answers as another server (its record is
	// to be removed).
	Elsewhere bool
	// NextCheck is the next automatic check, counted down from Now; zero
	// when the reconciler is off.
	NextCheck, Now time.Time
	// CheckURL is Check now's form action, shown when CanCheck; RunID,
	// when set, is the run page Check now returns to.
	CheckURL string
	CanCheck bool
	RunID    int64
}

// DNSRecordView is one record to create: "A shop.example.com → 203.0.113.7".
type DNSRecordView struct {
	Type, Name, Value string
}

// NewDNSPendingView builds what to do about domain from its latest probe
// (nil when there is none), the time of that probe and the installation's
// public addresses.
func NewDNSPendingView(domain string, probe *runs.ProbeResult, probedAt time.Time, public []netip.Addr) DNSPendingView {
	v := DNSPendingView{Domain: domain, NoPublicAddresses: len(public) == 0}
	if probe != nil {
		for _, a := range probe.Addresses {
			here := a.Answer == runs.AnsweredHere
			v.Addresses = append(v.Addresses, AddressView{Address: a.Address, Answer: a.Answer, Here: here})
			if a.Answer == runs.AnsweredOther {
				v.Elsewhere = true
			}
		}
		v.DNSError = probe.DNSError
		if !probedAt.IsZero() {
			v.ProbedAt = humanize.Clock(probedAt)
		}
	}
	for _, a := range public {
		typ := "A"
		if !a.Unmap().Is4() {
			typ = "AAAA"
		}
		v.Records = append(v.Records, DNSRecordView{Type: typ, Name: domain, Value: a.Unmap().String()})
	}
	return v
}

// DNSPendingSlotID is the id of the environment page's DNSPendingSlot of
// domain.
func DNSPendingSlotID(domain string) string { return "dns-pending-" + domain }

// DNSSlot is a domain of an environment with what to do about it while it
// is DNS pending (nil when it is not): the environment page's live parts
// refresh each.
type DNSSlot struct {
	Domain string
	DNS    *DNSPendingView
}
