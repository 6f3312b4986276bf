package runs_test

import (
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// TestNextAutomaticCheck: a deferred domain is checked again a whole number
// of reconcile intervals after its last probe, the first such time still to
// come; a certificate in backoff at its retry; none when the reconciler is
// off or the certificate is issued.
func TestNextAutomaticCheck(t *testing.T) {
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
