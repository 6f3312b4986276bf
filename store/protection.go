package store

import (
	"context"
	"errors"
	"fmt"
	"github.com/skali-dev/studio/humanize"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/events/payload"
)

// Bypass says who may start a deploy of a protected environment without
// its approvals.
type Bypass string

// Who may bypass a protection rule.
const (
	BypassNobody Bypass = "nobody"
	BypassAdmins Bypass = "admins"
)

// ProtectionRule is what a deploy of an environment needs before it runs.
type ProtectionRule struct {
	EnvironmentID int64
	// Approvals is how many different people must approve (1–6).
	Approvals int
	// ApproverRole: every member with at least this role may approve
	// (RoleNone: only ApproverUsers).
	ApproverRole  Role
	ApproverUsers []int64
	// SelfApproval lets the person who started the deploy approve it.
	SelfApproval bool
	// Wait is how long after the last approval the run starts; Expires
	// how long a request waits before it ends.
	Wait, Expires time.Duration
	Bypass        Bypass
	UpdatedBy     string
	UpdatedAt     time.Time
}

// DefaultApprovalExpiry is how long a request for approval waits unless
// the rule says otherwise.
const DefaultApprovalExpiry = 7 * 24 * time.Hour

// ProtectionRule returns the environment's rule, nil when it has none.
func (db *DB) ProtectionRule(ctx context.Context, envID int64) (*ProtectionRule, error) {
	return protectionRuleTx(ctx, db.Pool, envID)
}

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func protectionRuleTx(ctx context.Context, q queryRower, envID int64) (*ProtectionRule, error) {
	var r ProtectionRule
	var role, bypass string
	var wait, expires int64
	err := q.QueryRow(ctx, `SELECT environment_id, approvals, approver_role, approver_users, self_approval, wait_seconds, expires_seconds, bypass,
		`+displayNameOf("updated_by")+`, updated_at FROM protection_rules WHERE environment_id = $1`, envID).
		Scan(&r.EnvironmentID, &r.Approvals, &role, &r.ApproverUsers, &r.SelfApproval, &wait, &expires, &bypass, &r.UpdatedBy, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: protection rule: %w", err)
	}
	r.ApproverRole, r.Bypass = Role(role), Bypass(bypass)
	r.Wait, r.Expires = time.Duration(wait)*time.Second, time.Duration(expires)*time.Second
	return &r, nil
}

// MayApprove reports whether a member with role (and user id) may approve
// under the rule.
func (r *ProtectionRule) MayApprove(userID int64, role Role) bool {
	if slices.Contains(r.ApproverUsers, userID) {
		return role != RoleNone
	}
	return r.ApproverRole != RoleNone && role.Includes(r.ApproverRole)
}

// Approvers lists the environment's members who may approve under r.
func (db *DB) Approvers(ctx context.Context, env *Environment, r *ProtectionRule) ([]Member, error) {
	members, err := db.Members(ctx, env.ID)
	if err != nil {
		return nil, err
	}
	var out []Member
	for _, m := range members {
		if !m.Pending && r.MayApprove(m.UserID, m.Role) {
			out = append(out, m)
		}
	}
	return out, nil
}

