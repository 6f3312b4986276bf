package handlers

import (
	"net/http"
	"slices"
	"time"

	"github.com/skali-dev/studio/api"
	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

func (h *API) protection(r *http.Request, env *store.Environment) (api.Protection, error) {
	out := api.Protection{Approvers: []string{}, Wait: "0s", Expires: humanize.ManifestDuration(store.DefaultApprovalExpiry), Bypass: string(store.BypassNobody)}
	windows, err := h.DB.FreezeWindows(r.Context(), env.ID)
	if err != nil {
		return out, err
	}
	out.FreezeWindows = []runs.FreezeInput{}
	for _, w := range windows {
		out.FreezeWindows = append(out.FreezeWindows, runs.FreezeInputOf(w))
	}
	if fz, ok := runs.FrozenAt(windows, time.Now()); ok {
		u := fz.Until.UTC()
		out.FrozenUntil = &u
	}
	rule, err := h.DB.ProtectionRule(r.Context(), env.ID)
	if err != nil || rule == nil {
		return out, err
	}
	members, err := h.DB.Members(r.Context(), env.ID)
	if err != nil {
		return out, err
	}
	out.Protected, out.Approvals, out.SelfApproval = true, rule.Approvals, rule.SelfApproval
	out.Wait, out.Expires, out.Bypass = humanize.ManifestDuration(rule.Wait), humanize.ManifestDuration(rule.Expires), string(rule.Bypass)
	if rule.ApproverRole != store.RoleNone {
		out.Approvers = append(out.Approvers, string(rule.ApproverRole))
	}
	for _, m := range members {
		if slices.Contains(rule.ApproverUsers, m.UserID) {
			out.Approvers = append(out.Approvers, m.Email)
		}
	}
	return out, nil
}

// ShowProtection answers the environment's rule (admins).
func (h *API) ShowProtection(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	out, err := h.protection(r, env)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, out)
}

// SetProtection sets the environment's rule (admins): PUT, 200 with it.
func (h *API) SetProtection(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	var in ProtectionInput
	if err := readJSON(r, &in); err != nil {
		return err
	}
	var windows []store.FreezeWindow
	if in.FreezeWindows != nil {
		// Checked before anything is stored: a bad window changes nothing.
		if windows, err = runs.CheckFreezeWindows(*in.FreezeWindows); err != nil {
			WriteProblem(w, r, api.Problem{Status: http.StatusUnprocessableEntity, Title: "The freeze windows were refused", Detail: err.Error()})
			return nil
		}
	}
	p := &Protection{Base: h.Base}
	if in.Approvals != 0 || in.FreezeWindows == nil {
		var rule store.ProtectionRule
		rule, err = p.rule(r.Context(), env, in)
		if err == nil {
			err = putProtection(r.Context(), h.Runs, h.DB, ActorOf(r), env, rule)
		}
	}
	if err == nil && in.FreezeWindows != nil {
		err = h.Runs.PutFreezeWindows(r.Context(), ActorOf(r), env, windows)
	}
	if apperr.CodeOf(err) == apperr.Invalid {
		WriteProblem(w, r, api.Problem{Status: http.StatusUnprocessableEntity, Title: "The rule was refused", Detail: apperr.Message(err)})
		return nil
	}
	if err != nil {
		return err
	}
	out, err := h.protection(r, env)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, out)
}

func (h *API) decision(r *http.Request) (api.Decision, error) {
	var d api.Decision
	if r.ContentLength == 0 {
		return d, nil
	}
	return d, readJSON(r, &d)
}

// ApproveRun approves a waiting run's plan (the digest, when sent, must be
// the run's): 200 with the run.
func (h *API) ApproveRun(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	run, err := h.run(r, env)
	if err != nil {
		return err
	}
	d, err := h.decision(r)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	if _, err := svc.Approve(r.Context(), ActorOf(r), env, run.ID, d.Digest, d.Comment); err != nil {
		return err
	}
	if run, err = h.DB.RunByID(r.Context(), run.ID); err != nil {
		return err
	}
	return h.writeRun(w, r, http.StatusOK, env, run)
}

// RejectRun rejects a waiting run with a comment: 200 with the run.
func (h *API) RejectRun(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	run, err := h.run(r, env)
	if err != nil {
		return err
	}
	d, err := h.decision(r)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	if d.Comment == "" {
		WriteProblem(w, r, api.Problem{Status: http.StatusUnprocessableEntity, Title: "The rejection was refused", Detail: "Say why you reject this deploy.", Field: "comment"})
		return nil
	}
	if err := svc.Reject(r.Context(), ActorOf(r), env, run.ID, d.Comment); err != nil {
		return err
	}
	if run, err = h.DB.RunByID(r.Context(), run.ID); err != nil {
		return err
	}
	return h.writeRun(w, r, http.StatusOK, env, run)
}

// apiApproval is the approval a run waits for (nil when none).
func (h *API) apiApproval(r *http.Request, env *store.Environment, run *store.Run, cps []store.Checkpoint) (*api.Approval, error) {
	v, err := ApprovalView(r.Context(), h.DB, env, run, cps, nil)
	if err != nil || v == nil || !v.Waiting || v.Started {
		// Approved (or bypassed): the run no longer waits for approval; its
		// reason says when it starts (a rule's wait, a freeze window).
		return nil, err
	}
	out := &api.Approval{Digest: v.Digest, Approvals: v.Count, Needed: v.Needed, Approvers: append([]string{}, v.Approvers...),
		Approved: []string{}, Changed: append([]string{}, v.Changed...)}
	for _, a := range v.Approved {
		out.Approved = append(out.Approved, a.Name)
	}
	return out, nil
}
