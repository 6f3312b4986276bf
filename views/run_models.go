package views

import (
	"strconv"
	"time"

	"github.com/skali-dev/studio/runs"
)

// RunView is a run as its header and the runs lists show it.
type RunView struct {
	Project, Env string
	ID           int64
	// Number counts the runs of the environment: what people read
	// ("#12 of production"); ID stays in URLs.
	Number int
	// LastSeq is the run's newest event when the page was rendered: the
	// page's live stream resumes after it.
	LastSeq int64
	// Kind is deploy, reconcile, backup or restore.
	Kind string
	// Status is the machine status (data-run-status); StatusText how it reads.
	Status, StatusText string
	Reason             string
	// StoppedAt is the anchor of the checkpoint a failed run failed at or a
	// cancelled run stopped at ("" when none), StoppedName its name.
	StoppedAt    string
	StoppedName  string
	Revision     int
	FromRevision int
	// Rollback: a deploy that rolls back (to an earlier release or an
	// older revision).
	Rollback  bool
	CreatedBy string
	Created   string
	Started   string
	// Duration is how long the run took, or for an unfinished run how long
	// it had run when the page was rendered; RunningSince (RFC 3339, UTC)
	// is then when it started, for the page's script to keep counting.
	Duration     string
	RunningSince string
	Deferred     int
	Warnings     int
	// Subject says what a reconcile run is about (a domain).
	Subject   string
	Summary   string
	Finished  bool
	CanCancel bool
	// CancelRequested: the run stops at its next safe point.
	CancelRequested bool
	// ExecutorLost: the process executing the unfinished run is gone
	// (since ExecutorLostAt, a clock time) and a live process resumes it.
	ExecutorLost   bool
	ExecutorLostAt string
	// RollbackHref, on the runs list, is the plan of rolling back to this
	// earlier successful deploy's release ("" when not offered).
	RollbackHref string
}

// CheckpointView is one checkpoint row of a run page.
type CheckpointView struct {
	Project, Env string
	RunID        int64
	Position     int
	Kind, Name   string
	Status       string
	Warning      string
	Started      string
	Duration     string
	// NotRun is a pending checkpoint of a finished run.
	NotRun  bool
	Details []Setting
	TLS     *TLSView
	Error   string
	// DNS says what to do about the checkpoint's domain while it is DNS
	// pending (the run page sets it from the certificate's current state).
	DNS *DNSPendingView
	// Timeline is when it started and ended and its bar across the run
	// (nil before it started); Log its log lines (nil when it has none).
	Timeline *TimelineView
	Log      *LogView
}

// TLSView is an Issue TLS certificate checkpoint's record.
type TLSView struct {
	Domain    string
	Route     string
	IssuedFor string
	// State reads like the environment page: issued, DNS pending, cert failed · retry at ...
	State string
	// Deferred: the domain did not point here when the checkpoint was
	// written (the page then says what to do about it).
	Deferred  bool
	Addresses []AddressView
	Attempts  []AttemptView
	// Wait is the current wait ("next retry at 14:03 UTC"), until WaitAt,
	// which the row counts down to from Now; Deadline, when set, is the
	// rollout deadline a waiting checkpoint gives up at.
	Wait             string
	WaitAt, Deadline time.Time
	Now              time.Time
	Fields           []Setting
}

// AddressView is one resolved address and what it answered.
type AddressView struct {
	Address, Answer string
	Here            bool
}

// AttemptView is one issuance attempt row.
type AttemptView struct {
	Number  int
	At      string
	Outcome string
	Reason  string
	Wait    string
}

// RunPage is the model of a run's page.
type RunPage struct {
	Chrome      Chrome
	Run         RunView
	Checkpoints []CheckpointView
	// LogFilter is the page's filter of log lines (?q=); LogLines how many
	// lines the run's log has; LogURL where it downloads as text.
	LogFilter string
	LogLines  int
	LogURL    string
	// EnvironmentSeq, when set, is the environment's newest event as the
	// page was read: a page that shows a DNS-pending domain also follows
	// the environment's stream after it, which says when the domain was
	// checked again (its countdown restarts).
	EnvironmentSeq *int64
	// Live is where the page's script fetches RunLiveParts again
	// (paths.RunLive); LiveOn the run statuses whose frames call for it
	// (RunLiveOn).
	Live, LiveOn string
	// Approval is the run's Approval checkpoint (a deploy of a protected
	// environment), nil for a run that needed none.
	Approval *ApprovalView
}

