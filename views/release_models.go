package views

import (
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/store"
)

// ValueChangeView is a value set, changed or deleted since the active
// deploy, by name and version: "SESSION_SECRET v1 → v2".
type ValueChangeView struct {
	Name   string
	Action string
	// Versions reads "v1 → v2", "new · v1" or "v2 · deleted".
	Versions string
	By       string
	At       time.Time
}

// NewValueChangeViews builds the views of changes.
func NewValueChangeViews(changes []store.ValueChange) []ValueChangeView {
	out := make([]ValueChangeView, 0, len(changes))
	for _, c := range changes {
		v := ValueChangeView{Name: c.Name, Action: c.Action, By: c.By, At: c.At}
		switch c.Action {
		case "set":
			v.Versions = "v" + strconv.Itoa(c.To) + " · new"
		case "deleted":
			v.Versions = "v" + strconv.Itoa(c.From) + " → deleted"
		default:
			v.Versions = "v" + strconv.Itoa(c.From) + " → v" + strconv.Itoa(c.To)
		}
		out = append(out, v)
	}
	return out
}

// When says when and by whom: "changed 3 minutes ago by Ada".
func (v ValueChangeView) When() string {
	s := v.Action + " " + Ago(v.At)
	if v.By != "" {
		s += " by " + v.By
	}
	return s
}

// RollbackView is what a rollback plan says of the release it deploys again.
type RollbackView struct {
	RunID    int64
	Revision int
	// Recorded is false for a deploy from before value versions were
	// recorded: the rollback uses the current values.
	Recorded bool
	Values   []ReleaseValueView
	// ComeBackEmpty are services the active revision no longer has.
	ComeBackEmpty        []string
	ReleaseCommandsSince []string
}

// ReleaseValueView is one value of a rollback: "SESSION_SECRET v3 → v1".
type ReleaseValueView struct {
	Name string
	// Now and Then are versions, 0 for none.
	Now, Then int
	Kept      bool
}

// Change reads "v3 → v1", "v1 (unchanged)", "v2 → not set".
func (v ReleaseValueView) Change() string {
	ver := func(n int) string {
		if n == 0 {
			return "not set"
		}
		return "v" + strconv.Itoa(n)
	}
	if v.Now == v.Then {
		return ver(v.Then) + " · unchanged"
	}
	return ver(v.Now) + " → " + ver(v.Then)
}

// ReleaseRowView is an earlier successful deploy the environment page
// offers to roll back to.
type ReleaseRowView struct {
	RunID int64
	// Number is the deploy's number among the environment's runs.
	Number   int
	Revision int
	Finished time.Time
	// Active is the release the environment runs now (no rollback offered).
	Active bool
	// Rollback is the plan page of rolling back to it.
	Rollback string
}

// NewReleaseRows lists the environment's recent successful deploys, the
// newest (the active release) first.
func NewReleaseRows(env *store.Environment, latest []store.Run, active *store.Release) []ReleaseRowView {
	var out []ReleaseRowView
	for _, r := range latest {
		if r.Kind != store.RunDeploy || (r.Status != store.RunSucceeded && r.Status != store.RunSucceededWithWarnings) || r.FinishedAt == nil {
			continue
		}
		row := ReleaseRowView{RunID: r.ID, Number: r.Number, Revision: r.Revision, Finished: *r.FinishedAt}
		row.Active = active != nil && active.RunID == r.ID
		if !row.Active {
			row.Rollback = paths.RollbackPlan(env.Project, env.Name, r.ID)
		}
		out = append(out, row)
	}
	return out
}

// EnvironmentStatusView is an environment's state in a few words, as the
// home and project pages list it, linking to the environment.
type EnvironmentStatusView struct {
	Project, Env string
	// Status is the machine word (data-env-status): running, deploying,
	// failed, down, restoring, not-deployed.
	Status string
	// Label is how it reads: "running revision 2", "deploying revision 3".
	Label string
	// Badge is the badge's class.
	Badge string
	// Reason says why the last deploy failed (Status failed) or why the
	// environment is down; FailedRun links to that deploy.
	Reason    string
	FailedRun string
	// Note is a neutral word on the last deploy (a cancelled one: the
	// state is what it was), NoteRun links to it.
	Note, NoteRun string
	// Available is a revision newer than the one running (out of date), 0 none.
	Available int
	// BackupAlarm is the backup alarm's reason, "" when none.
	BackupAlarm string
	// Health is what the platform last reported of what runs, in one word
	// (healthy, degraded, down), and its badge; "" when nothing was.
	Health, HealthBadge string
}

// Href is the environment page.
func (s EnvironmentStatusView) Href() string { return paths.Environment(s.Project, s.Env) }

