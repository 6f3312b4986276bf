package runs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/skali-dev/studio/store"
)

// KindApproval is the first checkpoint of a deploy of a protected
// environment: it waits for approval of the plan, and when the run starts
// it checks the plan is still the one approved.
const KindApproval = "approval"

// ApprovalPlan is what an approval is of: the revision, every value
// version the deploy will use, each destructive change and each public
// value confirmed, and the services deployed. Names and numbers only,
// never a value.
type ApprovalPlan struct {
	Revision     int             `json:"revision"`
	FromRevision int             `json:"fromRevision,omitempty"`
	Values       []ApprovalValue `json:"values,omitempty"`
	Destructive  []string        `json:"destructive,omitempty"`
	PublicValues []string        `json:"publicValues,omitempty"`
	Services     []string        `json:"services,omitempty"`
	Rollback     int64           `json:"rollback,omitempty"`
}

// ApprovalValue is one value version a deploy uses.
type ApprovalValue struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
}

// ApprovalDetail is an Approval checkpoint's record.
type ApprovalDetail struct {
	Digest string       `json:"digest"`
	Plan   ApprovalPlan `json:"plan"`
	// Changed says what changed since the plan earlier approvals were of,
	// which voided them ("value DB_PASSWORD: version 2 → 3").
	Changed []string `json:"changed,omitempty"`
}

