// Package platform is what a run's work is done on: the Platform
// interface, the types its methods take and return, and the Studio's own
// probe of where a domain points (probe.go), which every platform shares.
// Its implementations live beside it: local (the embedded default, which
// simulates a cluster's work) and kubernetes (a real cluster).
package platform

import (
	"context"
	"time"

	"github.com/skali-dev/studio/compiler"
)

// Env is the environment a platform works for: its id, its project's name
// and its own name.
type Env struct {
	ID      int64
	Project string
	Name    string
}

// Output receives a step's log lines as the platform works. Implementations mask secrets and store them; a platform never writes a value's plaintext anywhere else.
type Output interface{ Line(text string) }

type discard struct{}

func (discard) Line(string) {}

// Discard is an Output that drops every line.
var Discard Output = discard{}

// Platform does a run's work on a cluster. Every method is idempotent for
// the same environment and service, so a resumed run may call it again.
// The methods that do a step's work write its log lines to out.
type Platform interface {
	ProvisionDatabase(ctx context.Context, env Env, name string, d *compiler.Database, out Output) error
	ProvisionBucket(ctx context.Context, env Env, name string, b *compiler.Bucket, out Output) error
	// BucketBytes is what a live bucket stores.
	BucketBytes(ctx context.Context, env Env, name string) (int64, error)
	// Build builds or imports an application's image and returns its reference.
	Build(ctx context.Context, env Env, app string, a *compiler.Application, out Output) (string, error)
	// Release runs the application's release command once; ctx carries its
	// timeout. The platform keeps what the command came to under key.
	Release(ctx context.Context, env Env, app string, cmd *compiler.ReleaseCommand, key ReleaseKey, out Output) error
	// ReleaseOutcome says what the release command started under key came
	// to, for a run resumed after the process that ran it stopped.
	ReleaseOutcome(ctx context.Context, env Env, key ReleaseKey) (ReleaseOutcome, error)
	// Rollout replaces the application's version by its strategy; ctx
	// carries the rollout timeout.
	Rollout(ctx context.Context, env Env, app string, a *compiler.Application, out Output) error
	// Probe checks where a domain points. What it finds, DNS failures
	// included, is in the result.
	Probe(ctx context.Context, domain string) ProbeResult
	// Issue requests a certificate for a domain of env that points here.
	Issue(ctx context.Context, env Env, domain string, now time.Time, out Output) (*IssuedCertificate, Issuance, error)
	// Prune deletes what services the live revision no longer declares
	// left on the platform, their data included. The runner calls it once
	// that revision is live, and for a database or bucket only when the
	// deploy's plan was confirmed by typing the environment's name.
	Prune(ctx context.Context, env Env, removed []RemovedService, out Output) error

	// Backups.
	BackupPlatform
}

// ValueReceiver is a platform that is handed the plaintext values a
// deploy's applications run with (the local platform keeps them, a
// cluster puts them in a Secret). The deploy hands over its release: the
// value versions fixed for the run, which for a rollback are the versions
// of the deploy it rolls back to.
type ValueReceiver interface {
	// SetValues replaces the environment's values with values, by name.
	SetValues(ctx context.Context, env Env, values map[string]string) error
}

// EnvironmentPreparer is a platform that sets an environment up for the
// definition a deploy brings, in its step that hands over the values,
// before anything of it runs (on Kubernetes: the namespace's NetworkPolicy
// and ResourceQuota).
type EnvironmentPreparer interface {
	PrepareEnvironment(ctx context.Context, env Env, def *compiler.Definition) error
}

// EnvironmentDeleter is a platform that holds what an environment runs
// apart from the Studio's database (on Kubernetes, its namespace) and
// deletes it, waiting until it is gone, when the environment is deleted.
type EnvironmentDeleter interface {
	DeleteEnvironment(ctx context.Context, env Env, out Output) error
}

// DefinitionChecker is a platform that cannot run every definition as
// written (on Kubernetes, two applications whose objects would have the
// same name). The deploy's plan is refused with each sentence it returns.
type DefinitionChecker interface {
	CheckDefinition(def *compiler.Definition) []string
}

// RemovedService is a service a revision declared and the live one no
// longer does.
type RemovedService struct {
	// Kind is application, database or bucket; or route (Name is
	// APP/ROUTE: a route an application still declared dropped) or domain
	// (a domain no route serves any more: its certificate goes).
	Kind string
	Name string
}

