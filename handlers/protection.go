package handlers

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// Protection shows and sets an environment's protection rule, approves
// and rejects waiting runs, and lists a person's inbox.
type Protection struct {
	*Base
	Runs *runs.Service
}

// NewProtection returns the protection handlers.
func NewProtection(b *Base, svc *runs.Service) *Protection { return &Protection{Base: b, Runs: svc} }

// ProtectionInput is a rule as a form or the API sends it.
type ProtectionInput struct {
	Approvals    int      `json:"approvals"`
	Approvers    []string `json:"approvers"`
	SelfApproval bool     `json:"self_approval"`
	Wait         string   `json:"wait"`
	Expires      string   `json:"expires"`
	Bypass       string   `json:"bypass"`
	// FreezeWindows, when sent, replace the environment's freeze windows
	// (the API; approvals 0 with them: the windows only).
	FreezeWindows *[]runs.FreezeInput `json:"freeze_windows,omitempty"`
}

// rule turns in into a store rule: approvers are members' emails or
// subjects, or a role (deployer, admin).
func (h *Protection) rule(ctx context.Context, env *store.Environment, in ProtectionInput) (store.ProtectionRule, error) {
	rule := store.ProtectionRule{Approvals: in.Approvals, SelfApproval: in.SelfApproval, Bypass: store.Bypass(in.Bypass), Expires: store.DefaultApprovalExpiry}
	if rule.Bypass == "" {
		rule.Bypass = store.BypassNobody
	}
	members, err := h.DB.Members(ctx, env.ID)
	if err != nil {
		return rule, err
	}
	for _, a := range in.Approvers {
		a = strings.TrimSpace(a)
		switch a {
		case "":
			continue
		case string(store.RoleDeployer), string(store.RoleAdmin):
			rule.ApproverRole = store.Role(a)
			continue
		}
		i := slices.IndexFunc(members, func(m store.Member) bool { return strings.EqualFold(m.Email, a) || m.Subject == a })
		if i < 0 {
			return rule, apperr.Errorf(apperr.Invalid, "%s is not a member of %s: add them on the members page first.", a, env.Name)
		}
		rule.ApproverUsers = append(rule.ApproverUsers, members[i].UserID)
	}
	if in.Wait != "" {
		if rule.Wait, err = compiler.ParseDuration(in.Wait); err != nil {
			return rule, apperr.Errorf(apperr.Invalid, "The wait after approval is a duration such as 30m or 2d.")
		}
	}
	if in.Expires != "" {
		if rule.Expires, err = compiler.ParseDuration(in.Expires); err != nil {
			return rule, apperr.Errorf(apperr.Invalid, "The expiry is a duration such as 7d.")
		}
	}
	return rule, nil
}

// ShowProtectionPage shows the environment's rule (its admins).
func (h *Protection) ShowProtectionPage(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	return h.renderProtection(w, r, env, http.StatusOK, nil, "", nil)
}

