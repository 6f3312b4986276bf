package runs

import (
	"encoding/json"
	"fmt"
	"github.com/skali-dev/studio/humanize"
	"strings"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// Checkpoint kinds.
const (
	KindCheckValues       = "check-values"
	KindProvisionDatabase = "provision-database"
	KindProvisionBucket   = "provision-bucket"
	KindBuild             = "build"
	KindImport            = "import"
	KindRelease           = "release"
	KindIssueTLS          = "issue-tls"
	KindRollout           = "rollout"
	KindActivate          = "activate"
	KindProbe             = "probe"
)

// RunDetail is what a run records besides its status: the plain-text
// summary, the TLS deadline, what the deploy was started with.
type RunDetail struct {
	Summary string `json:"summary"`
	// Deadline is the rollout deadline TLS checkpoints wait for, set when
	// the first of them starts (the rollout timeout runs again after the
	// release commands).
	Deadline  *time.Time `json:"deadline,omitempty"`
	Deferred  int        `json:"deferred"`
	Warnings  int        `json:"warnings"`
	Confirmed bool       `json:"confirmed,omitempty"`
	Redeploy  bool       `json:"redeploy,omitempty"`
	// Rollback says the deploy rolls back: to an earlier release (its
	// revision and value versions) or an older revision.
	Rollback bool `json:"rollback,omitempty"`
	// Domain is the domain a reconcile run is about; Force retries a
	// certificate in backoff (Check now).
	Domain string `json:"domain,omitempty"`
	Force  bool   `json:"force,omitempty"`
	// BackupID is the snapshot a restore run replays.
	BackupID int64 `json:"backupId,omitempty"`
	// StoppedAt is the position of the checkpoint a failed run failed at
	// or a cancelled run stopped at, and StoppedName its name: the run
	// page's heading links to it.
	StoppedAt   *int   `json:"stoppedAt,omitempty"`
	StoppedName string `json:"stoppedName,omitempty"`
	// StoppedLine is the last log line of that checkpoint (0 when it
	// wrote none): the heading links to it.
	StoppedLine int64 `json:"stoppedLine,omitempty"`
}

// CheckpointDetail is a checkpoint's typed details; which fields are set
// depends on its kind.
type CheckpointDetail struct {
	Application string   `json:"application,omitempty"`
	Service     string   `json:"service,omitempty"`
	Image       string   `json:"image,omitempty"`
	Source      string   `json:"source,omitempty"`
	Command     []string `json:"command,omitempty"`
	Timeout     string   `json:"timeout,omitempty"`
	Strategy    string   `json:"strategy,omitempty"`
	// WaitedFor names the databases and buckets a release command waited for.
	WaitedFor []string `json:"waitedFor,omitempty"`
	// Values names the values checked (names only, never values).
	Values []string `json:"values,omitempty"`
	Error  string   `json:"error,omitempty"`
	// Revision is what an activate checkpoint made active.
	Revision int          `json:"revision,omitempty"`
	TLS      *TLSDetail   `json:"tls,omitempty"`
	Probe    *ProbeResult `json:"probe,omitempty"`
	// Snapshot is a snapshot or restore checkpoint's service and file;
	// Removed the snapshots a retention checkpoint deleted.
	Snapshot *SnapshotDetail `json:"snapshot,omitempty"`
	Removed  []string        `json:"removed,omitempty"`
	// Drill is what a drill-restore checkpoint restored and checked.
	Drill *platform.ScratchCheck `json:"drill,omitempty"`
	// Approval is an Approval checkpoint's plan and digest.
	Approval *ApprovalDetail `json:"approval,omitempty"`
}

// TLSDetail is an Issue TLS certificate checkpoint's record.
type TLSDetail struct {
	Route string `json:"route"`
	// Expression is the hostname as written; Domain as resolved.
	Expression string          `json:"expression"`
	Domain     string          `json:"domain"`
	Policy     string          `json:"policy"`
	Verdict    string          `json:"verdict,omitempty"`
	Addresses  []AddressAnswer `json:"addresses,omitempty"`
	DNSError   string          `json:"dnsError,omitempty"`
	// IssuedFor is the old domain of a renamed route whose certificate
	// keeps serving it.
	IssuedFor string `json:"issuedFor,omitempty"`
	// Deferred says the checkpoint was skipped because the domain does
	// not point here yet (see TLSDeferred).
	Deferred         bool         `json:"deferred,omitempty"`
	State            string       `json:"state,omitempty"`
	Attempt          int          `json:"attempt,omitempty"`
	Failures         int          `json:"failures,omitempty"`
	LastFailureAt    *time.Time   `json:"lastFailureAt,omitempty"`
	LastFailure      string       `json:"lastFailure,omitempty"`
	NextRetryAt      *time.Time   `json:"nextRetryAt,omitempty"`
	RateLimitedUntil *time.Time   `json:"rateLimitedUntil,omitempty"`
	Deadline         *time.Time   `json:"deadline,omitempty"`
	Attempts         []TLSAttempt `json:"attempts,omitempty"`
	Issuance         *Issuance    `json:"issuance,omitempty"`
	Serial           string       `json:"serial,omitempty"`
	NotBefore        *time.Time   `json:"notBefore,omitempty"`
	NotAfter         *time.Time   `json:"notAfter,omitempty"`
	Note             string       `json:"note,omitempty"`
}

// TLSAttempt is one issuance attempt.
type TLSAttempt struct {
	Number      int        `json:"number"`
	At          time.Time  `json:"at"`
	Outcome     string     `json:"outcome"` // issued, failed, deferred, waiting
	Reason      string     `json:"reason,omitempty"`
	NextRetryAt *time.Time `json:"nextRetryAt,omitempty"`
}

// TLSDeferred reports whether cp is an Issue TLS checkpoint skipped because
// its domain does not point here yet, from d (cp's decoded detail), not
// from the wording of its warning. A checkpoint recorded before the typed
// field existed carries only its warning ("TLS deferred: ..."): it is read
// as before, here and nowhere else.
func TLSDeferred(cp store.Checkpoint, d CheckpointDetail) bool {
	if cp.Kind != KindIssueTLS || cp.Status != store.CheckpointSkipped {
		return false
	}
	if d.TLS != nil && d.TLS.Deferred {
		return true
	}
	return strings.HasPrefix(cp.Warning, legacyDeferredWarning)
}

// legacyDeferredWarning begins the warning of a deferred certificate's
// checkpoint.
const legacyDeferredWarning = "TLS deferred"

// DecodeRunDetail reads a run's stored detail.
func DecodeRunDetail(raw []byte) RunDetail {
	var d RunDetail
	_ = json.Unmarshal(raw, &d)
	return d
}

// DecodeCheckpointDetail reads a checkpoint's stored detail.
func DecodeCheckpointDetail(raw []byte) CheckpointDetail {
	var d CheckpointDetail
	_ = json.Unmarshal(raw, &d)
	return d
}

// Backoff is cert-manager's wait after the given number of consecutive
// failures: 1 hour, doubling, at most 32 hours.
func Backoff(failures int) time.Duration {
	if failures < 1 {
		failures = 1
	}
	if failures > 6 {
		return 32 * time.Hour
	}
	return time.Hour << (failures - 1)
}

// RetryText is how a failed certificate's service state reads.
func RetryText(next time.Time) string {
	return fmt.Sprintf("cert failed · retry at %s", humanize.HourMinute(next))
}
