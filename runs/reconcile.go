package runs

import (
	"context"
	"fmt"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/store"
)

// Reconcile re-probes every deferred domain, and every failed one whose
// retry is due. A domain that arrived is recorded as a reconcile run and
// its issuance requested at once as a second reconcile run, which records
// the outcome.
func (s *Service) Reconcile(ctx context.Context) error {
	certs, err := s.DB.UnissuedCertificates(ctx)
	if err != nil {
		return err
	}
	for _, c := range certs {
		now := s.Now()
		if c.State == store.CertFailed {
			if c.NextRetryAt != nil && c.NextRetryAt.After(now) {
				continue
			}
			if c.RateLimitedUntil != nil && c.RateLimitedUntil.After(now) {
				continue
			}
		}
		busy, err := s.DB.UnfinishedReconcile(ctx, c.EnvironmentID, c.Domain)
		if err != nil {
			return err
		}
		if !busy && c.State == store.CertFailed {
			// A deploy waiting on this certificate retries it itself.
			if busy, err = s.DB.HasUnfinishedDeploy(ctx, c.EnvironmentID); err != nil {
				return err
			}
		}
		if busy {
			continue
		}
		probe := s.Platform.Probe(ctx, c.Domain)
		if probe.Verdict != PointsHere {
			continue
		}
		env, err := s.DB.EnvironmentByID(ctx, c.EnvironmentID)
		if err != nil {
			return err
		}
		if _, err := s.arrive(ctx, store.Actor{}, env, c, probe, false); err != nil {
			return err
		}
	}
	return nil
}

// arrive records a domain that answers here and requests its issuance:
// for a deferred domain an arrival run and an issuance run, for a failed
// one the issuance run only. It returns the issuance run.
func (s *Service) arrive(ctx context.Context, a store.Actor, env *store.Environment, c store.Certificate, probe ProbeResult, force bool) (*store.Run, error) {
	if c.State == store.CertDeferred {
		_, err := s.DB.CreateRun(ctx, a, env, store.NewRun{
			EnvironmentID: env.ID, Kind: "reconcile",
			Checkpoints: []store.NewCheckpoint{{Kind: KindProbe, Name: "Domain arrived · " + c.Domain, Detail: CheckpointDetail{Probe: &probe}}},
			Detail:      RunDetail{Domain: c.Domain + " (arrival)"},
			Enqueue:     s.enqueue(),
		})
		if err != nil {
			return nil, err
		}
	}
	return s.DB.CreateRun(ctx, a, env, store.NewRun{
		EnvironmentID: env.ID, Kind: "reconcile",
		Checkpoints: []store.NewCheckpoint{{Kind: KindIssueTLS, Name: "Issue TLS certificate · " + c.Route, Detail: CheckpointDetail{
			TLS: &TLSDetail{Route: c.Route, Expression: c.Domain, Domain: c.Domain, Policy: "automatic"}}}},
		Detail:  RunDetail{Domain: c.Domain, Force: force},
		Enqueue: s.enqueue(),
	})
}

// CheckResult is what Check now found for one domain.
type CheckResult struct {
	Domain  string
	Verdict string
	// Run is the issuance run requested for a domain that answers here.
	Run *store.Run
}

// CheckNow probes the environment's deferred and failed domains (or only
// domain) at once, address by address. A domain that answers here counts
// as arrived, and its issuance is requested at once, also for a
// certificate in backoff (a CA's rate limit still holds).
func (s *Service) CheckNow(ctx context.Context, a store.Actor, env *store.Environment, domain string) ([]CheckResult, error) {
	certs, err := s.DB.Certificates(ctx, env.ID)
	if err != nil {
		return nil, err
	}
	var todo []store.Certificate
	for _, c := range certs {
		if c.State != store.CertIssued && (domain == "" || c.Domain == domain) {
			todo = append(todo, c)
		}
	}
	if domain != "" && len(todo) == 0 {
		return nil, apperr.Errorf(apperr.Invalid, "%s is not a deferred or failed domain of %s.", domain, env.Name)
	}
	var names []string
	for _, c := range todo {
		names = append(names, c.Domain)
	}
	if err := s.DB.AuditCheckNow(ctx, a, env, names); err != nil {
		return nil, err
	}
	var out []CheckResult
	for _, c := range todo {
		probe := s.Platform.Probe(ctx, c.Domain)
		res := CheckResult{Domain: c.Domain, Verdict: probe.Verdict}
		if probe.Verdict == PointsHere {
			busy, err := s.DB.UnfinishedReconcile(ctx, env.ID, c.Domain)
			if err != nil {
				return nil, err
			}
			if !busy {
				if res.Run, err = s.arrive(ctx, a, env, c, probe, true); err != nil {
					return nil, fmt.Errorf("runs: check now: %w", err)
				}
			}
		}
		out = append(out, res)
	}
	// Waiting deploys look again now rather than at their next retry.
	runs, err := s.DB.Runs(ctx, env.ID, 20)
	if err != nil {
		return nil, err
	}
	for i := range runs {
		if runs[i].Status == store.RunWaiting {
			s.wake(ctx, &runs[i])
		}
	}
	return out, nil
}

// ExecuteUnfinished executes every unfinished run once, oldest first, and
// returns where each was left. Tests use it without River.
func (s *Service) ExecuteUnfinished(ctx context.Context) (map[int64]Result, error) {
	ids, err := s.DB.UnfinishedRuns(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int64]Result{}
	for _, id := range ids {
		res, err := s.Runner.Execute(ctx, id)
		if err != nil {
			return out, err
		}
		out[id] = res
	}
	return out, nil
}
