package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// Runs shows runs and cancels them, and checks domains now.
type Runs struct {
	*Base
	Runs *runs.Service
}

// NewRuns returns the run handlers.
func NewRuns(b *Base, svc *runs.Service) *Runs { return &Runs{Base: b, Runs: svc} }

// RunsPageSize is how many runs one page of the runs list shows.
const RunsPageSize = 100

// ShowRunsPage lists the environment's runs (any role), newest first, a
// page at a time: ?before=N lists the runs older than run N.
func (h *Runs) ShowRunsPage(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	var before int64
	if q := r.URL.Query().Get("before"); q != "" {
		before, err = strconv.ParseInt(q, 10, 64)
		if err != nil || before < 1 {
			return apperr.Errorf(apperr.Invalid, "before must be a run number, such as 120.")
		}
	}
	list, err := h.DB.RunsBefore(r.Context(), env.ID, before, RunsPageSize+1)
	if err != nil {
		return err
	}
	m := views.RunsPage{Chrome: h.Chrome(r, "Runs · "+env.Project+" / "+env.Name, "projects"), Project: env.Project, Env: env.Name,
		LastEventSeq: env.LastEventSeq, Before: before}
	if len(list) > RunsPageSize {
		list = list[:RunsPageSize]
		m.OlderURL = paths.RunsBefore(env.Project, env.Name, list[len(list)-1].ID)
	}
	if before > 0 {
		m.NewestURL = paths.Runs(env.Project, env.Name)
	}
	now := h.DB.Now()
	for i := range list {
		m.Runs = append(m.Runs, runView(env, &list[i], now, false))
	}
	return Render(w, r, http.StatusOK, views.Runs(m))
}

func (h *Runs) run(r *http.Request, env *store.Environment) (*store.Run, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "run"), 10, 64)
	if err != nil || id < 1 {
		return nil, apperr.Errorf(apperr.NotFound, "No such run.")
	}
	run, err := h.DB.RunByID(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if run.EnvironmentID != env.ID {
		return nil, apperr.Errorf(apperr.NotFound, "No such run.")
	}
	return run, nil
}

// ShowRunPage renders a run with its checkpoints (any role). An unfinished
// run's page reloads itself every few seconds.
func (h *Runs) ShowRunPage(w http.ResponseWriter, r *http.Request) error {
	env, role, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	run, err := h.run(r, env)
	if err != nil {
		return err
	}
	cps, err := h.DB.Checkpoints(r.Context(), run.ID)
	if err != nil {
		return err
	}
	now := h.DB.Now()
	m := views.RunPage{Chrome: h.Chrome(r, fmt.Sprintf("Run %d · %s / %s", run.ID, env.Project, env.Name), "projects"),
		Run: runView(env, run, now, role.Includes(store.RoleDeployer))}
	if !m.Run.Finished {
		m.Chrome.Refresh = 3
	}
	for _, cp := range cps {
		m.Checkpoints = append(m.Checkpoints, CheckpointView(env, run, cp, now))
	}
	return Render(w, r, http.StatusOK, views.Run(m))
}

// CancelRun asks a run to stop at its next safe point (deployers and admins).
func (h *Runs) CancelRun(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleDeployer)
	if err != nil {
		return err
	}
	run, err := h.run(r, env)
	if err != nil {
		return err
	}
	if h.Runs == nil {
		return apperr.Errorf(apperr.Conflict, "Runs are not available on this Studio.")
	}
	if _, err := h.Runs.Cancel(r.Context(), ActorOf(r), env, run.ID); err != nil {
		return err
	}
	h.Flash(r.Context(), "info", fmt.Sprintf("Run %d stops at its next safe point.", run.ID))
	return SeeOther(w, r, paths.Run(env.Project, env.Name, run.ID))
}

