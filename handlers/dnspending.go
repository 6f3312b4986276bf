package handlers

import (
	"context"
	"encoding/json"
	"net/netip"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// dnsPendingView builds what to do about the environment's DNS-pending
// domain c: its latest recorded probe, the records to create from the
// installation's public addresses, the next automatic check, and Check now
// for deployers (returning to run runID when set).
func dnsPendingView(ctx context.Context, db *store.DB, svc *runs.Service, env *store.Environment, c store.Certificate, now time.Time,
	canCheck bool, runID int64) (*views.DNSPendingView, error) {
	var probe *runs.ProbeResult
	var at time.Time
	rec, err := db.LatestProbe(ctx, env.ID, c.Domain)
	switch {
	case err == nil:
		d := runs.DecodeCheckpointDetail(rec.Detail)
		if d.TLS != nil {
			probe = &runs.ProbeResult{Domain: d.TLS.Domain, Addresses: d.TLS.Addresses, Verdict: d.TLS.Verdict, DNSError: d.TLS.DNSError}
		} else {
			probe = d.Probe
		}
		at = rec.At
	case apperr.CodeOf(err) != apperr.NotFound:
		return nil, err
	}
	// A probe the reconciler or Check now made since (no run recorded it).
	if c.LastProbeAt != nil && c.LastProbeAt.After(at) {
		var last runs.ProbeResult
		if err := json.Unmarshal(c.LastProbe, &last); err == nil {
			probe, at = &last, *c.LastProbeAt
		}
	}
	var public []netip.Addr
	if svc != nil {
		public = svc.PublicAddresses
	}
	v := views.NewDNSPendingView(c.Domain, probe, at, public)
	v.Now = now
	if svc != nil {
		if next, ok := svc.NextAutomaticCheck(c, now); ok {
			v.NextCheck = next
		}
	}
	v.CanCheck = canCheck && svc != nil
	v.CheckURL = paths.Probe(env.Project, env.Name)
	v.RunID = runID
	return &v, nil
}

// dnsPending reports whether a certificate is waiting for its domain's DNS.
func dnsPending(c store.Certificate) bool {
	return c.State != store.CertIssued && c.State != store.CertFailed
}