func (h *Protection) renderProtection(w http.ResponseWriter, r *http.Request, env *store.Environment, status int, in *ProtectionInput, problem string, freeze *views.FreezeForm) error {
	rule, err := h.DB.ProtectionRule(r.Context(), env.ID)
	if err != nil {
		return err
	}
	members, err := h.DB.Members(r.Context(), env.ID)
	if err != nil {
		return err
	}
	m := views.ProtectionPage{Chrome: h.Chrome(r, "Protection · "+env.Project+" / "+env.Name, "projects"), Project: env.Project, Env: env.Name,
		Form: views.ProtectionForm{Approvals: "1", Role: "deployer", Expires: "7d", Wait: "0s", Bypass: "nobody", Error: problem}}
	named := map[string]bool{}
	if rule != nil {
		m.Protected, m.UpdatedBy, m.UpdatedAt = true, rule.UpdatedBy, humanize.Clock(rule.UpdatedAt)
		m.Form = views.ProtectionForm{Approvals: strconv.Itoa(rule.Approvals), Role: string(rule.ApproverRole), SelfApproval: rule.SelfApproval,
			Wait: humanize.ManifestDuration(rule.Wait), Expires: humanize.ManifestDuration(rule.Expires), Bypass: string(rule.Bypass), Error: problem}
		for _, mb := range members {
			if slices.Contains(rule.ApproverUsers, mb.UserID) {
				named[strings.ToLower(mb.Email)] = true
			}
		}
	}
	if in != nil {
		m.Form = views.ProtectionForm{Approvals: strconv.Itoa(in.Approvals), SelfApproval: in.SelfApproval, Wait: in.Wait, Expires: in.Expires,
			Bypass: in.Bypass, Error: problem}
		named = map[string]bool{}
		for _, a := range in.Approvers {
			if a == "deployer" || a == "admin" {
				m.Form.Role = a
			}
			named[strings.ToLower(a)] = true
		}
	}
	for _, mb := range members {
		if mb.Pending {
			continue
		}
		m.Members = append(m.Members, views.ProtectionMember{ID: mb.UserID, Name: mb.DisplayName(), Email: mb.Email, Role: string(mb.Role),
			Checked: named[strings.ToLower(mb.Email)]})
	}
	if m.Freeze, err = h.freezeForm(r.Context(), env, nil, nil); err != nil {
		return err
	}
	if freeze != nil {
		m.Freeze = *freeze
	}
	return Render(w, r, status, views.Protection(m))
}

// freezeForm is the freeze windows of env as the page shows them: rows as
// written (nil: as stored), the problem of one, and a blank row to add one.
func (h *Protection) freezeForm(ctx context.Context, env *store.Environment, rows []runs.FreezeInput, problem error) (views.FreezeForm, error) {
	var f views.FreezeForm
	windows, err := h.DB.FreezeWindows(ctx, env.ID)
	if err != nil {
		return f, err
	}
	if rows == nil {
		for _, w := range windows {
			rows = append(rows, runs.FreezeInputOf(w))
		}
	}
	f.Now = h.Runs.Now()
	if fz, ok := runs.FrozenAt(windows, f.Now); ok {
		f.Frozen, f.Refuse, f.UntilAt, f.UntilLabel = true, fz.Refuse, fz.Until, runs.FreezeClock(fz.Until, f.Now)
	}
	fe, _ := problem.(*runs.FreezeError)
	if problem != nil && fe == nil {
		f.Error = problem.Error()
	}
	blank := true
	for i, in := range rows {
		row := views.FreezeRow{Cron: in.Cron, Duration: in.Duration, From: in.From, To: in.To, Action: in.Action}
		if fe != nil && fe.Index == i {
			row.Error, row.ErrorField = fe.Message, fe.Field
		}
		if in.Empty() {
			blank = false
		}
		f.Rows = append(f.Rows, row)
	}
	if blank {
		f.Rows = append(f.Rows, views.FreezeRow{Action: "wait"})
	}
	return f, nil
}

// freezeRowsOf reads the freeze windows of the form (its aligned
// freeze_cron, freeze_duration, freeze_from, freeze_to, freeze_action).
func freezeRowsOf(r *http.Request) []runs.FreezeInput {
	f := r.PostForm
	n := max(len(f["freeze_cron"]), len(f["freeze_duration"]), len(f["freeze_from"]), len(f["freeze_to"]))
	at := func(name string, i int) string {
		if v := f[name]; i < len(v) {
			return strings.TrimSpace(v[i])
		}
		return ""
	}
	rows := make([]runs.FreezeInput, 0, n)
	for i := range n {
		rows = append(rows, runs.FreezeInput{Cron: at("freeze_cron", i), Duration: at("freeze_duration", i), From: at("freeze_from", i),
			To: at("freeze_to", i), Action: at("freeze_action", i)})
	}
	return rows
}

