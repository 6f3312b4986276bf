// Package platform is what a run's work is done on: the Platform
// interface, the types its methods take and return, and the Studio's own
// probe of where a domain points (probe.go), which every platform shares.
// Its implementations live beside it: local (the embedded default, which
// simulates a cluster's work) and kubernetes (a real cluster).
package platform

import (
	"context"
	"fmt"
	"strings"
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

// Platform does a run's work on a cluster: what every platform does.
// What only some platforms can do are capabilities, each an interface of
// its own (BackupPlatform, ValueReceiver, EnvironmentPreparer,
// EnvironmentDeleter, DefinitionChecker, HandEditReader), asserted where
// it is used; a missing one that a user asked for is refused by
// NotSupported, in one sentence. A platform is chosen by name with New.
//
// Call order. A deploy's plan calls CheckDefinition and BucketBytes; its
// run calls, in its phases: SetValues and PrepareEnvironment (the values
// step), ProvisionDatabase and ProvisionBucket, Build, Release (or, for a
// run resumed after its process stopped, ReleaseOutcome first), Rollout,
// Probe and Issue (the hostname steps), and Prune once the revision is
// live. Backups and restores call the BackupPlatform's methods; deleting
// an environment calls DeleteEnvironment.
//
// Concurrency. A platform is called from many goroutines at once, for
// different environments; every method must be safe for that. For one
// environment, only the run holding its lease calls the step methods, so
// those calls never overlap; Probe may be called at any time (the
// reconciler, Check now) alongside them. Every method is idempotent for
// the same environment and service, so a resumed run may call it again.
// The methods that do a step's work write its log lines to out; ctx ends
// a method's work (a step's timeout, a cancel, the process stopping).
type Platform interface {
	// Kind is the platform's name, as --platform takes it: "local",
	// "kubernetes".
	Kind() string
	ProvisionDatabase(ctx context.Context, env Env, name string, d *compiler.Database, out Output) error
	ProvisionBucket(ctx context.Context, env Env, name string, b *compiler.Bucket, out Output) error
	// BucketBytes is what a live bucket stores.
	BucketBytes(ctx context.Context, env Env, name string) (int64, error)
	// Build builds or imports an application's image and returns its reference.
	Build(ctx context.Context, env Env, app string, a *compiler.Application, out Output) (string, error)
	// Release runs the release command cmd of application app (a, as the
	// run's revision declares it: its image, environment and resources)
	// once; ctx carries its timeout. The platform keeps what the command
	// came to under key.
	Release(ctx context.Context, env Env, app string, a *compiler.Application, cmd *compiler.ReleaseCommand, key ReleaseKey, out Output) error
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
// and ResourceQuota). active is the definition the environment runs now
// (nil before its first deploy): its pods run beside the new ones while
// they roll out.
type EnvironmentPreparer interface {
	PrepareEnvironment(ctx context.Context, env Env, def, active *compiler.Definition) error
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

// StalledError is a rollout ended by its step's rollout timeout before
// the platform's own verdict, with what its workload showed then (a
// readiness probe failing, a pod that no node can run).
type StalledError struct {
	Why string
	Err error
}

func (e *StalledError) Error() string { return e.Err.Error() + ": " + e.Why }
func (e *StalledError) Unwrap() error { return e.Err }

// IssuedCertificate is a leaf certificate the CA signed.
type IssuedCertificate struct {
	Serial    string
	NotBefore time.Time
	NotAfter  time.Time
	PEM       string
}

// NotSupportedError is a capability a platform lacks, asked for by a user
// (a backup on a platform that takes none).
type NotSupportedError struct {
	Platform   string // its Kind
	Capability string // "backups"
	// Detail says what comes instead, or when; may be "".
	Detail string
}

func (e *NotSupportedError) Error() string {
	kind := e.Platform
	if kind != "" {
		kind = strings.ToUpper(kind[:1]) + kind[1:]
	}
	msg := fmt.Sprintf("The %s platform does not take %s in this version of the Studio", kind, e.Capability)
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg + "; nothing was done."
}

// Details a platform may give of a capability it lacks (NotSupported).
type CapabilityDetailer interface {
	CapabilityDetail(capability string) string
}

// NotSupported is the one refusal of a capability p lacks.
func NotSupported(p Platform, capability string) error {
	e := &NotSupportedError{Platform: p.Kind(), Capability: capability}
	if d, ok := p.(CapabilityDetailer); ok {
		e.Detail = d.CapabilityDetail(capability)
	}
	return e
}

// Wrapper is a platform that wraps another to change some of its steps
// (a test's hooks): capabilities it does not have itself are looked up on
// the platform it wraps.
type Wrapper interface {
	Unwrap() Platform
}

// As is p's capability C (p itself, or the platform a Wrapper wraps), or
// false when p lacks it.
func As[C any](p Platform) (C, bool) {
	for p != nil {
		if c, ok := p.(C); ok {
			return c, true
		}
		w, ok := p.(Wrapper)
		if !ok {
			break
		}
		p = w.Unwrap()
	}
	var zero C
	return zero, false
}

// Backups is p's BackupPlatform, or the refusal of backups on p.
func Backups(p Platform) (BackupPlatform, error) {
	if b, ok := As[BackupPlatform](p); ok {
		return b, nil
	}
	return nil, NotSupported(p, "backups")
}

// BackupPlatform snapshots and restores an environment's services: a
// capability (Backups). Snapshot files are written and read through the
// location's Target (a directory or an S3 prefix); checking, verifying and
// removing snapshots need only the target (CheckSnapshot, VerifySnapshot,
// Target.Remove).
type BackupPlatform interface {
	// Snapshot streams one service's snapshot into loc and returns its
	// file (name, size, SHA-256). It never creates the target itself.
	Snapshot(ctx context.Context, env Env, svc SnapshotService, loc SnapshotLocation) (SnapshotFile, error)
	// StopEnvironment and StartEnvironment stop and start every application
	// around a restore.
	StopEnvironment(ctx context.Context, env Env) error
	StartEnvironment(ctx context.Context, env Env) error
	// Restore replays one service from its snapshot file after verifying
	// its size and SHA-256. It stops when ctx ends.
	Restore(ctx context.Context, env Env, svc SnapshotService, loc SnapshotLocation, file SnapshotFile) error
}

// ScratchRestorer restores a snapshot's service into a scratch place of
// its own, which the environment never sees, for restore drills: a
// capability of platforms with Backups. The drill owns the scratch
// directory and removes it, whatever the outcome.
type ScratchRestorer interface {
	// RestoreScratch replays file of svc from loc into the directory
	// scratch and checks what it restored against what the snapshot
	// recorded (a *SnapshotFileError naming the file when it differs).
	// scratch names the drill's place: a directory the drill made for it
	// (the local platform restores files there), or only a name a
	// platform derives its own scratch place from (a scratch database),
	// which it then removes itself.
	RestoreScratch(ctx context.Context, env Env, svc SnapshotService, loc SnapshotLocation, file SnapshotFile, scratch string) (ScratchCheck, error)
}

// SnapshotLimiter is a BackupPlatform that cannot snapshot every kind of
// service: CannotSnapshot says why it cannot take svc, or "" when it can.
// Schedules and manual snapshots are refused with its words before they
// are saved, never at a fire.
type SnapshotLimiter interface {
	CannotSnapshot(svc SnapshotService) string
}

// ScratchCheck is what a drill restored and checked of one service.
type ScratchCheck struct {
	// Objects and Bytes are the files restored, each checked for its
	// size and SHA-256.
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// Tables and Rows are a database's, checked against the counts the
	// snapshot recorded, when the platform's snapshots record them
	// (Counted); the local platform's simulated databases have none.
	Counted bool  `json:"counted,omitempty"`
	Tables  int   `json:"tables,omitempty"`
	Rows    int64 `json:"rows,omitempty"`
}

// Drills is p's ScratchRestorer, or the refusal of restore drills on p.
func Drills(p Platform) (ScratchRestorer, error) {
	if _, err := Backups(p); err != nil {
		return nil, err
	}
	if d, ok := As[ScratchRestorer](p); ok {
		return d, nil
	}
	return nil, NotSupported(p, "restore drills")
}

// DirectoryTargets is a platform whose snapshots can go to a directory on
// the Studio's machine (the local platform): a capability. A platform
// without it takes S3 targets only.
type DirectoryTargets interface {
	// DirectoryTarget is the directory path as a backup target, or why it
	// cannot be one (not an absolute path).
	DirectoryTarget(path string) (Target, error)
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
	Target       Target
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