// CheckNow probes the environment's deferred and failed domains (or the
// one in the field domain) at once (deployers and admins).
func (h *Runs) CheckNow(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	env, _, err := h.Environment(r, store.RoleDeployer)
	if err != nil {
		return err
	}
	if h.Runs == nil {
		return apperr.Errorf(apperr.Conflict, "Runs are not available on this Studio.")
	}
	results, err := h.Runs.CheckNow(r.Context(), ActorOf(r), env, strings.TrimSpace(r.PostForm.Get("domain")))
	switch {
	case errors.Is(err, runs.ErrCheckUnderWay):
		h.Flash(r.Context(), "info", fmt.Sprintf("A check of %s's domains is already queued or running, so none was added. "+
			"A domain that answers here starts its issuance on its own, and this page shows it.", env.Name))
		return SeeOther(w, r, paths.Environment(env.Project, env.Name))
	case errors.Is(err, runs.ErrCheckStillRunning):
		h.Flash(r.Context(), "info", fmt.Sprintf("The check of %s's domains is still running: a domain whose addresses stay silent takes up to %d seconds. "+
			"A domain that answers here starts its issuance on its own, and this page shows it.", env.Name, int(runs.DefaultProbeDeadline.Seconds())))
		return SeeOther(w, r, paths.Environment(env.Project, env.Name))
	case err != nil:
		return err
	}
	var parts []string
	for _, res := range results {
		switch {
		case res.NotProbed:
			parts = append(parts, res.Domain+" was not reached before the check's deadline; the next reconcile probes it")
		case res.Run != nil:
			parts = append(parts, res.Domain+" answers here: issuing now (CA rate limits still apply)")
		case res.Verdict == runs.PointsHere:
			parts = append(parts, res.Domain+" answers here; an issuance is already under way")
		case res.Verdict == runs.PointsPartial:
			parts = append(parts, res.Domain+" is partial: some addresses still answer elsewhere"+notAskedText(res))
		default:
			parts = append(parts, res.Domain+" does not point here yet"+notAskedText(res))
		}
	}
	msg := "No deferred or failed domains to check."
	if len(parts) > 0 {
		msg = strings.Join(parts, "; ") + "."
	}
	h.Flash(r.Context(), "info", msg)
	return SeeOther(w, r, paths.Environment(env.Project, env.Name))
}

// notAskedText says how many of a domain's addresses its probe's deadline
// left unasked, if any.
func notAskedText(res runs.CheckResult) string {
	if res.NotAsked == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of its %d addresses were not asked before the probe's deadline)", res.NotAsked, res.Addresses)
}

// runView builds the header model of a run.
func runView(env *store.Environment, run *store.Run, now time.Time, canCancel bool) views.RunView {
	det := runs.DecodeRunDetail(run.Detail)
	v := views.RunView{Project: env.Project, Env: env.Name, ID: run.ID, Kind: run.Kind, Status: run.Status,
		StatusText: runs.StatusText(run.Status), Reason: run.Reason, Revision: run.Revision, FromRevision: run.FromRevision,
		CreatedBy: run.CreatedBy, Created: humanize.Clock(run.CreatedAt), Deferred: det.Deferred, Warnings: det.Warnings,
		Summary: det.Summary, Finished: store.RunFinished(run.Status), CanCancel: canCancel, CancelRequested: run.CancelRequested,
		Subject: det.Domain, LastSeq: run.LastSeq, ExecutorLost: run.ExecutorLost()}
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
		v.Duration = durationText(end.Sub(*run.StartedAt))
	}
	return v
}

