package webtest

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/web"
)

// Resolver is a DNS for tests: domain → addresses, all loopback. A domain
// pointing here resolves to 127.0.0.1 (where the test Studio listens); one
// pointing elsewhere to 127.0.0.2, where nothing listens.
type Resolver struct {
	mu    sync.Mutex
	hosts map[string][]string
}

// Set points domain at addrs.
func (r *Resolver) Set(domain string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hosts == nil {
		r.hosts = map[string][]string{}
	}
	r.hosts[domain] = addrs
}

// LookupIP implements platform.Resolver.
func (r *Resolver) LookupIP(ctx context.Context, network, host string) ([]net.IP, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	addrs := r.hosts[host]
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IP
	for _, a := range addrs {
		out = append(out, net.ParseIP(a))
	}
	return out, nil
}

// Deploys is the local platform of a test Studio, for tests to steer.
type Deploys struct {
	// Resolver is the DNS the platform uses (a fresh one when nil).
	Resolver platform.Resolver
	Faults   *local.Faults
	// StepDelay is how long each simulated step takes (none when zero).
	StepDelay time.Duration
	// LogEvery is how often a simulated container prints a line of its
	// runtime log (local.DefaultLogEvery when zero).
	LogEvery time.Duration
	// Service is set when the Studio is built.
	Service *runs.Service
	// PublicAddresses and ReconcileInterval are the Service's: what a
	// DNS-pending domain is asked to point at, and the interval its next
	// automatic check is counted in (River's reconciler stays off in tests).
	PublicAddresses   []netip.Addr
	ReconcileInterval time.Duration
	// HoldRelease and HoldRollout, when set, hold every release command
	// or rollout until the test opens them; HoldStop holds the stop of an
	// environment (a restore's) the same way.
	HoldRelease, HoldRollout, HoldStop *Gate
	// DeleteEnvironment, when set, makes the platform one that holds what
	// environments run (as Kubernetes does): deleting an environment is
	// then a delete run whose step calls it (an error fails the run).
	DeleteEnvironment func(env platform.Env) error
}

// WithDeploys gives the Studio the local platform with no step delay, its
// edge on the test server's own port, and River executing runs (started
// and stopped with the test server). It implies WithValueKeys.
func WithDeploys(d *Deploys) Option {
	return func(deps *web.Deps) {
		if deps.Vault == nil {
			WithValueKeys()(deps)
		}
		if d.Resolver == nil {
			d.Resolver = &Resolver{}
		}
		if d.Faults == nil {
			d.Faults = &local.Faults{}
		}
		u, _ := url.Parse(deps.PublicURL)
		port, _ := strconv.Atoi(u.Port())
		lp, id, err := local.New(context.Background(), deps.DB, deps.Vault, local.Options{Resolver: d.Resolver, EdgePort: port, Faults: d.Faults, StepDelay: d.StepDelay, LogEvery: d.LogEvery})
		if err != nil {
			panic("webtest: local platform: " + err.Error())
		}
		var p platform.Platform = lp
		if d.HoldRelease != nil || d.HoldRollout != nil || d.HoldStop != nil {
			p = heldPlatform{Platform: lp, d: d}
		}
		if d.DeleteEnvironment != nil {
			p = deletingPlatform{Platform: p, ValueReceiver: lp, delete: d.DeleteEnvironment}
		}
		d.Service = runs.NewService(deps.DB, deps.Vault, p, deps.DB.Now, deps.Logger)
		d.Service.PublicAddresses, d.Service.ReconcileInterval = d.PublicAddresses, d.ReconcileInterval
		deps.Runs = d.Service
		deps.Edge = id.Handler()
	}
}