// PutProtectionRule sets the environment's rule, with its audit record. A
// rule asking for more approvals than the environment has approvers is
// refused with that sentence. Runs waiting for approval whose approvals
// meet the new rule (it asks for fewer) start, in the same transaction,
// through start (as the approval that meets a rule starts its run).
func (db *DB) PutProtectionRule(ctx context.Context, a Actor, env *Environment, r ProtectionRule, start Starter) error {
	switch {
	case r.Approvals < 1 || r.Approvals > 6:
		return apperr.Errorf(apperr.Invalid, "Required approvals must be between 1 and 6.")
	case r.Wait < 0 || r.Wait > 30*24*time.Hour:
		return apperr.Errorf(apperr.Invalid, "The wait after approval must be between 0 and 30 days.")
	case r.Expires <= 0 || r.Expires > 90*24*time.Hour:
		return apperr.Errorf(apperr.Invalid, "The expiry must be between 1 second and 90 days.")
	case r.Bypass != BypassNobody && r.Bypass != BypassAdmins:
		return apperr.Errorf(apperr.Invalid, "Choose who may bypass: nobody or installation admins.")
	case r.ApproverRole != RoleNone && r.ApproverRole != RoleDeployer && r.ApproverRole != RoleAdmin:
		return apperr.Errorf(apperr.Invalid, "Approvers by role are deployers or admins.")
	case r.ApproverRole == RoleNone && len(r.ApproverUsers) == 0:
		return apperr.Errorf(apperr.Invalid, "Name the approvers: members, or a role.")
	}
	members, err := db.Members(ctx, env.ID)
	if err != nil {
		return err
	}
	for _, id := range r.ApproverUsers {
		if !slices.ContainsFunc(members, func(m Member) bool { return m.UserID == id }) {
			return apperr.Errorf(apperr.Invalid, "Every named approver must be a member of %s.", env.Name)
		}
	}
	n := 0
	for _, m := range members {
		if r.MayApprove(m.UserID, m.Role) {
			n++
		}
	}
	if n < r.Approvals {
		return apperr.Errorf(apperr.Invalid, "This rule asks for %d approvals, but %s has only %d %s who may approve.",
			r.Approvals, env.Name, n, plural(n, "member", "members"))
	}
	slices.Sort(r.ApproverUsers)
	r.ApproverUsers = slices.Compact(r.ApproverUsers)
	return db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO protection_rules (environment_id, approvals, approver_role, approver_users, self_approval, wait_seconds, expires_seconds, bypass, updated_by, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			ON CONFLICT (environment_id) DO UPDATE SET approvals = $2, approver_role = $3, approver_users = $4, self_approval = $5,
			    wait_seconds = $6, expires_seconds = $7, bypass = $8, updated_by = $9, updated_at = $10`,
			env.ID, r.Approvals, string(r.ApproverRole), append([]int64{}, r.ApproverUsers...), r.SelfApproval,
			int64(r.Wait/time.Second), int64(r.Expires/time.Second), string(r.Bypass), a.userID(), db.Now()); err != nil {
			return err
		}
		e := a.event("protection.changed")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, env.Name
		e.Detail = map[string]any{"approvals": r.Approvals, "approver_role": string(r.ApproverRole), "approver_users": len(r.ApproverUsers),
			"self_approval": r.SelfApproval, "wait": r.Wait.String(), "expires": r.Expires.String(), "bypass": string(r.Bypass)}
		if err := auditTx(ctx, tx, e); err != nil {
			return err
		}
		return db.startMetRunsTx(ctx, tx, a, env, &r, start)
	})
}

// startMetRunsTx starts the environment's runs waiting for approval whose
// approvals meet rule (just changed; Approvals 0: the rule was removed), each with its run event, audit
// record and approval.granted webhook event.
func (db *DB) startMetRunsTx(ctx context.Context, tx pgx.Tx, a Actor, env *Environment, rule *ProtectionRule, start Starter) error {
	type waiting struct {
		id        int64
		createdBy *int64
		digest    string
	}
	rows, _ := tx.Query(ctx, `SELECT id, created_by, plan_digest FROM runs
		WHERE environment_id = $1 AND status = 'waiting' AND plan_digest <> '' AND job_id IS NULL ORDER BY id FOR UPDATE`, env.ID)
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (waiting, error) {
		var w waiting
		err := row.Scan(&w.id, &w.createdBy, &w.digest)
		return w, err
	})
	if err != nil {
		return err
	}
	for _, w := range runs {
		n, err := countApprovalsTx(ctx, tx, env.ID, w.id, w.digest, rule, w.createdBy)
		if err != nil {
			return err
		}
		if n < rule.Approvals {
			continue
		}
		at, reason, err := db.startMetRunTx(ctx, tx, env.ID, w.id, rule, start)
		if err != nil {
			return err
		}
		summary := fmt.Sprintf("Approved: starting (the rule now asks for %d %s)", rule.Approvals, plural(rule.Approvals, "approval", "approvals"))
		if rule.Approvals == 0 {
			summary = fmt.Sprintf("Starting: %s is no longer protected", env.Name)
		}
		if _, err := appendRunEvent(ctx, tx, w.id, nil, runPayload(RunWaiting, reason, summary)); err != nil {
			return err
		}
		e := a.event("approval.granted")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, fmt.Sprintf("run %d", w.id)
		e.Detail = map[string]any{"digest": w.digest, "approvals": n, "needed": rule.Approvals, "started": true,
			"starts_at": at.UTC().Format(time.RFC3339), "by_rule_change": true}
		if err := auditTx(ctx, tx, e); err != nil {
			return err
		}
		if err := db.recordApprovalWebhook(ctx, tx, env.ID, w.id, "approval.granted", n, rule.Approvals); err != nil {
			return err
		}
	}
	return nil
}

// DeleteProtectionRule removes the environment's rule (deploys no longer
// wait), with its audit record. The runs that wait for approval start, in
// the same transaction, through start (freeze windows still apply).
func (db *DB) DeleteProtectionRule(ctx context.Context, a Actor, env *Environment, start Starter) error {
	return db.InTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM protection_rules WHERE environment_id = $1`, env.ID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		e := a.event("protection.removed")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, env.Name
		if err := auditTx(ctx, tx, e); err != nil {
			return err
		}
		return db.startMetRunsTx(ctx, tx, a, env, &ProtectionRule{Approvals: 0}, start)
	})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Approval is one person's approval of a run's plan.