// CheckpointView builds a checkpoint row's model.
func CheckpointView(env *store.Environment, run *store.Run, cp store.Checkpoint, now time.Time) views.CheckpointView {
	d := runs.DecodeCheckpointDetail(cp.Detail)
	v := views.CheckpointView{Project: env.Project, Env: env.Name, RunID: run.ID, Position: cp.Position, Kind: cp.Kind, Name: cp.Name,
		Status: cp.Status, Warning: cp.Warning, Error: d.Error, NotRun: cp.Status == store.CheckpointPending && store.RunFinished(run.Status)}
	if cp.StartedAt != nil {
		v.Started = humanize.Clock(*cp.StartedAt)
		if cp.FinishedAt != nil {
			v.Duration = durationText(cp.FinishedAt.Sub(*cp.StartedAt))
		}
	}
	add := func(label, value string) {
		if value != "" {
			v.Details = append(v.Details, views.Setting{Label: label, Value: value})
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
		add("Size", views.ByteSize(sn.Size))
		add("SHA-256", sn.SHA256)
	}
	if len(d.Removed) > 0 {
		add("Deleted by retention", strings.Join(d.Removed, ", "))
	}
	if d.Probe != nil {
		v.TLS = &views.TLSView{Domain: d.Probe.Domain, State: "arrived: every address answers as this installation"}
		for _, a := range d.Probe.Addresses {
			v.TLS.Addresses = append(v.TLS.Addresses, views.AddressView{Address: a.Address, Answer: a.Answer, Here: a.Answer == runs.AnsweredHere})
		}
	}
	if t := d.TLS; t != nil {
		v.TLS = tlsView(cp, t, now)
	}
	return v
}

func tlsView(cp store.Checkpoint, t *runs.TLSDetail, now time.Time) *views.TLSView {
	tv := &views.TLSView{Domain: t.Domain, Route: t.Route, IssuedFor: t.IssuedFor}
	switch {
	case cp.Status == store.CheckpointSkipped && strings.HasPrefix(cp.Warning, "TLS deferred"):
		tv.State = "cert deferred · domain not pointing here yet"
	case t.State == "issued" || cp.Status == store.CheckpointSucceeded:
		tv.State = "issued"
	case t.State == "failed" || cp.Status == store.CheckpointFailed:
		tv.State = "cert failed"
	case t.State != "":
		tv.State = t.State
	}
	if cp.Status == store.CheckpointWaiting && t.NextRetryAt != nil {
		tv.Wait = "next retry at " + retryText(*t.NextRetryAt, now)
	} else if t.NextRetryAt != nil && t.State == "failed" {
		tv.Wait = "next retry at " + retryText(*t.NextRetryAt, now)
	}
	for _, a := range t.Addresses {
		tv.Addresses = append(tv.Addresses, views.AddressView{Address: a.Address, Answer: a.Answer, Here: a.Answer == runs.AnsweredHere})
	}
	for _, a := range t.Attempts {
		av := views.AttemptView{Number: a.Number, At: humanize.Clock(a.At), Outcome: a.Outcome, Reason: a.Reason}
		if a.Outcome == "failed" && a.NextRetryAt != nil {
			av.Wait = "retry at " + a.NextRetryAt.UTC().Format("15:04 UTC")
		}
		if a.Outcome == "deferred" {
			av.Number = 0
		}
		tv.Attempts = append(tv.Attempts, av)
	}
	add := func(label, value string) {
		if value != "" {
			tv.Fields = append(tv.Fields, views.Setting{Label: label, Value: value})
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
		add("Estimated next retry", retryText(*t.NextRetryAt, now))
	}
	if t.RateLimitedUntil != nil {
		add("CA rate limit until", humanize.Time(*t.RateLimitedUntil))
	}
	if t.Deadline != nil {
		add("Rollout deadline", t.Deadline.UTC().Format("15:04 UTC"))
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
		add("Valid", t.NotBefore.UTC().Format("2006-01-02")+" to "+t.NotAfter.UTC().Format("2006-01-02"))
	}
	add("Issued for", t.IssuedFor)
	add("Note", t.Note)
	return tv
}

// retryText reads "14:03 UTC (in 52 min)".
func retryText(at, now time.Time) string {
	s := at.UTC().Format("15:04 UTC")
	if d := at.Sub(now); d > 0 {
		s += " (in " + durationText(d.Round(time.Minute)) + ")"
	}
	return s
}

// durationText reads 850ms, 12s, 52 min, 3h 5m.
func durationText(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min"
	}
	h := int(d.Hours())
	m := int(d.Minutes()) % 60
	if m == 0 {
		return strconv.Itoa(h) + "h"
	}
	return fmt.Sprintf("%dh %dm", h, m)
}