// Digest is the plan's digest: a hash of its canonical JSON.
func (p ApprovalPlan) Digest() string {
	b, _ := json.Marshal(p)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// approvalPlan is the approval plan of a deploy plan.
func (s *Service) approvalPlan(ctx context.Context, env *store.Environment, dp *DeployPlan) (ApprovalPlan, error) {
	p := ApprovalPlan{Revision: dp.To.Number, Destructive: slices.Sorted(slices.Values(dp.Destructive)), PublicValues: dp.PublicValueNames()}
	if dp.From != nil {
		p.FromRevision = dp.From.Number
	}
	def := dp.To.Definition
	for _, n := range slices.Sorted(maps.Keys(def.Applications)) {
		p.Services = append(p.Services, "application "+n)
	}
	for _, n := range slices.Sorted(maps.Keys(def.Databases)) {
		p.Services = append(p.Services, "database "+n)
	}
	for _, n := range slices.Sorted(maps.Keys(def.Buckets)) {
		p.Services = append(p.Services, "bucket "+n)
	}
	if rp := dp.Release; rp != nil && rp.Recorded {
		p.Rollback = rp.RunID
		for _, nv := range rp.values {
			p.Values = append(p.Values, ApprovalValue{Name: nv.Name, Version: nv.Version})
		}
	} else {
		stored, err := s.DB.StoredValues(ctx, env.ID)
		if err != nil {
			return p, err
		}
		for _, v := range stored {
			p.Values = append(p.Values, ApprovalValue{Name: v.Name, Version: v.Version})
		}
	}
	slices.SortFunc(p.Values, func(a, b ApprovalValue) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return p, nil
}

// PlanChanges says, in words, what differs between the plan approved (was)
// and the plan now.
func PlanChanges(was, now ApprovalPlan) []string {
	var out []string
	if was.Revision != now.Revision {
		out = append(out, fmt.Sprintf("revision %d instead of %d", now.Revision, was.Revision))
	}
	if was.FromRevision != now.FromRevision {
		out = append(out, fmt.Sprintf("the active revision is now %d (was %d)", now.FromRevision, was.FromRevision))
	}
	old := map[string]int{}
	for _, v := range was.Values {
		old[v.Name] = v.Version
	}
	seen := map[string]bool{}
	for _, v := range now.Values {
		seen[v.Name] = true
		switch o, ok := old[v.Name]; {
		case !ok:
			out = append(out, fmt.Sprintf("value %s was set (version %d)", v.Name, v.Version))
		case o != v.Version:
			out = append(out, fmt.Sprintf("value %s changed: version %d → %d", v.Name, o, v.Version))
		}
	}
	for _, v := range was.Values {
		if !seen[v.Name] {
			out = append(out, fmt.Sprintf("value %s was deleted", v.Name))
		}
	}
	for _, sv := range was.Services {
		if !slices.Contains(now.Services, sv) {
			out = append(out, sv+" removed")
		}
	}
	for _, sv := range now.Services {
		if !slices.Contains(was.Services, sv) {
			out = append(out, sv+" added")
		}
	}
	for _, d := range now.Destructive {
		if !slices.Contains(was.Destructive, d) {
			out = append(out, "new destructive change: "+d)
		}
	}
	for _, v := range now.PublicValues {
		if !slices.Contains(was.PublicValues, v) {
			out = append(out, "now publishes "+v)
		}
	}
	if len(out) == 0 && was.Digest() != now.Digest() {
		out = append(out, "the plan changed")
	}
	return out
}

// approvalPlanOfRun plans the run's deploy again, as it would start now.
func (s *Service) approvalPlanOfRun(ctx context.Context, env *store.Environment, run *store.Run) (ApprovalPlan, error) {
	var dp *DeployPlan
	var err error
	if run.ReleaseOf != nil {
		dp, err = s.PlanRollback(ctx, env, *run.ReleaseOf)
	} else {
		dp, err = s.PlanDeploy(ctx, env, run.Revision)
	}
	if err != nil {
		return ApprovalPlan{}, err
	}
	return s.approvalPlan(ctx, env, dp)
}

// ApprovalArgs is the River job that ends a request for approval when it
// expires.
type ApprovalExpiryArgs struct {
	RunID int64 `json:"run_id"`
}

// Kind implements river.JobArgs.
func (ApprovalExpiryArgs) Kind() string { return "studio_approval_expiry" }

type approvalExpiryWorker struct {
	river.WorkerDefaults[ApprovalExpiryArgs]
	service *Service
}

func (w *approvalExpiryWorker) Work(ctx context.Context, job *river.Job[ApprovalExpiryArgs]) error {
	_, err := w.service.DB.ExpireApproval(ctx, job.Args.RunID)
	return err
}

// enqueueExpiry inserts the expiry job of a waiting run.
func (s *Service) enqueueExpiry(expires time.Duration) func(ctx context.Context, tx pgx.Tx, runID int64) error {
	if s.river == nil {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, runID int64) error {
		_, err := s.river.InsertTx(ctx, tx, ApprovalExpiryArgs{RunID: runID}, &river.InsertOpts{ScheduledAt: s.Now().Add(expires), MaxAttempts: 25})
		return err
	}
}

// enqueueAt inserts a deploy run's job to run at at.
func (s *Service) enqueueAt() func(ctx context.Context, tx pgx.Tx, runID int64, at time.Time) (int64, error) {
	if s.river == nil {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, runID int64, at time.Time) (int64, error) {
		o := runInsertOpts("deploy")
		if at.After(s.Now()) {
			o.ScheduledAt = at
		}
		res, err := s.river.InsertTx(ctx, tx, RunArgs{RunID: runID}, o)
		if err != nil {
			return 0, err
		}
		return res.Job.ID, nil
	}
}

// starter starts a run whose rule is met, inside the transaction that met
// it: its job, scheduled after the rule's wait or, when a freeze window is
// open then, at the window's end (windows read in that transaction).
func (s *Service) starter() store.Starter {
	return store.Starter{Enqueue: s.enqueueAt(), FrozenUntil: func(windows []store.FreezeWindow, at time.Time) (time.Time, string) {
		if f, ok := FrozenAt(windows, at); ok {
			return f.Until, "Frozen until " + FreezeClock(f.Until, s.Now())
		}
		return time.Time{}, ""
	}, Cancel: s.cancelJob()}
}

// cancelJob cancels a run's job that has not run yet, inside tx.
func (s *Service) cancelJob() func(ctx context.Context, tx pgx.Tx, jobID int64) error {
	if s.river == nil {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, jobID int64) error {
		if _, err := s.river.JobCancelTx(ctx, tx, jobID); err != nil && !errors.Is(err, river.ErrNotFound) {
			return err
		}
		return nil
	}
}

// PutFreezeWindows replaces the environment's windows; the runs scheduled
// to start later move, in the same transaction, to the start the new
// windows give (a freeze lifted starts them at once, one extended or added
// holds them longer; see store.DB.PutFreezeWindowsMoving).
func (s *Service) PutFreezeWindows(ctx context.Context, a store.Actor, env *store.Environment, windows []store.FreezeWindow) error {
	return s.DB.PutFreezeWindowsMoving(ctx, a, env, windows, s.starter())
}

// Approve records a's approval of the waiting run's plan (digest: the one
// the approver read; "" approves the current one); the approval that
// meets the rule inserts the run's job.
func (s *Service) Approve(ctx context.Context, a store.Actor, env *store.Environment, runID int64, digest, comment string) (*store.ApprovalOutcome, error) {
	return s.DB.ApproveRun(ctx, a, env, runID, store.ApproveRequest{Digest: digest, Comment: comment, Start: s.starter()})
}

// Bypass starts the waiting run without its approvals: installation
// admins, when the rule lets them, with a typed reason. Freeze windows
// still apply (overriding one is the deploy's freeze override).
func (s *Service) Bypass(ctx context.Context, a store.Actor, env *store.Environment, runID int64, reason string) (*store.ApprovalOutcome, error) {
	return s.DB.ApproveRun(ctx, a, env, runID, store.ApproveRequest{Comment: reason, Bypass: true, Start: s.starter()})
}

// DeleteProtection removes the environment's rule; the runs waiting for
// approval start in the same transaction.
func (s *Service) DeleteProtection(ctx context.Context, a store.Actor, env *store.Environment) error {
	return s.DB.DeleteProtectionRule(ctx, a, env, s.starter())
}

// PutProtection sets the environment's rule; waiting runs whose approvals
// meet it (it asks for fewer) start in the same transaction.
func (s *Service) PutProtection(ctx context.Context, a store.Actor, env *store.Environment, rule store.ProtectionRule) error {
	return s.DB.PutProtectionRule(ctx, a, env, rule, s.starter())
}

// Reject ends the waiting run as rejected, with a's comment.
func (s *Service) Reject(ctx context.Context, a store.Actor, env *store.Environment, runID int64, comment string) error {
	return s.DB.RejectRun(ctx, a, env, runID, comment)
}

// ApprovalOf decodes the Approval checkpoint of a run's checkpoints (nil
// when the run has none).
func ApprovalOf(cps []store.Checkpoint) (*store.Checkpoint, *ApprovalDetail) {
	for i := range cps {
		if cps[i].Kind == KindApproval {
			var d struct {
				Approval *ApprovalDetail `json:"approval"`
			}
			_ = json.Unmarshal(cps[i].Detail, &d)
			if d.Approval == nil {
				d.Approval = &ApprovalDetail{}
			}
			return &cps[i], d.Approval
		}
	}
	return nil, nil
}

// stepApproval is the Approval checkpoint's step: the run starts only
// when the plan it plans now is the one its approvals were of. Otherwise
// the approvals are void, and the run waits again for approval of the
// plan as it is now, its checkpoint saying what changed.
func (r *Runner) stepApproval(ctx context.Context, rc *runContext, cp store.Checkpoint, d CheckpointDetail) (stepResult, error) {
	if r.Replan == nil {
		return stepResult{status: store.CheckpointSucceeded, detail: d}, nil
	}
	now, err := r.Replan(ctx, rc.env, rc.run)
	if err != nil {
		return stepResult{}, err
	}
	digest := now.Digest()
	if digest == rc.run.PlanDigest {
		return stepResult{status: store.CheckpointSucceeded, detail: d}, nil
	}
	was := ApprovalPlan{}
	if d.Approval != nil {
		was = d.Approval.Plan
	}
	changed := PlanChanges(was, now)
	nd := d
	nd.Approval = &ApprovalDetail{Digest: digest, Plan: now, Changed: changed}
	detail, err := json.Marshal(nd)
	if err != nil {
		return stepResult{}, err
	}
	words := joinNames(changed)
	ok, err := r.DB.VoidApprovals(ctx, rc.run.ID, rc.lease, cp.Position, digest, detail, words)
	if err != nil {
		return stepResult{}, err
	}
	if !ok {
		return stepResult{}, ErrTakenOver
	}
	r.Logger.Info("approvals void: the plan changed", "run", rc.run.ID, "changed", words)
	return stepResult{status: statusVoided}, nil
}

// statusVoided is the outcome of an Approval step whose approvals the
// changed plan voided: the run waits for approval again, with no job.
const statusVoided = "voided"