type Approval struct {
	UserID    int64
	Name      string
	Digest    string
	Comment   string
	CreatedAt time.Time
}

// Approvals lists the run's approvals, oldest first.
func (db *DB) Approvals(ctx context.Context, runID int64) ([]Approval, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT a.user_id, `+displayNameOf("a.user_id")+`, a.digest, a.comment, a.created_at
		FROM run_approvals a WHERE a.run_id = $1 ORDER BY a.created_at, a.user_id`, runID)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Approval, error) {
		var ap Approval
		err := row.Scan(&ap.UserID, &ap.Name, &ap.Digest, &ap.Comment, &ap.CreatedAt)
		return ap, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: approvals: %w", err)
	}
	return out, nil
}

// ApprovalOutcome is what an approval changed.
type ApprovalOutcome struct {
	// Count approvals of the run's current digest, of Needed.
	Count, Needed int
	// Started: this approval met the rule and the run's job is inserted.
	Started bool
	// StartsAt is when the job runs (the rule's wait after now).
	StartsAt time.Time
}

// ApproveRequest is an approval (or a bypass) of a waiting run.
type ApproveRequest struct {
	// Digest is the plan digest the approver saw: an approval of another
	// plan than the run's current one is refused.
	Digest  string
	Comment string
	// Bypass starts the run without its approvals: installation admins
	// only, when the rule lets them, with a typed reason (Comment).
	Bypass bool
	// Start inserts the job of the run the approval starts.
	Start Starter
}

// Starter starts a waiting run whose rule is met, inside the transaction
// that met it (an approval, a bypass, a rule that asks for fewer).
type Starter struct {
	// Enqueue inserts the run's job, to run at the given time (nil: the
	// run's job_id stays unset, for tests of the store alone).
	Enqueue func(ctx context.Context, tx pgx.Tx, runID int64, at time.Time) (int64, error)
	// FrozenUntil is when the freeze windows open at a time end (zero: none
	// is open then), and the run's reason meanwhile ("Frozen until Mon
	// 06:00 UTC"); the windows are read in the transaction.
	FrozenUntil func(windows []FreezeWindow, at time.Time) (time.Time, string)
	// Cancel cancels a job inserted by Enqueue that has not run yet, when
	// a change of the windows moves its run (nil: runs are not moved).
	Cancel func(ctx context.Context, tx pgx.Tx, jobID int64) error
}

// approvedReason is the reason of an approved run that starts at at,
// after its rule's wait.
func approvedReason(at, now time.Time) string {
	return fmt.Sprintf("Approved: starts at %s, after the rule's wait", humanize.Weekday(at, now))
}

// startMetRunTx schedules a run whose rule is met: after the rule's wait,
// or, when a freeze window is open then, at its end. A run that does not
// start at once says until when in its reason (returned). The windows are read
// in tx under a share lock of the environment's row, which a change of
// the windows (PutFreezeWindows) waits for: the run is scheduled by the
// windows as they are when its transaction commits.
func (db *DB) startMetRunTx(ctx context.Context, tx pgx.Tx, envID, runID int64, rule *ProtectionRule, s Starter) (time.Time, string, error) {
	now := db.Now()
	at, reason := now.Add(rule.Wait), ""
	if rule.Wait > 0 {
		reason = approvedReason(at, now)
	}
	if s.FrozenUntil != nil {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM environments WHERE id = $1 FOR SHARE`, envID); err != nil {
			return at, "", err
		}
		windows, err := freezeWindows(ctx, tx, envID)
		if err != nil {
			return at, "", err
		}
		if until, why := s.FrozenUntil(windows, at); until.After(at) {
			at, reason = until, why
		}
	}
	if s.Enqueue != nil {
		jobID, err := s.Enqueue(ctx, tx, runID, at)
		if err != nil {
			return at, "", err
		}
		if _, err := tx.Exec(ctx, `UPDATE runs SET job_id = $2, reason = $3, not_before = $4 WHERE id = $1`, runID, jobID, reason, now.Add(rule.Wait)); err != nil {
			return at, "", err
		}
	}
	return at, reason, nil
}