// lastDeploy names o's newest deploy: "#12 (revision 3)", its number
// counted among the environment's runs.
func lastDeploy(o store.EnvironmentOverview) string {
	return "#" + strconv.Itoa(o.LastDeployNumber) + " (revision " + strconv.Itoa(o.LastDeployRevision) + ")"
}

// NewEnvironmentStatus says what state o is in.
func NewEnvironmentStatus(o store.EnvironmentOverview, backupAlarm string) EnvironmentStatusView {
	s := EnvironmentStatusView{Project: o.Project, Env: o.Name, BackupAlarm: backupAlarm}
	running := "running revision " + strconv.Itoa(o.Active)
	switch {
	case o.State == store.EnvironmentRestoreFailed:
		s.Status, s.Label, s.Badge, s.Reason = "down", "down", "badge-danger", "A restore failed; deploys wait until a restore completes or an admin accepts the data."
	case o.State == store.EnvironmentDeleting:
		s.Status, s.Label, s.Badge = "deleting", "deleting", "badge-danger"
		s.Reason = "Being deleted: what it runs on the platform goes first, then its rows; no deploy starts."
	case o.State == store.EnvironmentRestoring:
		s.Status, s.Label, s.Badge = "restoring", "restoring", "badge-info"
	case o.AwaitsApproval:
		s.Status, s.Label, s.Badge = "waiting", "revision "+strconv.Itoa(o.LastDeployRevision)+" waiting for approval", "badge-warn"
		s.Reason = "Deploy " + lastDeploy(o) + " waits for approval: nothing of it runs before."
		s.FailedRun = paths.Run(o.Project, o.Name, o.LastDeployID)
	case o.Deploying:
		s.Status, s.Label, s.Badge = "deploying", "deploying revision "+strconv.Itoa(o.LastDeployRevision), "badge-info"
	case o.LastDeployID != 0 && o.LastDeployStatus == store.RunCancelled:
		// A cancel is someone's choice, not a failure: the environment
		// keeps the state it had, with a neutral note.
		s.Status, s.Label, s.Badge = "running", running, "badge-ok"
		if o.Active == 0 {
			s.Status, s.Label, s.Badge = "not-deployed", "not deployed yet", "badge-plain"
		}
		s.Note = "Deploy " + lastDeploy(o) + " was cancelled."
		if o.Active > 0 {
			s.Note += " Still " + running + "."
		}
		s.NoteRun = paths.Run(o.Project, o.Name, o.LastDeployID)
	case o.LastDeployID != 0 && o.LastDeployStatus == store.RunFailed:
		s.Status, s.Badge, s.Label = "failed", "badge-danger", "deploy "+o.LastDeployStatus
		s.Reason = "Deploy " + lastDeploy(o) + " " + o.LastDeployStatus
		if o.LastDeployReason != "" {
			s.Reason += ": " + strings.TrimSuffix(o.LastDeployReason, ".")
		}
		s.Reason += "."
		if o.Active > 0 {
			s.Reason += " Still " + running + "."
		}
		s.FailedRun = paths.Run(o.Project, o.Name, o.LastDeployID)
	case o.Active == 0:
		s.Status, s.Label, s.Badge = "not-deployed", "not deployed yet", "badge-plain"
	default:
		s.Status, s.Label, s.Badge = "running", running, "badge-ok"
	}
	if o.Active > 0 && o.Latest > o.Active {
		s.Available = o.Latest
	}
	return s
}

// EnvironmentLiveView is the environment page's live header: its state in
// words, what it runs and whether a newer revision exists, a run in
// progress, the values changed since the active deploy, and its releases.
// The page's script fetches it again (paths.EnvironmentLive) whenever the
// environment's stream brings an event.
type EnvironmentLiveView struct {
	Project, Name, Role string
	State               string
	ActiveRevisionID    int64
	Status              EnvironmentStatusView
	// Revision is the revision shown (the active one, or the latest before
	// the first deploy); Latest the project's newest.
	Revision     int
	RevisionHash string
	Deployed     bool
	Latest       int
	// InProgress is a deploy under way (0: none).
	InProgress int64
	// InProgressNumber is its number among the environment's runs.
	InProgressNumber int
	// ValueChanges are the values set, changed or deleted since the
	// active deploy (names and versions only).
	ValueChanges []ValueChangeView
	Releases     []ReleaseRowView
	CanDeploy    bool
	// Health is what the platform last reported of what runs; AppNames,
	// DatabaseNames and BucketNames the services shown, whose health
	// parts a refresh replaces.
	Health                               HealthView
	AppNames, DatabaseNames, BucketNames []string
	// Drift is what differs from what the Studio last applied.
	Drift DriftView
	// DNS is every certificate's domain of the environment with what to
	// do about it while DNS pending (paths.EnvironmentLive fills it; the
	// page renders its own from its Certificates card).
	DNS []DNSSlot
}
