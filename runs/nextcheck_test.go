package runs_test

import (
	"testing"
	"time"

	"github.com/skali-dev/studio/events/payload"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// TestNextAutomaticCheck: a deferred domain is checked again a whole number
// of reconcile intervals after its last probe, the first such time still to
// come; a certificate in backoff at its retry; none when the reconciler is
// off or the certificate is issued.
func TestNextAutomaticCheck(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, tc := range []struct {
		name string
		c    store.Certificate
		off  bool
		want time.Time
		ok   bool
	}{
		{"probed 20 s ago", store.Certificate{State: store.CertDeferred, ProbedAt: at(-20 * time.Second)}, false, now.Add(40 * time.Second), true},
		{"probed 150 s ago", store.Certificate{State: store.CertDeferred, ProbedAt: at(-150 * time.Second)}, false, now.Add(30 * time.Second), true},
		{"probed a minute ago exactly", store.Certificate{State: store.CertDeferred, ProbedAt: at(-time.Minute)}, false, now.Add(time.Minute), true},
		{"in backoff", store.Certificate{State: store.CertFailed, ProbedAt: at(-time.Hour), NextRetryAt: at(52 * time.Minute)}, false, now.Add(52 * time.Minute), true},
		{"issued", store.Certificate{State: store.CertIssued, ProbedAt: at(-time.Second)}, false, time.Time{}, false},
		{"reconciler off", store.Certificate{State: store.CertDeferred, ProbedAt: at(-time.Second)}, true, time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &runs.Service{ReconcileInterval: time.Minute}
			if tc.off {
				s.ReconcileInterval = -1
			}
			got, ok := s.NextAutomaticCheck(tc.c, now)
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Errorf("next check = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestAStillDeferredDomainCheckedAgainSaysSo: the reconciler probes a
// deferred domain that still points elsewhere; its state does not change,
// but the environment's stream says that it was checked (the pages' "checking…"
// then counts down again), and its next automatic check moves a whole
// interval on.
func TestAStillDeferredDomainCheckedAgainSaysSo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", nobody)
	f.resolver.Set("www.wiki.test", nobody)
	f.execute(f.deploy(runs.DeployRequest{}).ID)
	f.svc.ReconcileInterval = time.Minute
	env := f.reloadEnv()
	before := env.LastEventSeq
	old := f.certificate("wiki.test")
	if old.State != store.CertDeferred {
		t.Fatalf("wiki.test is %s after the deploy, want deferred", old.State)
	}

	// The periodic reconcile, 90 s later: both domains still elsewhere.
	checkedAt := f.clock.Now().Add(90 * time.Second)
	f.clock.Set(checkedAt)
	if err := f.svc.Reconcile(f.ctx); err != nil {
		t.Fatal(err)
	}
	c := *f.certificate("wiki.test")
	if c.State != store.CertDeferred {
		t.Fatalf("wiki.test is %s after a probe that found it elsewhere, want still deferred", c.State)
	}
	if next, ok := f.svc.NextAutomaticCheck(c, checkedAt); !ok || !next.Equal(checkedAt.Add(time.Minute)) {
		t.Errorf("next automatic check %v, want a minute after the check (%v)", next, checkedAt.Add(time.Minute))
	}
	evs, err := f.db.EnvironmentEventsAfter(f.ctx, env.ID, before, 100)
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]int{}
	for _, e := range evs {
		p, err := payload.DecodeEnvironment(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if p.Type == payload.KindServiceChecked && p.Service != nil {
			checked[p.Service.Domain]++
		}
		if p.Type == payload.KindServiceState {
			t.Errorf("a probe that changed nothing appended a service.state event: %s", e.Payload)
		}
	}
	if checked["wiki.test"] != 1 || checked["www.wiki.test"] != 1 || len(checked) != 2 {
		t.Errorf("service.checked events by domain %v, want one for each domain checked again", checked)
	}
}