// setFreeze stores the form's freeze windows, or shows the page again
// with the problem beside its field (nothing stored changes).
func (h *Protection) setFreeze(w http.ResponseWriter, r *http.Request, env *store.Environment) error {
	rows := freezeRowsOf(r)
	windows, err := runs.CheckFreezeWindows(rows)
	if err == nil {
		err = h.Runs.PutFreezeWindows(r.Context(), ActorOf(r), env, windows)
	}
	if _, ok := err.(*runs.FreezeError); ok || apperr.CodeOf(err) == apperr.Invalid {
		f, ferr := h.freezeForm(r.Context(), env, rows, err)
		if ferr != nil {
			return ferr
		}
		return h.renderProtection(w, r, env, http.StatusUnprocessableEntity, nil, "", &f)
	}
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("%s has no freeze windows.", env.Name)
	if len(windows) > 0 {
		msg = fmt.Sprintf("%s has %d freeze %s.", env.Name, len(windows), humanize.Plural(len(windows), "window", "windows"))
	}
	h.Flash(r.Context(), "info", msg)
	return SeeOther(w, r, paths.Protection(env.Project, env.Name)+"#freeze")
}

// SetProtection sets the environment's rule from the form, or removes it
// (remove=1); 303 to the page.
func (h *Protection) SetProtection(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	if r.PostForm.Get("section") == "freeze" {
		return h.setFreeze(w, r, env)
	}
	if r.PostForm.Get("remove") == "1" {
		del := func() error { return h.DB.DeleteProtectionRule(r.Context(), ActorOf(r), env, store.Starter{}) }
		if h.Runs != nil {
			del = func() error { return h.Runs.DeleteProtection(r.Context(), ActorOf(r), env) }
		}
		if err := del(); err != nil {
			return err
		}
		h.Flash(r.Context(), "info", env.Name+" is no longer protected: deploys start at once.")
		return SeeOther(w, r, paths.Protection(env.Project, env.Name))
	}
	in := ProtectionInput{Approvers: r.PostForm["approvers"], SelfApproval: r.PostForm.Get("self_approval") == "1",
		Wait: strings.TrimSpace(r.PostForm.Get("wait")), Expires: strings.TrimSpace(r.PostForm.Get("expires")), Bypass: r.PostForm.Get("bypass")}
	if role := r.PostForm.Get("role"); role != "" {
		in.Approvers = append(in.Approvers, role)
	}
	n, err := strconv.Atoi(strings.TrimSpace(r.PostForm.Get("approvals")))
	if err != nil {
		return h.renderProtection(w, r, env, http.StatusUnprocessableEntity, &in, "Required approvals is a number from 1 to 6.", nil)
	}
	in.Approvals = n
	rule, err := h.rule(r.Context(), env, in)
	if err == nil {
		err = putProtection(r.Context(), h.Runs, h.DB, ActorOf(r), env, rule)
	}
	if apperr.CodeOf(err) == apperr.Invalid {
		return h.renderProtection(w, r, env, http.StatusUnprocessableEntity, &in, apperr.Message(err), nil)
	}
	if err != nil {
		return err
	}
	h.Flash(r.Context(), "info", fmt.Sprintf("%s is protected: a deploy waits for %d %s.", env.Name, rule.Approvals, humanize.Plural(rule.Approvals, "approval", "approvals")))
	return SeeOther(w, r, paths.Protection(env.Project, env.Name))
}

// putProtection sets the rule through the runs service, which starts the
// waiting runs it meets; without one (no value-encryption key, so no
// deploys) through the store alone.
func putProtection(ctx context.Context, svc *runs.Service, db *store.DB, a store.Actor, env *store.Environment, rule store.ProtectionRule) error {
	if svc == nil {
		return db.PutProtectionRule(ctx, a, env, rule, store.Starter{})
	}
	return svc.PutProtection(ctx, a, env, rule)
}

