// Package api holds the JSON API's wire types: the bodies it takes and the
// answers it gives, under /api/v1 (web/openapi.json documents them). The
// handlers answer with them and the CLI (cmd/studio) reads them, so the two
// cannot drift apart. Nothing here does anything: no package of ours but
// compiler and runs (for the shapes they define) is imported.
package api

import (
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
)

// Problem is an RFC 9457 problem document, the body of every error of the
// JSON API. Detail is the sentence the matching page shows.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Field names the request field a refusal concerns.
	Field string `json:"field,omitempty"`
	// Diagnostics are a manifest's problems, when it does not compile.
	Diagnostics []compiler.Diagnostic `json:"diagnostics,omitempty"`
	RequestID   string                `json:"request_id,omitempty"`
}

// Environment is an environment as the API lists it.
type Environment struct {
	Project string `json:"project"`
	Name    string `json:"name"`
	// State is active, restoring or down.
	State string `json:"state"`
	// ActiveRevision is the deployed revision's number, 0 before the first deploy.
	ActiveRevision int `json:"active_revision"`
	// Role is what the token may do there: its scope capped by its owner's role.
	Role string `json:"role"`
	URL  string `json:"url"`
}

// ManifestBody is the body of validate and add-a-revision.
type ManifestBody struct {
	Manifest string `json:"manifest"`
	// Kind and Filename help validate tell a manifest's kind.
	Kind     string `json:"kind,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// Validation is a validated manifest, shaped like one object of
// `studio validate --json`.
type Validation struct {
	Kind        string                  `json:"kind"`
	Valid       bool                    `json:"valid"`
	Hash        string                  `json:"hash,omitempty"`
	Diagnostics []compiler.Diagnostic   `json:"diagnostics"`
	Values      *compiler.ValueContract `json:"values,omitempty"`
}

// Revision is a stored revision of a project.
type Revision struct {
	Project string `json:"project"`
	Number  int    `json:"number"`
	Hash    string `json:"hash"`
	Summary string `json:"summary"`
	// Unchanged is true when the manifest compiled to the latest revision's
	// definition, so nothing was stored.
	Unchanged bool                  `json:"unchanged"`
	Warnings  []compiler.Diagnostic `json:"warnings"`
	URL       string                `json:"url"`
}

// Plan is a deploy plan. Hostnames are given as written, never resolved:
// a resolved hostname is built from values, and no answer carries a value.
type Plan struct {
	Revision      int      `json:"revision"`
	Latest        int      `json:"latest"`
	FromRevision  int      `json:"from_revision"`
	FirstDeploy   bool     `json:"first_deploy"`
	Rollback      bool     `json:"rollback"`
	Redeploy      bool     `json:"redeploy"`
	CanStart      bool     `json:"can_start"`
	NeedsConfirm  bool     `json:"needs_confirm"`
	MissingValues []string `json:"missing_values"`
	// OrphanedValues are the first views.OrphanedShown stored names the
	// revision does not reference, in name order; OrphanedCount counts
	// them all (the values page lists every one).
	OrphanedValues []string     `json:"orphaned_values"`
	OrphanedCount  int          `json:"orphaned_count"`
	Destructive    []string     `json:"destructive"`
	Refused        []string     `json:"refused"`
	PublicValues   []string     `json:"public_values"`
	Changes        []PlanChange `json:"changes"`
	Hostnames      []Hostname   `json:"hostnames"`
}

// PlanChange is one service the deploy changes.
type PlanChange struct {
	Kind   string        `json:"kind"`
	Name   string        `json:"name"`
	Action string        `json:"action"`
	Fields []FieldChange `json:"fields"`
}

// FieldChange is one changed field, expressions as written.
type FieldChange struct {
	Field string `json:"field"`
	Old   string `json:"old"`
	New   string `json:"new"`
}

// Hostname is a hostname of the new revision as written.
type Hostname struct {
	Route      string `json:"route"`
	Expression string `json:"expression"`
	// Hostname is the hostname the deploy will serve, for deployers and
	// admins (withheld while a value it is built from awaits publication).
	Hostname string `json:"hostname,omitempty"`
	TLS      string `json:"tls"`
}

// DeployBody is the body of starting a deploy: the page's form fields.
type DeployBody struct {
	Revision           int    `json:"revision,omitempty"`
	Confirm            string `json:"confirm,omitempty"`
	Redeploy           bool   `json:"redeploy,omitempty"`
	ConfirmPublicValue string `json:"confirm_public_value,omitempty"`
	// FreezeOverride is an installation admin's reason to deploy during
	// a freeze window.
	FreezeOverride string `json:"freeze_override,omitempty"`
	// Release rolls back to that earlier successful deploy (its run id):
	// its revision and value versions.
	Release int64 `json:"release,omitempty"`
}

// Run is a run with its checkpoints.
type Run struct {
	ID int64 `json:"id"`
	// Number counts the environment's runs: how its pages name the run
	// ("#12 of production"). ID is what URLs and the API take.
	Number int    `json:"number"`
	Kind   string `json:"kind"`
	// Status is pending, running, waiting, succeeded,
	// succeeded-with-warnings, failed or cancelled.
	Status          string       `json:"status"`
	Finished        bool         `json:"finished"`
	Reason          string       `json:"reason,omitempty"`
	Revision        int          `json:"revision,omitempty"`
	FromRevision    int          `json:"from_revision,omitempty"`
	CreatedBy       string       `json:"created_by"`
	CreatedAt       string       `json:"created_at"`
	StartedAt       *string      `json:"started_at"`
	FinishedAt      *string      `json:"finished_at"`
	CancelRequested bool         `json:"cancel_requested"`
	Deferred        int          `json:"deferred"`
	Warnings        int          `json:"warnings"`
	URL             string       `json:"url"`
	APIURL          string       `json:"api_url"`
	Checkpoints     []Checkpoint `json:"checkpoints"`
	// Approval is what a deploy of a protected environment waits for
	// (omitted once its approvals are met: then its reason says when it
	// starts).
	Approval *Approval `json:"approval,omitempty"`
}

// Checkpoint is one checkpoint of a run.
type Checkpoint struct {
	Position   int     `json:"position"`
	Kind       string  `json:"kind"`
	Name       string  `json:"name"`
	Status     string  `json:"status"`
	Warning    string  `json:"warning,omitempty"`
	Error      string  `json:"error,omitempty"`
	StartedAt  *string `json:"started_at"`
	FinishedAt *string `json:"finished_at"`
}

// Approval is what a run waiting for approval waits for.
type Approval struct {
	Digest    string   `json:"digest"`
	Approvals int      `json:"approvals"`
	Needed    int      `json:"needed"`
	Approvers []string `json:"approvers"`
	Approved  []string `json:"approved"`
	Changed   []string `json:"changed"`
}

// Decision is the body of approve and reject.
type Decision struct {
	Digest  string `json:"digest,omitempty"`
	Comment string `json:"comment"`
}

// Protection is an environment's protection rule as the API shows it.
type Protection struct {
	Protected    bool     `json:"protected"`
	Approvals    int      `json:"approvals"`
	Approvers    []string `json:"approvers"`
	SelfApproval bool     `json:"self_approval"`
	Wait         string   `json:"wait"`
	Expires      string   `json:"expires"`
	Bypass       string   `json:"bypass"`
	// FreezeWindows are the environment's freeze windows; FrozenUntil is
	// when the one open now ends (omitted when none is).
	FreezeWindows []runs.FreezeInput `json:"freeze_windows"`
	FrozenUntil   *time.Time         `json:"frozen_until,omitempty"`
}

// ValueBody is the body of storing a value: PUT .../values/{name}.
type ValueBody struct {
	Value *string `json:"value"`
	// ConfirmOrphan stores a name the manifest does not reference.
	ConfirmOrphan bool `json:"confirm_orphan,omitempty"`
}

// ImportBody is the body of importing values: POST .../values/import,
// a .env file's text.
type ImportBody struct {
	Dotenv string `json:"dotenv"`
}

// ValueSet is what setting a value answers: never the value.
type ValueSet struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	// Orphaned is true when the manifest does not reference the name.
	Orphaned bool `json:"orphaned"`
}

// Import is what importing a .env file answers: names and versions.
type Import struct {
	Changed   []ValueVersion `json:"changed"`
	Unchanged []string       `json:"unchanged"`
	// Skipped are names the manifest does not reference: not stored.
	Skipped []string `json:"skipped"`
}

// ValueVersion is a value's name and new version.
type ValueVersion struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
}

// Health is an environment's health as the API answers it.
type Health struct {
	Project     string `json:"project"`
	Environment string `json:"environment"`
	// Level is healthy, degraded, down, or unknown (nothing reported).
	Level        string          `json:"level"`
	Reported     bool            `json:"reported"`
	Note         string          `json:"note,omitempty"`
	UpdatedAt    *time.Time      `json:"updated_at,omitempty"`
	Applications []AppHealth     `json:"applications"`
	Databases    []ServiceHealth `json:"databases"`
	Buckets      []ServiceHealth `json:"buckets"`
	// Drift is what was changed outside the Studio (names, never an
	// environment variable's value).
	Drift []Drift `json:"drift"`
}

type AppHealth struct {
	Name     string     `json:"name"`
	State    string     `json:"state"`
	Healthy  bool       `json:"healthy"`
	Ready    int        `json:"ready"`
	Desired  int        `json:"desired"`
	Restarts int        `json:"restarts"`
	Since    *time.Time `json:"since,omitempty"`
	Count    int        `json:"count"`
	Reason   string     `json:"reason"`
}

type ServiceHealth struct {
	Name    string `json:"name"`
	Phase   string `json:"phase"`
	Healthy bool   `json:"healthy"`
}

type Drift struct {
	App     string    `json:"app"`
	Kind    string    `json:"kind"`
	Object  string    `json:"object"`
	Field   string    `json:"field"`
	Now     string    `json:"now"`
	Applied string    `json:"applied"`
	Since   time.Time `json:"since"`
}
