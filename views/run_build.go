package views

import (
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// The run page's models, built from what the store holds: the page and its
// live fragments (see RunFragments) use the same builders.

// RollbackHref is the plan of rolling back to run's release when run is an
// earlier successful deploy, one that is not the active release (the run
// numbered activeRelease, 0 when none), else "". The runs list's rows, as
// served and as swapped in live, offer it by this one rule.
func RollbackHref(env *store.Environment, run *store.Run, activeRelease int64) string {
	if run.Kind != store.RunDeploy || (run.Status != store.RunSucceeded && run.Status != store.RunSucceededWithWarnings) || run.RevisionID == nil {
		return ""
	}
	if run.ID == activeRelease {
		return ""
	}
	return paths.RollbackPlan(env.Project, env.Name, run.ID)
}

// NewRunView builds the model of a run as its page's header and the runs
// lists show it.
func NewRunView(env *store.Environment, run *store.Run, now time.Time, canCancel bool) RunView {
	det := runs.DecodeRunDetail(run.Detail)
	v := RunView{Project: env.Project, Env: env.Name, ID: run.ID, Number: run.Number, Kind: string(run.Kind), Status: run.Status,
		StatusText: runs.StatusText(run.Status), Reason: run.Reason, Revision: run.Revision, FromRevision: run.FromRevision,
		CreatedBy: run.CreatedBy, Created: humanize.Clock(run.CreatedAt), Deferred: det.Deferred, Warnings: det.Warnings,
		Summary: det.Summary, Finished: store.RunFinished(run.Status), CanCancel: canCancel, CancelRequested: run.CancelRequested,
		Subject: det.Domain, LastSeq: run.LastSeq, ExecutorLost: run.ExecutorLost(),
		Rollback: run.Kind == store.RunDeploy && (det.Rollback || run.ReleaseOf != nil || run.FromRevision > run.Revision && run.Revision > 0)}
	if run.Status == store.RunWaiting && run.PlanDigest != "" && run.JobID == nil {
		v.StatusText = "waiting for approval"
	} else if run.Status == store.RunWaiting && strings.HasPrefix(run.Reason, "Frozen until ") {
		// A deploy started in a freeze window: "frozen until Mon 06:00 UTC".
		v.StatusText = "f" + strings.TrimPrefix(run.Reason, "F")
	}
	if det.StoppedAt != nil {
		v.StoppedAt, v.StoppedName = "#checkpoint-"+strconv.Itoa(*det.StoppedAt), det.StoppedName
		if det.StoppedLine > 0 {
			// Its last log line: what it printed as it failed.
			v.StoppedAt = "#" + lineID(det.StoppedLine)
		}
	}
	if v.ExecutorLost {
		v.ExecutorLostAt = humanize.Clock(*run.ExecutorLostAt)
	}
	if run.StartedAt != nil {
		v.Started = humanize.Clock(*run.StartedAt)
		end := now
		if run.FinishedAt != nil {
			end = *run.FinishedAt
		} else {
			v.RunningSince = run.StartedAt.UTC().Format(time.RFC3339Nano)
		}
		v.Duration = humanize.Duration(end.Sub(*run.StartedAt))
	}
	return v
}

// NewCheckpointView builds a checkpoint row's model.
func NewCheckpointView(env *store.Environment, run *store.Run, cp store.Checkpoint, now time.Time) CheckpointView {
	d := runs.DecodeCheckpointDetail(cp.Detail)
	v := CheckpointView{Project: env.Project, Env: env.Name, RunID: run.ID, Position: cp.Position, Kind: cp.Kind, Name: cp.Name,
		Status: cp.Status, Warning: cp.Warning, Error: d.Error, NotRun: cp.Status == store.CheckpointNotRun || cp.Status == store.CheckpointPending && store.RunFinished(run.Status)}
	v.Timeline = newTimeline(run, cp, now)
	if cp.StartedAt != nil {
		v.Started = humanize.Clock(*cp.StartedAt)
		if cp.FinishedAt != nil {
			v.Duration = humanize.Duration(cp.FinishedAt.Sub(*cp.StartedAt))
		}
	}
	add := func(label, value string) {
		if value != "" {
			v.Details = append(v.Details, Setting{Label: label, Value: value})
		}
	}
	add("Application", d.Application)
	add("Service", d.Service)
	add("Source", d.Source)
	add("Image", d.Image)
	if len(d.Command) > 0 {
		add("Command", strings.Join(d.Command, " "))
	}
	add("Timeout", d.Timeout)
	add("Strategy", d.Strategy)
	if len(d.WaitedFor) > 0 {
		add("Waited for", strings.Join(d.WaitedFor, ", ")+" to accept connections")
	}
	if len(d.Values) > 0 {
		add("Values", strings.Join(d.Values, ", "))
	}
	if sn := d.Snapshot; sn != nil && sn.File != "" {
		add("File", sn.File)
		add("Size", ByteSize(sn.Size))
		add("SHA-256", sn.SHA256)
	}
	if len(d.Removed) > 0 {
		add("Deleted by retention", strings.Join(d.Removed, ", "))
	}
	if d.Probe != nil {
		v.TLS = &TLSView{Domain: d.Probe.Domain, State: "arrived: every address answers as this installation"}
		for _, a := range d.Probe.Addresses {
			v.TLS.Addresses = append(v.TLS.Addresses, AddressView{Address: a.Address, Answer: a.Answer, Here: a.Answer == runs.AnsweredHere})
		}
	}
	if t := d.TLS; t != nil {
		v.TLS = newTLSView(cp, t, runs.TLSDeferred(cp, d), now)
	}
	return v
}

// newTLSView builds the TLS part of an Issue TLS checkpoint's row.
func newTLSView(cp store.Checkpoint, t *runs.TLSDetail, deferred bool, now time.Time) *TLSView {
	tv := &TLSView{Domain: t.Domain, Route: t.Route, IssuedFor: t.IssuedFor}
	switch {
	case deferred:
		tv.Deferred = true
		tv.State = "cert deferred · domain not pointing here yet"
	case t.State == "issued" || cp.Status == store.CheckpointSucceeded:
		tv.State = "issued"
	case t.State == "failed" || cp.Status == store.CheckpointFailed:
		tv.State = "cert failed"
	case t.State != "":
		tv.State = t.State
	}
	tv.Now = now
	if t.NextRetryAt != nil && (cp.Status == store.CheckpointWaiting || t.State == "failed") {
		tv.Wait = "next retry at " + humanize.HourMinute(*t.NextRetryAt)
		tv.WaitAt = *t.NextRetryAt
	}
	if cp.Status == store.CheckpointWaiting && t.Deadline != nil {
		tv.Deadline = *t.Deadline
	}
	for _, a := range t.Addresses {
		tv.Addresses = append(tv.Addresses, AddressView{Address: a.Address, Answer: a.Answer, Here: a.Answer == runs.AnsweredHere})
	}
	for _, a := range t.Attempts {
		av := AttemptView{Number: a.Number, At: humanize.Clock(a.At), Outcome: a.Outcome, Reason: a.Reason}
		if a.Outcome == "failed" && a.NextRetryAt != nil {
			av.Wait = "retry at " + humanize.HourMinute(*a.NextRetryAt)
		}
		if a.Outcome == "deferred" {
			av.Number = 0
		}
		tv.Attempts = append(tv.Attempts, av)
	}
	add := func(label, value string) {
		if value != "" {
			tv.Fields = append(tv.Fields, Setting{Label: label, Value: value})
		}
	}
	add("Domain", t.Domain)
	add("Route", t.Route)
	add("TLS policy", t.Policy)
	add("Points", map[string]string{runs.PointsHere: "here", runs.PointsPartial: "partial", runs.PointsElsewhere: "elsewhere"}[t.Verdict])
	add("DNS", t.DNSError)
	if t.Attempt > 0 {
		add("Attempt", strconv.Itoa(t.Attempt))
	}
	if t.Failures > 0 {
		add("Consecutive failures", strconv.Itoa(t.Failures))
	}
	if t.LastFailureAt != nil {
		add("Last failure", humanize.Clock(*t.LastFailureAt))
	}
	add("Reason", t.LastFailure)
	if t.NextRetryAt != nil {
		add("Estimated next retry", humanize.Clock(*t.NextRetryAt))
	}
	if t.RateLimitedUntil != nil {
		add("CA rate limit until", humanize.Time(*t.RateLimitedUntil))
	}
	if t.Deadline != nil {
		add("Rollout deadline", humanize.Clock(*t.Deadline))
	}
	if is := t.Issuance; is != nil {
		add("CertificateRequest", is.CertificateRequest)
		add("ACME Order", is.Order)
		add("Challenge", is.Challenge)
		add("Challenge URL", is.ChallengeURL)
		add("Challenge result", is.ChallengeResult)
	}
	add("Serial", t.Serial)
	if t.NotBefore != nil && t.NotAfter != nil {
		add("Valid", humanize.Date(*t.NotBefore)+" to "+humanize.Date(*t.NotAfter))
	}
	add("Issued for", t.IssuedFor)
	add("Note", t.Note)
	return tv
}