// ReleaseKey names the release command of one run's checkpoint.
type ReleaseKey struct {
	RunID    int64
	Position int
}

// ReleaseState is what a platform knows of a release command.
type ReleaseState int

// What a release command came to, as its platform knows it.
const (
	// ReleaseUnknown: the platform cannot tell (it was started and its
	// end was never seen); running it again is not safe.
	ReleaseUnknown ReleaseState = iota
	// ReleaseNotStarted: it never started, so running it is safe.
	ReleaseNotStarted
	ReleaseSucceeded
	ReleaseFailed
)

// ReleaseOutcome is a release command's state and, when it failed, why.
type ReleaseOutcome struct {
	State ReleaseState
	Error string
}

// Issuance is the ACME-shaped record of one issuance attempt.
type Issuance struct {
	CertificateRequest string `json:"certificateRequest"`
	Order              string `json:"order"`
	Challenge          string `json:"challenge"`
	ChallengeURL       string `json:"challengeUrl"`
	ChallengeResult    string `json:"challengeResult"`
}

// IssueError is a failed issuance: cert-manager's reason and, for a CA
// rate limit, the CA's retry window.
type IssueError struct {
	Reason     string
	RetryAfter *time.Time
}

func (e *IssueError) Error() string { return e.Reason }

// IssuedCertificate is a leaf certificate the CA signed.
type IssuedCertificate struct {
	Serial    string
	NotBefore time.Time
	NotAfter  time.Time
	PEM       string
}

// BackupPlatform snapshots and restores an environment's services.
type BackupPlatform interface {
	// SetTarget checks that target can hold the snapshots of installation
	// (a directory for the local platform) and marks it as theirs, or says
	// why not.
	SetTarget(target, installation string) error
	// CheckTarget says why snapshots cannot be written to target now (it
	// is gone, unmounted, another installation's or read-only), or nil.
	CheckTarget(target, installation string) error
	// Snapshot writes one service's snapshot into loc and returns its file.
	// It never creates the target itself.
	Snapshot(ctx context.Context, env Env, svc SnapshotService, loc SnapshotLocation) (SnapshotFile, error)
	// CheckSnapshot says, quickly (presence and size, no reading), why the
	// files of a snapshot cannot be restored, or nil.
	CheckSnapshot(ctx context.Context, loc SnapshotLocation, files []SnapshotFile) error
	// VerifySnapshot reads every file of a snapshot and checks its size and
	// SHA-256. It stops when ctx ends.
	VerifySnapshot(ctx context.Context, loc SnapshotLocation, files []SnapshotFile) error
	// RemoveSnapshot deletes a snapshot's directory (nothing outside it).
	RemoveSnapshot(ctx context.Context, loc SnapshotLocation) error
	// StopEnvironment and StartEnvironment stop and start every application
	// around a restore.
	StopEnvironment(ctx context.Context, env Env) error
	StartEnvironment(ctx context.Context, env Env) error
	// Restore replays one service from its snapshot file after verifying
	// its size and SHA-256. It stops when ctx ends.
	Restore(ctx context.Context, env Env, svc SnapshotService, loc SnapshotLocation, file SnapshotFile) error
}

// SnapshotService is a database, bucket or volume to snapshot.
type SnapshotService struct {
	// Kind is database, bucket or volume; a volume's Name is app/volume.
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// String is how the service reads: "database main".
func (s SnapshotService) String() string { return s.Kind + " " + s.Name }

// SnapshotFile is one service's snapshot file.
type SnapshotFile struct {
	File   string `json:"file"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// SnapshotLocation is where one snapshot's files live: Dir (slash
// separated, project/environment/snapshot) under Target, a target that
// carries the marker of Installation.
type SnapshotLocation struct {
	Target       string
	Installation string
	Dir          string
}

// TargetError is a backup target that cannot be used now.
type TargetError struct {
	Target  string
	Problem string
	// Gone: the snapshots under the target cannot be reached (missing,
	// unmounted, replaced); false when they can but no new one can be
	// written (read-only).
	Gone bool
}

func (e *TargetError) Error() string { return "the backup target " + e.Target + " " + e.Problem }

// SnapshotFileError is a snapshot file that is missing or does not match
// what was recorded when it was written.
type SnapshotFileError struct {
	File    string
	Problem string
}

func (e *SnapshotFileError) Error() string { return e.File + " " + e.Problem }