// ApproveRun approves a waiting run's plan (digest: the one the page
// showed), or bypasses its approvals (bypass=1, installation admins, with
// a reason in comment); 303 to the run page (or the inbox).
func (h *Protection) ApproveRun(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	env, _, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	run, err := h.runOf(r, env)
	if err != nil {
		return err
	}
	if h.Runs == nil {
		return apperr.Errorf(apperr.Conflict, "Runs are not available on this Studio.")
	}
	comment := strings.TrimSpace(r.PostForm.Get("comment"))
	var out *store.ApprovalOutcome
	if r.PostForm.Get("bypass") == "1" {
		out, err = h.Runs.Bypass(r.Context(), ActorOf(r), env, run.ID, comment)
	} else {
		out, err = h.Runs.Approve(r.Context(), ActorOf(r), env, run.ID, r.PostForm.Get("digest"), comment)
	}
	if err != nil {
		return err
	}
	h.Flash(r.Context(), "info", approvalFlash(run.ID, out))
	back := paths.Run(env.Project, env.Name, run.ID)
	if r.PostForm.Get("return") == paths.Approvals {
		back = paths.Approvals
	}
	return SeeOther(w, r, back)
}

func approvalFlash(id int64, out *store.ApprovalOutcome) string {
	if out.Started {
		return fmt.Sprintf("Run %d is approved (%d of %d) and starts %s.", id, out.Count, out.Needed, humanize.Clock(out.StartsAt))
	}
	return fmt.Sprintf("Your approval of run %d is recorded: %d of %d. It waits for %d more.", id, out.Count, out.Needed, out.Needed-out.Count)
}

// RejectRun rejects a waiting run with a comment; 303 to the run page.
func (h *Protection) RejectRun(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	env, _, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	run, err := h.runOf(r, env)
	if err != nil {
		return err
	}
	if h.Runs == nil {
		return apperr.Errorf(apperr.Conflict, "Runs are not available on this Studio.")
	}
	if err := h.Runs.Reject(r.Context(), ActorOf(r), env, run.ID, strings.TrimSpace(r.PostForm.Get("comment"))); err != nil {
		return err
	}
	h.Flash(r.Context(), "info", fmt.Sprintf("Run %d is rejected: nothing of it runs.", run.ID))
	return SeeOther(w, r, paths.Run(env.Project, env.Name, run.ID))
}

func (h *Protection) runOf(r *http.Request, env *store.Environment) (*store.Run, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "run"), 10, 64)
	if err != nil {
		return nil, apperr.Errorf(apperr.NotFound, "No such run.")
	}
	return h.RunOf(r.Context(), env, id)
}

// ShowApprovalsPage lists every run waiting for the signed-in person's
// approval, across the installation.
func (h *Protection) ShowApprovalsPage(w http.ResponseWriter, r *http.Request) error {
	u := CurrentUser(r.Context())
	list, err := h.DB.WaitingForApproval(r.Context(), u)
	if err != nil {
		return err
	}
	m := views.ApprovalsPage{Chrome: h.Chrome(r, "Approvals", "approvals")}
	for _, wa := range list {
		it := views.InboxItem{Project: wa.Project, Env: wa.Environment, RunID: wa.Run.ID, Revision: wa.Run.Revision, CreatedBy: wa.Run.CreatedBy,
			Created: humanize.Clock(wa.Run.CreatedAt), Count: wa.Approvals, Needed: wa.Needed, Digest: wa.Run.PlanDigest}
		cps, err := h.DB.Checkpoints(r.Context(), wa.Run.ID)
		if err != nil {
			return err
		}
		if _, d := runs.ApprovalOf(cps); d != nil {
			it.Plan = planSummary(d.Plan)
		}
		m.Items = append(m.Items, it)
	}
	return Render(w, r, http.StatusOK, views.Approvals(m))
}

// ShowApprovalsLive answers the navigation's count of runs waiting for the
// signed-in person (views.ApprovalsCount), which every page's script
// fetches again: on an event its stream brings, every 20 seconds and when
// the page is shown again.
func (h *Protection) ShowApprovalsLive(w http.ResponseWriter, r *http.Request) error {
	list, err := h.DB.WaitingForApproval(r.Context(), CurrentUser(r.Context()))
	if err != nil {
		return err
	}
	return Render(w, r, http.StatusOK, views.ApprovalsCount(len(list)))
}

