package handlers

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/termsafe"
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

// runStatuses are the statuses each ?status= of the runs list stands for.
var runStatuses = map[string][]string{
	"in-progress": {store.RunPending, store.RunRunning, store.RunWaiting},
	"succeeded":   {store.RunSucceeded, store.RunSucceededWithWarnings},
	"failed":      {store.RunFailed, store.RunRejected},
	"cancelled":   {store.RunCancelled},
}

// runFilter reads the runs list's ?kind= and ?status=, and returns them
// as a filter and as the query that keeps them on other pages.
func runFilter(q url.Values) (store.RunFilter, url.Values, error) {
	var f store.RunFilter
	keep := url.Values{}
	if k := q.Get("kind"); k != "" {
		if !slices.ContainsFunc(views.RunKindFilters, func(o views.FilterOption) bool { return o.Value == k }) {
			return f, nil, apperr.Errorf(apperr.Invalid, "kind must be deploy, reconcile, backup or restore.")
		}
		f.Kind = store.RunKind(k)
		keep.Set("kind", k)
	}
	if s := q.Get("status"); s != "" {
		statuses, ok := runStatuses[s]
		if !ok {
			return f, nil, apperr.Errorf(apperr.Invalid, "status must be in-progress, succeeded, failed or cancelled.")
		}
		f.Statuses = statuses
		keep.Set("status", s)
	}
	return f, keep, nil
}

// filterOptions is options with the one whose value is chosen selected.
func filterOptions(options []views.FilterOption, chosen string) []views.FilterOption {
	out := slices.Clone(options)
	for i := range out {
		out[i].Selected = out[i].Value == chosen
	}
	return out
}

// ShowRunsPage lists the environment's runs (any role), newest first, a
// page at a time: ?before=N lists the runs older than run N; ?kind= and
// ?status= (see runFilter) narrow it.
func (h *Runs) ShowRunsPage(w http.ResponseWriter, r *http.Request) error {
	env, role, err := h.Environment(r, store.RoleViewer)
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
	filter, query, err := runFilter(r.URL.Query())
	if err != nil {
		return err
	}
	filter.Before = before
	list, err := h.DB.RunsWhere(r.Context(), env.ID, filter, RunsPageSize+1)
	if err != nil {
		return err
	}
	m := views.RunsPage{Chrome: h.Chrome(r, "Runs · "+env.Project+" / "+env.Name, "projects"), Project: env.Project, Env: env.Name,
		LastEventSeq: env.LastEventSeq, Before: before, Filtered: len(query) > 0, ClearURL: paths.Runs(env.Project, env.Name),
		Kinds: filterOptions(views.RunKindFilters, query.Get("kind")), Statuses: filterOptions(views.RunStatusFilters, query.Get("status"))}
	if len(list) > RunsPageSize {
		list = list[:RunsPageSize]
		older := url.Values{"before": {strconv.FormatInt(list[len(list)-1].ID, 10)}}
		for k, v := range query {
			older[k] = v
		}
		m.OlderURL = paths.Runs(env.Project, env.Name) + "?" + older.Encode()
	}
	if before > 0 {
		m.NewestURL = paths.Runs(env.Project, env.Name)
		if len(query) > 0 {
			m.NewestURL += "?" + query.Encode()
		}
	}
	now := h.DB.Now()
	// Only the active release's run is needed, not its values.
	activeRun, err := h.DB.ActiveReleaseRun(r.Context(), env.ID)
	if err != nil {
		return err
	}
	// Live rows carry the rollback whoever watches (a frame is the same
	// for all); the list hides it from those who cannot deploy.
	m.HideRollback = !role.Includes(store.RoleDeployer)
	for i := range list {
		rv := views.NewRunView(env, &list[i], now, false)
		if !m.HideRollback {
			rv.RollbackHref = views.RollbackHref(env, &list[i], activeRun)
		}
		m.Runs = append(m.Runs, rv)
	}
	return Render(w, r, http.StatusOK, views.Runs(m))
}

func (h *Runs) run(r *http.Request, env *store.Environment) (*store.Run, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "run"), 10, 64)
	if err != nil {
		return nil, apperr.Errorf(apperr.NotFound, "No such run.")
	}
	return h.RunOf(r.Context(), env, id)
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
	m := views.RunPage{Chrome: h.Chrome(r, fmt.Sprintf("Run #%d of %s · %s", run.Number, env.Name, env.Project), "projects"),
		Run: views.NewRunView(env, run, now, role.Includes(store.RoleDeployer))}
	if !m.Run.Finished {
		m.Chrome.Refresh = 3
	}
	var pending bool
	if m.Checkpoints, pending, err = h.checkpointViews(r, env, run, cps, now, role); err != nil {
		return err
	}
	if pending {
		m.EnvironmentSeq = &env.LastEventSeq
	}
	m.Live = paths.RunLive(env.Project, env.Name, run.ID)
	if m.Approval, err = ApprovalView(r.Context(), h.DB, env, run, cps, CurrentUser(r.Context())); err != nil {
		return err
	}
	m.LiveOn = views.RunLiveOn(m.Approval)
	m.LogFilter = strings.TrimSpace(r.URL.Query().Get("q"))
	if utf8.RuneCountInString(m.LogFilter) > views.RunLogFilter {
		return apperr.Errorf(apperr.Invalid, "This filter has %s.", humanize.TooLong(utf8.RuneCountInString(m.LogFilter), views.RunLogFilter))
	}
	lines, err := h.DB.RunLog(r.Context(), run.ID, 0)
	if err != nil {
		return err
	}
	views.AttachLogs(m.Checkpoints, lines, m.LogFilter)
	m.LogLines, m.LogURL = len(lines), paths.RunLog(env.Project, env.Name, run.ID)
	return Render(w, r, http.StatusOK, views.Run(m))
}