// countApprovalsTx counts the approvals of the run's digest given by
// people who may approve under rule now (a rule changed since: an
// approval by someone it no longer names, or by the deploy's starter when
// it no longer allows self-approval, does not count).
func countApprovalsTx(ctx context.Context, tx pgx.Tx, envID, runID int64, digest string, rule *ProtectionRule, createdBy *int64) (int, error) {
	rows, _ := tx.Query(ctx, `SELECT a.user_id, coalesce(m.role, CASE WHEN u.is_admin THEN 'admin' ELSE '' END)
		FROM run_approvals a JOIN users u ON u.id = a.user_id
		LEFT JOIN memberships m ON m.environment_id = $2 AND m.user_id = a.user_id
		WHERE a.run_id = $1 AND a.digest = $3`, runID, envID, digest)
	n := 0
	var userID int64
	var role string
	_, err := pgx.ForEachRow(rows, []any{&userID, &role}, func() error {
		if !rule.MayApprove(userID, Role(role)) {
			return nil
		}
		if !rule.SelfApproval && createdBy != nil && *createdBy == userID {
			return nil
		}
		n++
		return nil
	})
	return n, err
}

// lockWaitingRun locks a run waiting for approval and returns its creator
// and digest; a run that waits for nothing (any more) is a conflict.
func lockWaitingRun(ctx context.Context, tx pgx.Tx, env *Environment, runID int64) (createdBy *int64, digest string, err error) {
	var status string
	var jobID *int64
	err = tx.QueryRow(ctx, `SELECT status, created_by, plan_digest, job_id FROM runs WHERE id = $1 AND environment_id = $2 FOR UPDATE`, runID, env.ID).
		Scan(&status, &createdBy, &digest, &jobID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", apperr.Errorf(apperr.NotFound, "No such run.")
	}
	if err != nil {
		return nil, "", err
	}
	if status != RunWaiting || digest == "" || jobID != nil {
		return nil, "", apperr.Errorf(apperr.Conflict, "Run %d is not waiting for approval (it is %s).", runID, status)
	}
	return createdBy, digest, nil
}

// mayDecide checks that a may approve or reject the run under the rule.
func (db *DB) mayDecide(ctx context.Context, tx pgx.Tx, a Actor, env *Environment, rule *ProtectionRule, createdBy *int64) error {
	if a.User == nil {
		return apperr.Errorf(apperr.Forbidden, "Sign in to approve.")
	}
	var role string
	err := tx.QueryRow(ctx, `SELECT role FROM memberships WHERE environment_id = $1 AND user_id = $2`, env.ID, a.User.ID).Scan(&role)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if a.User.IsAdmin && role == "" {
		role = string(RoleAdmin)
	}
	if !rule.MayApprove(a.User.ID, Role(role)) {
		return apperr.Errorf(apperr.Forbidden, "You are not an approver of %s.", env.Name)
	}
	if !rule.SelfApproval && createdBy != nil && *createdBy == a.User.ID {
		return apperr.Errorf(apperr.Forbidden, "You started this deploy: someone else must approve it.")
	}
	return nil
}

