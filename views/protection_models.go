package views

import "time"

// ApprovalView is the Approval checkpoint of a run waiting for approval:
// the plan being approved, who may approve, how many have, and who.
type ApprovalView struct {
	Project, Env string
	RunID        int64
	// Waiting: the run still waits for approval (the forms are shown).
	Waiting bool
	Digest  string
	// The plan: revisions, value versions (names and numbers only),
	// destructive changes, published values, services.
	Revision, FromRevision int
	Values                 []string
	Destructive            []string
	PublicValues           []string
	Services               []string
	Count, Needed          int
	// Approvers are who may approve; Approved who did.
	Approvers []string
	Approved  []ApprovedBy
	// Changed says what changed since earlier approvals, which voided them.
	Changed []string
	// CanApprove: the viewer may approve now; WhyNot says why not.
	CanApprove bool
	WhyNot     string
	CanBypass  bool
	// Started: the rule is met; StartsAt when the run starts (a wait).
	Started  bool
	StartsAt string
}

// ApprovedBy is one approval.
type ApprovedBy struct {
	Name, At, Comment string
}

// ProtectionPage is the model of an environment's protection page.
type ProtectionPage struct {
	Chrome       Chrome
	Project, Env string
	Protected    bool
	UpdatedBy    string
	UpdatedAt    string
	Form         ProtectionForm
	Members      []ProtectionMember
	Freeze       FreezeForm
}

// ProtectionForm is the rule as the form shows it.
type ProtectionForm struct {
	Approvals    string
	Role         string
	SelfApproval bool
	Wait         string
	Expires      string
	Bypass       string
	Error        string
}

// ProtectionMember is a member the rule may name as approver.
type ProtectionMember struct {
	ID          int64
	Name, Email string
	Role        string
	Checked     bool
}

// ApprovalsPage is the signed-in person's inbox.
type ApprovalsPage struct {
	Chrome Chrome
	Items  []InboxItem
}

// InboxItem is one run waiting for the reader's approval.
type InboxItem struct {
	Project, Env  string
	RunID         int64
	Revision      int
	CreatedBy     string
	Created       string
	Count, Needed int
	Digest        string
	Plan          string
}

// FreezeForm is an environment's freeze windows as the protection page
// shows them: one row a window, and a blank row to add one.
type FreezeForm struct {
	Rows []FreezeRow
	// Error is a problem not of one row.
	Error string
	// Frozen: a window is open now, until Until ("Mon 06:00 UTC").
	Frozen     bool
	Refuse     bool
	UntilLabel string
	UntilAt    time.Time
	Now        time.Time
}

// FreezeRow is one window of the form; Error and ErrorField say what is
// wrong with it (cron, duration, from, to, action).
type FreezeRow struct {
	Cron, Duration, From, To, Action string
	Error, ErrorField                string
}