// checkpointViews builds a run's checkpoints as its page shows them to a
// reader of role: each TLS checkpoint whose domain is still DNS pending,
// by the domain's current state (not the checkpoint's), says what to do
// about it (pending reports whether one does).
func (h *Runs) checkpointViews(r *http.Request, env *store.Environment, run *store.Run, cps []store.Checkpoint, now time.Time, role store.Role) (out []views.CheckpointView, pending bool, err error) {
	var certs map[string]store.Certificate
	for _, cp := range cps {
		v := views.NewCheckpointView(env, run, cp, now)
		if v.TLS != nil && cp.Kind == runs.KindIssueTLS && v.TLS.Domain != "" {
			if certs == nil {
				if certs, err = h.certificates(r, env); err != nil {
					return nil, false, err
				}
			}
			if c, ok := certs[v.TLS.Domain]; ok && dnsPending(c) {
				if v.DNS, err = dnsPendingView(r.Context(), h.DB, h.Runs, env, c, now, role.Includes(store.RoleDeployer), run.ID); err != nil {
					return nil, false, err
				}
				pending = true
			}
		}
		out = append(out, v)
	}
	return out, pending, nil
}

// ShowRunLive answers the run page's parts that depend on the reader's
// role (any role, as the page): under each TLS checkpoint, what to do about
// its domain while it is DNS pending (Check now for deployers), and the
// approval card (whether the reader may approve), each replacing the
// page's element of its id. The page's script fetches them when a
// checkpoint defers a domain live, a countdown to its next automatic check
// has run out, or a frame says the run waits or ended (RunLiveOn).
func (h *Runs) ShowRunLive(w http.ResponseWriter, r *http.Request) error {
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
	var m views.RunLiveView
	if m.Checkpoints, _, err = h.checkpointViews(r, env, run, cps, h.DB.Now(), role); err != nil {
		return err
	}
	if m.Approval, err = ApprovalView(r.Context(), h.DB, env, run, cps, CurrentUser(r.Context())); err != nil {
		return err
	}
	return Render(w, r, http.StatusOK, views.RunLiveParts(m))
}

// DownloadRunLog answers the run's whole log as text (any role that sees
// the run): a line per log line with its time and its checkpoint. A log is
// what a build or a release command printed, and the file is read on
// terminals (curl, less -R, cat): terminal control sequences (ESC, other
// C0 and C1 controls, bidirectional overrides) are written as visible
// escapes (termsafe.Visible), never as the bytes a terminal acts on.
func (h *Runs) DownloadRunLog(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleViewer)
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
	lines, err := h.DB.RunLog(r.Context(), run.ID, 0)
	if err != nil {
		return err
	}
	names := make(map[int]string, len(cps))
	for _, cp := range cps {
		names[cp.Position] = cp.Name
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s  %s  %s\n", l.At.UTC().Format("2006-01-02T15:04:05.000Z"), termsafe.Visible(names[l.Position]), termsafe.Visible(l.Text))
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s-run-%d.log"`, env.Project, env.Name, run.ID))
	w.Header().Set("Cache-Control", "no-store")
	_, err = io.WriteString(w, b.String())
	return err
}

// certificates returns the environment's certificates by domain.
func (h *Runs) certificates(r *http.Request, env *store.Environment) (map[string]store.Certificate, error) {
	list, err := h.DB.Certificates(r.Context(), env.ID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.Certificate, len(list))
	for _, c := range list {
		out[c.Domain] = c
	}
	return out, nil
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
	h.Flash(r.Context(), "info", fmt.Sprintf("Run #%d of %s stops at its next safe point.", run.Number, env.Name))
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
		return SeeOther(w, r, checkNowReturn(r, env))
	case errors.Is(err, runs.ErrCheckStillRunning):
		h.Flash(r.Context(), "info", fmt.Sprintf("The check of %s's domains is still running: a domain whose addresses stay silent takes up to %d seconds. "+
			"A domain that answers here starts its issuance on its own, and this page shows it.", env.Name, int(runs.DefaultProbeDeadline.Seconds())))
		return SeeOther(w, r, checkNowReturn(r, env))
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
	return SeeOther(w, r, checkNowReturn(r, env))
}

// checkNowReturn is where Check now answers: the run page it was asked from
// (the form field run), or the environment page.
func checkNowReturn(r *http.Request, env *store.Environment) string {
	if id, err := strconv.ParseInt(r.PostForm.Get("run"), 10, 64); err == nil && id > 0 {
		return paths.Run(env.Project, env.Name, id)
	}
	return paths.Environment(env.Project, env.Name)
}

// notAskedText says how many of a domain's addresses its probe's deadline
// left unasked, if any.
func notAskedText(res runs.CheckResult) string {
	if res.NotAsked == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of its %d addresses were not asked before the probe's deadline)", res.NotAsked, res.Addresses)
}