// ApproveRun records a's approval of the run's plan, in one transaction
// with its audit record; the approval that meets the environment's rule
// also inserts the run's job (Enqueue, scheduled after the rule's wait).
// One person approves a run once; concurrent approvals of different
// people each count once (the run's row lock orders them).
func (db *DB) ApproveRun(ctx context.Context, a Actor, env *Environment, runID int64, req ApproveRequest) (*ApprovalOutcome, error) {
	var out ApprovalOutcome
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		createdBy, digest, err := lockWaitingRun(ctx, tx, env, runID)
		if err != nil {
			return err
		}
		rule, err := protectionRuleTx(ctx, tx, env.ID)
		if err != nil {
			return err
		}
		if rule == nil {
			rule = &ProtectionRule{Approvals: 1, ApproverRole: RoleAdmin, SelfApproval: true, Bypass: BypassNobody}
		}
		if req.Digest != "" && req.Digest != digest {
			return apperr.Errorf(apperr.Conflict, "The plan of run %d changed since you read it. Read it again before you approve.", runID)
		}
		action := "approval.granted"
		if req.Bypass {
			if a.User == nil || !a.User.IsAdmin || rule.Bypass != BypassAdmins {
				return apperr.Errorf(apperr.Forbidden, "Only installation admins may bypass the approvals of %s, and only when its rule allows it.", env.Name)
			}
			if len([]rune(req.Comment)) < 3 {
				return apperr.Errorf(apperr.Invalid, "Type why you bypass the approvals.")
			}
			action = "approval.bypassed"
		} else {
			if err := db.mayDecide(ctx, tx, a, env, rule, createdBy); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `INSERT INTO run_approvals (run_id, user_id, digest, comment, created_at) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (run_id, user_id) DO NOTHING`, runID, a.User.ID, digest, req.Comment, db.Now())
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return apperr.Errorf(apperr.Conflict, "You approved run %d already.", runID)
			}
		}
		if out.Count, err = countApprovalsTx(ctx, tx, env.ID, runID, digest, rule, createdBy); err != nil {
			return err
		}
		out.Needed = rule.Approvals
		reason := ""
		if out.Count >= out.Needed || req.Bypass {
			out.Started = true
			if out.StartsAt, reason, err = db.startMetRunTx(ctx, tx, env.ID, runID, rule, req.Start); err != nil {
				return err
			}
		}
		summary := fmt.Sprintf("Waiting for approval (%d of %d)", out.Count, out.Needed)
		if out.Started {
			summary = "Approved: starting"
		}
		if _, err := appendRunEvent(ctx, tx, runID, nil, runPayload(RunWaiting, reason, summary)); err != nil {
			return err
		}
		e := a.event(action)
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, fmt.Sprintf("run %d", runID)
		e.Detail = map[string]any{"digest": digest, "approvals": out.Count, "needed": out.Needed, "started": out.Started}
		if req.Bypass {
			e.Detail["reason"] = req.Comment
		}
		if err := auditTx(ctx, tx, e); err != nil {
			return err
		}
		return db.recordApprovalWebhook(ctx, tx, env.ID, runID, action, out.Count, out.Needed)
	})
	if err != nil {
		return nil, fmt.Errorf("store: approve run: %w", err)
	}
	return &out, nil
}

