package runs

import (
	"context"
	"errors"
	"fmt"
	"github.com/skali-dev/studio/humanize"
	"strings"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// issueTLS is an Issue TLS certificate checkpoint, as the reference's
// "Ports and routes" section specifies: a domain not pointing here is
// deferred (the run stays green); one that does is issued, or fails with
// cert-manager's backoff, waiting in the database for a retry that falls
// before the rollout deadline and failing for one that falls after it.
func (r *Runner) issueTLS(ctx context.Context, rc *runContext, cp store.Checkpoint, d CheckpointDetail) (stepResult, error) {
	td := d.TLS
	if td == nil {
		return stepResult{status: store.CheckpointFailed, detail: d, reason: "the checkpoint names no domain"}, nil
	}
	// Neither the probe nor the platform acts for a hostname the
	// environment does not hold.
	if why, err := r.holdsHostnames(ctx, rc, []string{td.Domain}); err != nil {
		return stepResult{}, err
	} else if why != "" {
		d.Error = why
		return stepResult{status: store.CheckpointFailed, detail: d, reason: why}, nil
	}
	now := r.Now()
	if rc.run.Kind == store.RunDeploy {
		if rc.det.Deadline == nil {
			dl := now.Add(rolloutTimeout(rc))
			rc.det.Deadline = &dl
			rc.detDirty = true
		}
		td.Deadline = rc.det.Deadline
	}
	deadline := td.Deadline
	cert, err := r.DB.CertificateFor(ctx, rc.env.ID, td.Domain)
	if err != nil && apperr.CodeOf(err) != apperr.NotFound {
		return stepResult{}, err
	}
	if cert == nil {
		cert = &store.Certificate{Domain: td.Domain, Route: td.Route, State: store.CertDeferred}
	}
	cert.Route = td.Route
	done := func(status, warning string) stepResult {
		return stepResult{status: status, warning: warning, detail: d, cert: cert}
	}
	copyCert := func() {
		td.Attempt, td.Failures, td.LastFailureAt, td.LastFailure = cert.Attempts, cert.Failures, cert.LastFailureAt, cert.Reason
		td.NextRetryAt, td.RateLimitedUntil = cert.NextRetryAt, cert.RateLimitedUntil
		if cert.Serial != "" {
			td.Serial, td.NotBefore, td.NotAfter = cert.Serial, cert.NotBefore, cert.NotAfter
		}
	}
	if cert.State == store.CertIssued && cert.Usable(now) {
		td.State = "issued"
		copyCert()
		td.Note = "the certificate on hand is valid"
		return stepResult{status: store.CheckpointSucceeded, detail: d}, nil
	}

	// Where does the domain point? (A waiting checkpoint re-probes too: DNS
	// may have moved away meanwhile.)
	probe := r.Platform.Probe(ctx, td.Domain)
	td.Verdict, td.Addresses, td.DNSError = probe.Verdict, probe.Addresses, probe.DNSError
	probeLines(rc.output(), probe)
	t := now
	cert.ProbedAt = &t
	if probe.Verdict != PointsHere {
		old, err := r.DB.IssuedForRoute(ctx, rc.env.ID, td.Route, td.Domain)
		if err != nil {
			return stepResult{}, err
		}
		if old != nil {
			td.IssuedFor = old.Domain
		}
		td.State = "deferred"
		if cert.State != store.CertFailed || cert.Usable(now) {
			cert.State = store.CertDeferred
		}
		copyCert()
		td.Attempts = append(td.Attempts, TLSAttempt{Number: cert.Attempts, At: now, Outcome: "deferred",
			Reason: fmt.Sprintf("%s is not pointing here yet (%s)", td.Domain, verdictText(probe))})
		td.Deferred = true
		res := done(store.CheckpointSkipped, fmt.Sprintf(legacyDeferredWarning+": %s is not pointing here yet", td.Domain))
		res.service = "DNS pending"
		if cert.State == store.CertFailed && cert.NextRetryAt != nil {
			res.service = RetryText(*cert.NextRetryAt)
		}
		return res, nil
	}

	// The domain points here. A certificate in backoff waits, unless this
	// deploy may bypass the backoff once or Check now forces a retry; a CA
	// rate limit's window is honoured whatever asked.
	if cert.State == store.CertFailed {
		var wait *time.Time
		switch {
		case cert.RateLimitedUntil != nil && cert.RateLimitedUntil.After(now):
			wait = cert.RateLimitedUntil
			td.Note = "the CA's rate limit holds until its retry window ends"
		case cert.NextRetryAt != nil && cert.NextRetryAt.After(now):
			switch {
			case rc.det.Force:
				td.Note = "Check now retried the certificate at once; CA rate limits still apply"
			case rc.run.Kind == store.RunDeploy && !cert.Usable(now) && cert.BypassedFailures != cert.Failures && cp.Status != store.CheckpointWaiting:
				cert.BypassedFailures = cert.Failures
				td.Note = "redeploying requested a fresh issuance once for this failure (no usable certificate)"
			default:
				wait = cert.NextRetryAt
			}
		}
		if wait != nil {
			copyCert()
			td.State = "waiting"
			if deadline != nil && !wait.Before(*deadline) {
				if !now.Before(*deadline) {
					td.State = "failed"
					return r.tlsFailed(d, cert, fmt.Sprintf("Issue TLS certificate for %s failed at the rollout deadline: %s", td.Domain, cert.Reason)), nil
				}
				wait = deadline
			}
			if deadline == nil {
				// A reconcile run records the outcome; the next due retry is
				// the reconciler's.
				td.State = "failed"
				res := done(store.CheckpointSkipped, fmt.Sprintf("certificate for %s in backoff until %s", td.Domain, humanize.HourMinute(*wait)))
				return res, nil
			}
			res := done(store.CheckpointWaiting, "")
			res.until = *wait
			return res, nil
		}
	}

	// Issue.
	cert.Attempts++
	td.State = "issuing"
	issued, is, err := r.Platform.Issue(ctx, platformEnv(rc.env), td.Domain, now, rc.output())
	td.Issuance = &is
	if err == nil {
		cert.State, cert.Reason, cert.NextRetryAt, cert.RateLimitedUntil, cert.Failures = store.CertIssued, "", nil, nil, 0
		nb, na := issued.NotBefore, issued.NotAfter
		cert.Serial, cert.NotBefore, cert.NotAfter, cert.CertificatePEM = issued.Serial, &nb, &na, issued.PEM
		copyCert()
		td.State = "issued"
		td.Attempts = append(td.Attempts, TLSAttempt{Number: cert.Attempts, At: now, Outcome: "issued"})
		res := done(store.CheckpointSucceeded, "")
		if td.Note != "" && rc.det.Force {
			res.warning = "Check now retried a certificate in backoff; CA rate limits still apply"
		}
		res.service = "issued"
		if rc.run.Kind == store.RunReconcile {
			// A first deployment whose run failed on this certificate keeps
			// converging: the late issuance activates it.
			conv, err := r.DB.ConvergingRevision(ctx, rc.env.ID)
			if err != nil {
				return stepResult{}, err
			}
			res.activate = conv
		}
		return res, nil
	}
	if ctx.Err() != nil {
		return stepResult{}, ctx.Err()
	}
	reason := err.Error()
	var ie *platform.IssueError
	if errors.As(err, &ie) {
		reason = ie.Reason
	}
	cert.Failures++
	cert.State, cert.Reason = store.CertFailed, reason
	failedAt := now
	cert.LastFailureAt = &failedAt
	next := now.Add(Backoff(cert.Failures))
	if ie != nil && ie.RetryAfter != nil {
		cert.RateLimitedUntil = ie.RetryAfter
		if ie.RetryAfter.After(next) {
			next = *ie.RetryAfter
		}
	}
	cert.NextRetryAt = &next
	copyCert()
	td.Attempts = append(td.Attempts, TLSAttempt{Number: cert.Attempts, At: now, Outcome: "failed", Reason: reason, NextRetryAt: &next})
	if deadline == nil || !next.Before(*deadline) {
		td.State = "failed"
		return r.tlsFailed(d, cert, fmt.Sprintf("Issue TLS certificate for %s failed: %s", td.Domain, reason)), nil
	}
	td.State = "waiting"
	res := done(store.CheckpointWaiting, "")
	res.until = next
	res.service = RetryText(next)
	return res, nil
}

func (r *Runner) tlsFailed(d CheckpointDetail, cert *store.Certificate, reason string) stepResult {
	d.Error = reason
	res := stepResult{status: store.CheckpointFailed, detail: d, reason: reason, cert: cert, converge: true}
	if cert.NextRetryAt != nil {
		res.service = RetryText(*cert.NextRetryAt)
	}
	return res
}

func verdictText(p ProbeResult) string {
	var text string
	switch {
	case p.DNSError != "":
		return p.DNSError
	case p.Verdict == PointsPartial:
		text = "partial: some addresses answer elsewhere"
	default:
		text = "its addresses answer elsewhere"
	}
	if p.NotAsked > 0 {
		text += fmt.Sprintf("; %d of %d addresses were not asked before the probe's deadline", p.NotAsked, len(p.Addresses))
	}
	return text
}

// rolloutTimeout is the longest rollout timeout of the run's applications
// (10 minutes without any).
func rolloutTimeout(rc *runContext) time.Duration {
	d := 10 * time.Minute
	if rc.def != nil {
		longest := time.Duration(0)
		for _, a := range rc.def.Applications {
			longest = max(longest, a.Deployment.Rollout.Timeout)
		}
		if longest > 0 {
			d = longest
		}
	}
	return d
}

// probeLines writes what a probe found to the step's log: the DNS answer,
// each address's answer and the verdict.
func probeLines(out platform.Output, probe ProbeResult) {
	if probe.DNSError != "" {
		out.Line(fmt.Sprintf("DNS %s: %s", probe.Domain, probe.DNSError))
	} else {
		addrs := make([]string, len(probe.Addresses))
		for i, a := range probe.Addresses {
			addrs[i] = a.Address
		}
		out.Line(fmt.Sprintf("DNS %s: %s", probe.Domain, strings.Join(addrs, ", ")))
	}
	for _, a := range probe.Addresses {
		out.Line(fmt.Sprintf("GET http://%s/.well-known/skali-edge (Host %s): %s", a.Address, probe.Domain, a.Answer))
	}
	out.Line(fmt.Sprintf("%s points %s", probe.Domain, map[string]string{PointsHere: "here", PointsPartial: "here only partly", PointsElsewhere: "elsewhere"}[probe.Verdict]))
}