// RunLiveView is the run page's parts that depend on the reader: what to
// do about a DNS-pending domain under each TLS checkpoint, the approval
// card.
type RunLiveView struct {
	Checkpoints []CheckpointView
	Approval    *ApprovalView
}

// RunLiveOn is the run page's data-live-on: a run that needed approval
// reads its approval card again when a frame says it waits (an approval
// counted or voided, or the rule met) or has ended (rejected, expired);
// other runs' pages only when their script asks.
func RunLiveOn(approval *ApprovalView) string {
	if approval == nil {
		return ""
	}
	return "waiting rejected failed cancelled"
}

// RunsPage is the model of an environment's runs list.
type RunsPage struct {
	Chrome  Chrome
	Project string
	Env     string
	Runs    []RunView
	// LastEventSeq is the environment's newest event when the page was
	// read: the page follows the environment's stream after it.
	LastEventSeq int64
	// Before is set on a page of older runs: it lists the runs before run
	// number Before, and a run that starts is not inserted into it.
	// OlderURL is the next page of older runs, if there are more;
	// NewestURL the first page, on the others.
	Before    int64
	OlderURL  string
	NewestURL string
	// Kinds and Statuses are the filters' choices; Filtered is true when
	// one is applied (the list then does not follow the stream) and
	// ClearURL lists every run again.
	Kinds, Statuses []FilterOption
	Filtered        bool
	ClearURL        string
	// HideRollback is set for a viewer who cannot deploy: the rows a live
	// update swaps in offer a rollback to everyone, and the list hides it.
	HideRollback bool
}

// RunKindFilters are the runs list's kinds, as ?kind= takes them.
var RunKindFilters = []FilterOption{{Value: "deploy", Label: "Deploys"}, {Value: "reconcile", Label: "Reconciles"},
	{Value: "backup", Label: "Backups"}, {Value: "restore", Label: "Restores"},
	{Value: "drill", Label: "Restore drills"}}

// RunStatusFilters are the runs list's statuses, as ?status= takes them.
var RunStatusFilters = []FilterOption{{Value: "in-progress", Label: "In progress"}, {Value: "succeeded", Label: "Succeeded"},
	{Value: "failed", Label: "Failed"}, {Value: "cancelled", Label: "Cancelled"}}

// RevisionText says which revision a run is about: "redeploy of revision
// 2", "revision 1 → 2", "revision 2", or "" for none.
func (r RunView) RevisionText() string {
	switch {
	case r.Revision <= 0:
		return ""
	case r.Kind == "deploy" && r.FromRevision == r.Revision:
		return "redeploy of revision " + strconv.Itoa(r.Revision)
	case r.FromRevision > 0:
		return "revision " + strconv.Itoa(r.FromRevision) + " → " + strconv.Itoa(r.Revision)
	}
	return "revision " + strconv.Itoa(r.Revision)
}

// KindText is how the runs list names a run's kind: "rollback" for a
// deploy that rolls back, else its kind.
func (r RunView) KindText() string {
	if r.Rollback {
		return "rollback"
	}
	return r.Kind
}

// RunRowID is the element id of a run's row in the runs list.
func RunRowID(runID int64) string { return "run-row-" + strconv.FormatInt(runID, 10) }

// ServiceStateView is one hostname of the environment with its TLS state.
type ServiceStateView struct {
	Domain string
	Route  string
	// State is "issued", "DNS pending" or "cert failed · retry at 14:03 UTC".
	State string
	// Cert is the certificate's state: deferred, issued or failed.
	Cert string
	// Pending: deferred or failed, so Check now applies.
	Pending bool
	// DNS says what to do while the domain is DNS pending; RetryAt is a
	// failed certificate's next retry, counted down from Now.
	DNS          *DNSPendingView
	RetryAt, Now time.Time
}