// RejectRun ends a run waiting for approval as rejected, with a's comment,
// its audit record and its events, in one transaction.
func (db *DB) RejectRun(ctx context.Context, a Actor, env *Environment, runID int64, comment string) error {
	if len([]rune(comment)) < 1 {
		return apperr.Errorf(apperr.Invalid, "Say why you reject this deploy.")
	}
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		createdBy, digest, err := lockWaitingRun(ctx, tx, env, runID)
		if err != nil {
			return err
		}
		rule, err := protectionRuleTx(ctx, tx, env.ID)
		if err != nil {
			return err
		}
		if rule == nil {
			rule = &ProtectionRule{Approvals: 1, ApproverRole: RoleAdmin, SelfApproval: true}
		}
		if err := db.mayDecide(ctx, tx, a, env, rule, createdBy); err != nil {
			return err
		}
		reason := fmt.Sprintf("Rejected by %s: %s", a.User.DisplayName(), comment)
		return endWaitingRunTx(ctx, tx, env.ID, runID, RunRejected, reason, db.Now(), func() error {
			e := a.event("approval.rejected")
			e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, fmt.Sprintf("run %d", runID)
			e.Detail = map[string]any{"digest": digest, "comment": comment}
			if err := auditTx(ctx, tx, e); err != nil {
				return err
			}
			return db.recordApprovalWebhook(ctx, tx, env.ID, runID, "approval.rejected", 0, rule.Approvals)
		})
	})
	if err != nil {
		return fmt.Errorf("store: reject run: %w", err)
	}
	return nil
}

// endWaitingRunTx ends a run that waits for approval with status (rejected
// or cancelled): its checkpoints not run, its run and environment events.
func endWaitingRunTx(ctx context.Context, tx pgx.Tx, envID, runID int64, status, reason string, now time.Time, more func() error) error {
	if _, err := tx.Exec(ctx, `UPDATE runs SET status = $2, reason = $3, finished_at = $4, lease_owner = NULL, lease_expires_at = NULL WHERE id = $1`,
		runID, status, reason, now); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE run_checkpoints SET status = 'not-run' WHERE run_id = $1 AND status IN ('pending', 'waiting')`, runID); err != nil {
		return err
	}
	if _, err := appendRunEvent(ctx, tx, runID, nil, runPayload(status, reason, reason)); err != nil {
		return err
	}
	runRef := &payload.RunRef{ID: runID, Kind: string(RunDeploy), Status: status}
	if _, err := appendEnvironmentEvent(ctx, tx, envID, &runID, payload.EnvironmentChanged{Type: payload.KindRunFinished, Run: runRef}); err != nil {
		return err
	}
	if more != nil {
		return more()
	}
	return nil
}

// ExpireApproval ends the run as cancelled when it still waits for
// approval (the expiry job); it reports whether it did.
func (db *DB) ExpireApproval(ctx context.Context, runID int64) (bool, error) {
	done := false
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var envID int64
		var status, digest string
		var jobID *int64
		err := tx.QueryRow(ctx, `SELECT environment_id, status, plan_digest, job_id FROM runs WHERE id = $1 FOR UPDATE`, runID).Scan(&envID, &status, &digest, &jobID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil || status != RunWaiting || digest == "" || jobID != nil {
			return err
		}
		done = true
		return endWaitingRunTx(ctx, tx, envID, runID, RunCancelled, "The request for approval expired: nobody approved it in time.", db.Now(), nil)
	})
	return done, err
}

// VoidApprovals is the runner's answer to a plan that changed between its
// approvals and its start: the run's approvals are deleted, it waits for
// approval of newDigest again with no job and no lease, and its Approval
// checkpoint (at position) gets detail (what changed). It reports false
// when the run is no longer held by lease.
func (db *DB) VoidApprovals(ctx context.Context, runID int64, lease string, position int, newDigest string, detail []byte, changed string) (bool, error) {
	ok := false
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var envID int64
		var project, env string
		err := tx.QueryRow(ctx, `SELECT r.environment_id, p.name, e.name FROM runs r JOIN environments e ON e.id = r.environment_id JOIN projects p ON p.id = e.project_id
			WHERE r.id = $1 AND r.lease_owner = $2 FOR UPDATE OF r`, runID, lease).Scan(&envID, &project, &env)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		var old string
		if err := tx.QueryRow(ctx, `SELECT plan_digest FROM runs WHERE id = $1`, runID).Scan(&old); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM run_approvals WHERE run_id = $1`, runID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE runs SET status = 'waiting', plan_digest = $2, job_id = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE id = $1`,
			runID, newDigest); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE run_checkpoints SET status = 'waiting', detail = $3 WHERE run_id = $1 AND position = $2`, runID, position, detail); err != nil {
			return err
		}
		pos := position
		ev := runPayload(RunWaiting, "", "Approvals void: "+changed)
		ev.Checkpoint = &payload.CheckpointState{Position: position, Kind: "approval", Name: "Approval", Status: CheckpointWaiting, Warning: changed}
		if _, err := appendRunEvent(ctx, tx, runID, &pos, ev); err != nil {
			return err
		}
		e := AuditEvent{Action: "approval.voided", Project: project, Environment: env, EnvironmentID: &envID, Target: fmt.Sprintf("run %d", runID),
			Detail: map[string]any{"digest": old, "new_digest": newDigest, "changed": changed}}
		if err := auditTx(ctx, tx, e); err != nil {
			return err
		}
		return db.recordApprovalWebhook(ctx, tx, envID, runID, "approval.requested", 0, 0)
	})
	return ok, err
}