// planSummary is an approval plan in one line.
func planSummary(p runs.ApprovalPlan) string {
	s := fmt.Sprintf("revision %d", p.Revision)
	if p.FromRevision > 0 {
		s += fmt.Sprintf(" (active %d)", p.FromRevision)
	}
	s += fmt.Sprintf(", %d %s", len(p.Values), humanize.Plural(len(p.Values), "value", "values"))
	if len(p.Destructive) > 0 {
		s += fmt.Sprintf(", %d destructive %s", len(p.Destructive), humanize.Plural(len(p.Destructive), "change", "changes"))
	}
	if len(p.PublicValues) > 0 {
		s += ", publishes " + strings.Join(p.PublicValues, ", ")
	}
	return s
}

// ApprovalView builds the Approval card of a run's page (nil when the run
// has no Approval checkpoint).
func ApprovalView(ctx context.Context, db *store.DB, env *store.Environment, run *store.Run, cps []store.Checkpoint, viewer *store.User) (*views.ApprovalView, error) {
	cp, d := runs.ApprovalOf(cps)
	if cp == nil {
		return nil, nil
	}
	v := &views.ApprovalView{Project: env.Project, Env: env.Name, RunID: run.ID, Digest: run.PlanDigest,
		Waiting: run.Status == store.RunWaiting && run.PlanDigest != "", Revision: d.Plan.Revision, FromRevision: d.Plan.FromRevision,
		Destructive: d.Plan.Destructive, PublicValues: d.Plan.PublicValues, Services: d.Plan.Services, Changed: d.Changed}
	if v.Digest == "" {
		v.Digest = d.Digest
	}
	for _, val := range d.Plan.Values {
		v.Values = append(v.Values, fmt.Sprintf("%s v%d", val.Name, val.Version))
	}
	rule, err := db.ProtectionRule(ctx, env.ID)
	if err != nil {
		return nil, err
	}
	aps, err := db.Approvals(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	mine := false
	for _, a := range aps {
		if a.Digest != v.Digest {
			continue
		}
		v.Count++
		v.Approved = append(v.Approved, views.ApprovedBy{Name: a.Name, At: humanize.Clock(a.CreatedAt), Comment: a.Comment})
		if viewer != nil && a.UserID == viewer.ID {
			mine = true
		}
	}
	v.Started = v.Waiting && run.JobID != nil
	if v.Started {
		v.StartsAt = "shortly"
		if at, ok, err := db.RunJobScheduledAt(ctx, run.ID); err != nil {
			return nil, err
		} else if ok && at.After(db.Now().Add(time.Minute)) {
			v.StartsAt = "at " + humanize.Clock(at)
		}
	}
	if rule == nil {
		v.Needed = max(v.Count, 1)
		return v, nil
	}
	v.Needed = rule.Approvals
	approvers, err := db.Approvers(ctx, env, rule)
	if err != nil {
		return nil, err
	}
	for _, a := range approvers {
		if !rule.SelfApproval && a.DisplayName() == run.CreatedBy {
			continue // who started it may not approve it
		}
		v.Approvers = append(v.Approvers, a.DisplayName())
	}
	if rule.ApproverRole != store.RoleNone {
		v.Approvers = append(v.Approvers, "installation admins")
	}
	if viewer == nil || !v.Waiting {
		return v, nil
	}
	role, err := db.EnvironmentRole(ctx, viewer, env.ID)
	if err != nil {
		return nil, err
	}
	createdBy := false
	if run.CreatedBy != "" && run.CreatedBy == viewer.DisplayName() {
		createdBy = true
	}
	switch {
	case mine:
		v.WhyNot = "You approved this plan."
	case !rule.MayApprove(viewer.ID, role):
		v.WhyNot = "You are not an approver of " + env.Name + "."
	case createdBy && !rule.SelfApproval:
		v.WhyNot = "You started this deploy: someone else must approve it."
	default:
		v.CanApprove = true
	}
	v.CanBypass = viewer.IsAdmin && rule.Bypass == store.BypassAdmins
	return v, nil
}