// DeployPlanPage is the model of the deploy plan.
type DeployPlanPage struct {
	Chrome       Chrome
	Project, Env string
	Revision     int
	RevisionHash string
	Latest       int
	FromRevision int
	Revisions    []int
	FirstDeploy  bool
	Rollback     bool
	Redeploy     bool
	Changes      []PlanChangeView
	Missing      []string
	// Orphaned lists the first orphaned names; the page shows
	// OrphanedShown of them and links the others, OrphanedCount in all.
	Orphaned      []string
	OrphanedCount int
	Destructive   []string
	Refused       []string
	// OtherCluster says the active revision runs on another cluster, so
	// the plan deploys everything (runs.DeployPlan.OtherCluster).
	OtherCluster string
	// PublicValues are values a hostname of the revision is built from that
	// the project also uses outside hostnames (names and expressions only).
	// Their hostnames are never resolved on the page; only an admin
	// (CanPublish) may deploy them, by typing the environment's name.
	PublicValues []PublicValueView
	CanPublish   bool
	// Rollouts say what the deploy does with each application: whether it
	// rolls out and why, its image, its release command.
	Rollouts []RolloutView
	// Published are values a hostname of the revision publishes whose
	// version an admin published already: nothing is asked again.
	Published []PublishedValueView
	// Hostnames are resolved only for deployers and admins.
	Hostnames     []PlanHostView
	ShowHostnames bool
	CanDeploy     bool
	CanStart      bool
	// Error and ErrorField come from a refused POST.
	Error, ErrorField string
	Confirm           string
	RedeployChecked   bool
	// ConfirmPublicValue is what was typed to publish PublicValues.
	ConfirmPublicValue string
	// ValueChanges are the values set, changed or deleted since the active
	// deploy, which this deploy applies (names and versions only).
	ValueChanges []ValueChangeView
	// Release is the earlier deploy a rollback deploys again; nil otherwise.
	Release *RollbackView
	// HandEdits are fields other field managers own on the Studio's
	// objects (drift the deploy takes back); HandEditsError says why they
	// could not be read.
	HandEdits      []HandEditView
	HandEditsError string
	// Drift is what differs from what the Studio last applied, which
	// this deploy undoes (Removed: the application goes with it).
	Drift []DriftItemView
}

// HandEditView is one object's fields another manager owns.
type HandEditView struct {
	// Object is "Deployment web"; Manager who ("kubectl", through scale).
	Object, Manager, Via string
	Since                string
	Fields               []string
	// Removed: the object goes with this deploy (a blue-green slot), its
	// edits with it; otherwise the deploy takes the fields back.
	Removed bool
}

// PublicValueView is a value a hostname would publish, by name.
type PublicValueView struct {
	Name string
	// Hostnames are the expressions, as written, that it builds.
	Hostnames []string
	// Elsewhere are the fields outside hostnames that use it.
	Elsewhere []ValueUseView
}

// RolloutView is one application of a plan: whether the deploy rolls it
// out and why, the image it runs (or the build context), the release
// command that runs first, and the replicas and resources that change.
type RolloutView struct {
	App, Reason, Image, Strategy string
	Rolls, Build                 bool
	ReleaseCommand               string
	Scaling, Resources           []string
}

// RollingApps names the applications the deploy rolls out.
func (m DeployPlanPage) RollingApps() []string {
	var out []string
	for _, r := range m.Rollouts {
		if r.Rolls {
			out = append(out, r.App)
		}
	}
	return out
}

// PublishedValueView is a value version published in a hostname: since
// when and by whom.
type PublishedValueView struct {
	Name    string
	Version int
	Since   time.Time
	By      string
}

// ValueUseView is a field such as "web.environment.SESSION_SECRET" with
// the newest revision that references the value there.
type ValueUseView struct {
	Field    string
	Revision int
}

// PublicValueNames names the page's PublicValues: "A", "A and B".
func (m DeployPlanPage) PublicValueNames() []string {
	names := make([]string, 0, len(m.PublicValues))
	for _, v := range m.PublicValues {
		names = append(names, v.Name)
	}
	return names
}

// PlanChangeView is a created, changed or removed service.
type PlanChangeView struct {
	Kind, Name, Action string
	Fields             []PlanFieldView
}

// PlanFieldView is one changed field.
type PlanFieldView struct {
	Field, Old, New string
}

// PlanHostView is one hostname of the plan.
type PlanHostView struct {
	Route, Expression, Resolved, Note string
	TLS                               string
}

func hasPending(svcs []ServiceStateView) bool {
	for _, s := range svcs {
		if s.Pending {
			return true
		}
	}
	return false
}

// OrphanedShown is how many orphaned names the deploy plan lists; it links
// to the values page for the others.
const OrphanedShown = runs.OrphanedListed

// OrphanedMore is how many orphaned names the page does not list.
func (m DeployPlanPage) OrphanedMore() int {
	return max(m.OrphanedCount, len(m.Orphaned)) - min(len(m.Orphaned), OrphanedShown)
}