// voidApprovalsOfTx deletes the pending approvals user gave on the
// environment's runs that still wait (their role changed or went).
func voidApprovalsOfTx(ctx context.Context, tx pgx.Tx, envID, userID int64) error {
	_, err := tx.Exec(ctx, `DELETE FROM run_approvals a USING runs r WHERE a.run_id = r.id AND r.environment_id = $1 AND a.user_id = $2
		AND r.status = 'waiting' AND r.job_id IS NULL AND r.plan_digest <> ''`, envID, userID)
	return err
}

// WaitingApproval is a run waiting for someone's approval, for the inbox.
type WaitingApproval struct {
	Run         Run
	Project     string
	Environment string
	Approvals   int
	Needed      int
}

// WaitingForApproval lists the runs, across the installation, that u may
// approve and has not approved yet, oldest first.
func (db *DB) WaitingForApproval(ctx context.Context, u *User) ([]WaitingApproval, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT `+runColumns+`, p.name, e.name,
		       (SELECT count(*) FROM run_approvals a WHERE a.run_id = r.id AND a.digest = r.plan_digest), pr.approvals
		FROM runs r JOIN environments e ON e.id = r.environment_id JOIN projects p ON p.id = e.project_id
		JOIN protection_rules pr ON pr.environment_id = r.environment_id
		LEFT JOIN memberships m ON m.environment_id = r.environment_id AND m.user_id = $1
		WHERE r.status = 'waiting' AND r.plan_digest <> '' AND r.job_id IS NULL
		  AND NOT EXISTS (SELECT 1 FROM run_approvals a WHERE a.run_id = r.id AND a.user_id = $1)
		  AND (pr.self_approval OR r.created_by IS DISTINCT FROM $1)
		  AND ((m.role IS NOT NULL AND $1 = ANY(pr.approver_users))
		       OR (pr.approver_role = 'deployer' AND (m.role IN ('deployer', 'admin') OR $2))
		       OR (pr.approver_role = 'admin' AND (m.role = 'admin' OR $2)))
		ORDER BY r.id`, u.ID, u.IsAdmin)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (WaitingApproval, error) {
		var w WaitingApproval
		err := row.Scan(append(w.Run.scanTargets(), &w.Project, &w.Environment, &w.Approvals, &w.Needed)...)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: waiting for approval: %w", err)
	}
	return out, nil
}

// RunJobScheduledAt is when the job of a run is due (a rule's wait after
// its approval); false when the run has no job, or River keeps no row.
func (db *DB) RunJobScheduledAt(ctx context.Context, runID int64) (time.Time, bool, error) {
	var at time.Time
	err := db.Pool.QueryRow(ctx, `SELECT j.scheduled_at FROM runs r JOIN river_job j ON j.id = r.job_id WHERE r.id = $1`, runID).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return at, false, nil
	}
	if err != nil {
		return at, false, fmt.Errorf("store: run job: %w", err)
	}
	return at, true, nil
}
