// Package local is the embedded platform, the Studio's default for trying
// it out: it simulates a cluster's work with a delay per step and injected
// faults, but resolves DNS, probes addresses and issues X.509 certificates
// (from its development CA) for real.
package local

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// Faults are failures the local platform injects, by application, domain
// or bucket, for tests and demos. Load them from a JSON file with
// LoadFaults.
type Faults struct {
	mu sync.Mutex
	// Build, Release and Rollout fail an application's step with a reason.
	Build   map[string]string `json:"build,omitempty"`
	Release map[string]string `json:"release,omitempty"`
	Rollout map[string]string `json:"rollout,omitempty"`
	// Issuance fails a domain's issuance with a reason.
	Issuance map[string]string `json:"issuance,omitempty"`
	// RateLimit answers a domain's issuance with a CA rate limit whose
	// retry window is this duration (such as "3h").
	RateLimit map[string]string `json:"rateLimit,omitempty"`
	// BucketBytes is what a bucket stores.
	BucketBytes map[string]int64 `json:"bucketBytes,omitempty"`
	// Snapshot fails the snapshot of a service ("database main",
	// "bucket media", "volume web/data") with a reason.
	Snapshot map[string]string `json:"snapshot,omitempty"`
	// Target makes backup targets fail between two snapshot files, as a
	// full or read-only disk does.
	Target *TargetFault `json:"target,omitempty"`
	// Output makes a step (build, release, rollout) of an application
	// print lines, by step and application; ${NAME}, ${NAME|base64},
	// ${NAME|url}, ${NAME|json}, ${NAME|jsonascii} and ${NAME|quoted}
	// stand for the plaintext of value NAME in those encodings (for tests
	// and demos of masking: the lines are masked before they are stored).
	Output map[string]map[string][]string `json:"output,omitempty"`
	// Runtime makes a deployed application misbehave after its rollout
	// (crash loop, memory, image, room, probe, scaled to zero, deleted),
	// by application; the platform's health reports it at once.
	Runtime map[string]*RuntimeFault `json:"runtime,omitempty"`
	// Drift changes a deployed application outside the Studio, by
	// application (drift.go): once, undone by its next rollout.
	Drift map[string]*DriftFault `json:"drift,omitempty"`
	// Hold keeps an application's rollout from starting while it is set,
	// by application: a test or a demo watches a run that is running for
	// as long as it needs, then lets it go on (Set).
	Hold map[string]bool `json:"hold,omitempty"`

	// changed hears of every Set (the platform's health watchers).
	changed func()
	// wake is closed at the next Set (for rollouts held).
	wake chan struct{}
}

// LoadFaults reads faults from a JSON file.
func LoadFaults(path string) (*Faults, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f Faults
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("runs: faults file %s: %w", path, err)
	}
	return &f, nil
}

// Set changes faults under the lock.
func (f *Faults) Set(change func(f *Faults)) {
	f.mu.Lock()
	change(f)
	changed := f.changed
	if f.wake != nil {
		close(f.wake)
		f.wake = nil
	}
	f.mu.Unlock()
	if changed != nil {
		changed()
	}
}

// held reports whether app's rollout is held, with a channel closed at the
// next Set.
func (f *Faults) held(app string) (bool, <-chan struct{}) {
	if f == nil {
		return false, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.Hold[app] {
		return false, nil
	}
	if f.wake == nil {
		f.wake = make(chan struct{})
	}
	return true, f.wake
}

func (f *Faults) get(read func(f *Faults) string) string {
	if f == nil {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return read(f)
}

// Platform is the embedded platform: it simulates a cluster's work with a
// delay per step and injected faults, but resolves DNS, probes addresses
// and issues X.509 certificates for real. It uses the store to keep what
// release commands came to and its development CA.
type Platform struct {
	// DB keeps what release commands came to (ReleaseOutcome); without it
	// nothing is kept and every outcome is unknown.
	DB        *store.DB
	StepDelay time.Duration
	// LogEvery is how often a simulated container prints a line of its
	// runtime log (default DefaultLogEvery).
	LogEvery time.Duration
	Faults   *Faults
	// SnapshotSize is how many random bytes each simulated snapshot file
	// holds after its header (4096 when zero).
	SnapshotSize int64
	Prober       *platform.Prober
	CA           *DevCA
	// values keeps what SetValues received, as a cluster keeps a Secret.
	values receivedValues
	// sim is what its applications do now (health.go).
	sim simulation
}

func (l *Platform) step(ctx context.Context) error { return sleep(ctx, l.StepDelay) }

// ProvisionDatabase implements platform.Platform.
func (l *Platform) ProvisionDatabase(ctx context.Context, env platform.Env, name string, d *compiler.Database, out platform.Output) error {
	say(out, "Provisioning database %s (%s %d)", name, d.Engine, d.Version)
	if err := l.step(ctx); err != nil {
		return err
	}
	say(out, "Database %s accepts connections", name)
	return nil
}

// ProvisionBucket implements platform.Platform.
func (l *Platform) ProvisionBucket(ctx context.Context, env platform.Env, name string, b *compiler.Bucket, out platform.Output) error {
	say(out, "Provisioning bucket %s", name)
	if err := l.step(ctx); err != nil {
		return err
	}
	say(out, "Bucket %s ready", name)
	return nil
}

// BucketBytes implements platform.Platform.
func (l *Platform) BucketBytes(ctx context.Context, env platform.Env, name string) (int64, error) {
	if l.Faults == nil {
		return 0, nil
	}
	l.Faults.mu.Lock()
	defer l.Faults.mu.Unlock()
	return l.Faults.BucketBytes[name], nil
}

// Build implements platform.Platform.
func (l *Platform) Build(ctx context.Context, env platform.Env, app string, a *compiler.Application, out platform.Output) (string, error) {
	ref := a.Image
	if ref == "" {
		ref = fmt.Sprintf("registry.local/%d/%s:%s", env.ID, app, randomToken()[:12])
	}
	if r := l.Faults.get(func(f *Faults) string { return f.Build[app] }); r != "" {
		say(out, "Building %s", app)
		if err := l.step(ctx); err != nil {
			return "", err
		}
		for _, line := range l.scripted(env, OutputBuild, app) {
			out.Line(line)
		}
		say(out, "error: %s", r)
		return "", fmt.Errorf("%s", r)
	}
	if err := l.buildLines(ctx, env, app, a, ref, out); err != nil {
		return "", err
	}
	return ref, nil
}

// Release implements platform.Platform. The simulated command runs inside this
// process, so it dies with it: the outcome records its start and its end.
func (l *Platform) Release(ctx context.Context, env platform.Env, app string, _ *compiler.Application, cmd *compiler.ReleaseCommand, key platform.ReleaseKey, out platform.Output) error {
	if l.DB != nil {
		if err := store.WithRetry(ctx, func(ctx context.Context, _ int) error { return l.DB.StartLocalRelease(ctx, key.RunID, key.Position) }); err != nil {
			return err
		}
	}
	out.Line(releaseCommandLine(cmd))
	for _, line := range l.scripted(env, OutputRelease, app) {
		out.Line(line)
	}
	err := l.step(ctx)
	if err == nil {
		if r := l.Faults.get(func(f *Faults) string { return f.Release[app] }); r != "" {
			err = fmt.Errorf("%s", r)
		}
	}
	switch {
	case err == nil:
		say(out, "exit status 0")
	case ctx.Err() != nil:
		say(out, "stopped: %s", context.Cause(ctx))
	default:
		say(out, "failed: %s", err)
	}
	if l.DB != nil && ctx.Err() == nil {
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if rerr := store.WithRetry(ctx, func(ctx context.Context, _ int) error {
			return l.DB.FinishLocalRelease(ctx, key.RunID, key.Position, msg)
		}); rerr != nil && err == nil {
			return rerr
		}
	}
	return err
}

// ReleaseOutcome implements platform.Platform.
func (l *Platform) ReleaseOutcome(ctx context.Context, env platform.Env, key platform.ReleaseKey) (platform.ReleaseOutcome, error) {
	if l.DB == nil {
		return platform.ReleaseOutcome{State: platform.ReleaseUnknown}, nil
	}
	o, err := l.DB.LocalRelease(ctx, key.RunID, key.Position)
	switch {
	case err != nil:
		return platform.ReleaseOutcome{}, err
	case !o.Started:
		return platform.ReleaseOutcome{State: platform.ReleaseNotStarted}, nil
	case !o.Finished:
		// Started by a process that stopped before it ended: the command
		// stopped with it, halfway.
		return platform.ReleaseOutcome{State: platform.ReleaseUnknown}, nil
	case o.Error != "":
		return platform.ReleaseOutcome{State: platform.ReleaseFailed, Error: o.Error}, nil
	}
	return platform.ReleaseOutcome{State: platform.ReleaseSucceeded}, nil
}

// Rollout implements platform.Platform.
func (l *Platform) Rollout(ctx context.Context, env platform.Env, app string, a *compiler.Application, out platform.Output) error {
	for {
		held, wake := l.Faults.held(app)
		if !held {
			break
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if r := l.Faults.get(func(f *Faults) string { return f.Rollout[app] }); r != "" {
		say(out, "Rolling out %s", app)
		for _, line := range l.scripted(env, OutputRollout, app) {
			out.Line(line)
		}
		if err := l.step(ctx); err != nil {
			return err
		}
		say(out, "0 of %d replicas ready: %s", max(a.Scaling.Min, 1), r)
		return fmt.Errorf("%s", r)
	}
	l.setRolling(env, app, true)
	defer l.setRolling(env, app, false)
	if err := l.rolloutLines(ctx, env, app, a, out); err != nil {
		return err
	}
	l.rolledOut(env, app)
	l.startPods(env, app, a.Scaling.Min)
	say(out, "%s is ready", app)
	return nil
}

// Prune implements platform.Platform: the local platform keeps nothing a
// removed service would leave.
func (l *Platform) Prune(ctx context.Context, env platform.Env, removed []platform.RemovedService, out platform.Output) error {
	return nil
}

// Probe implements platform.Platform.
func (l *Platform) Probe(ctx context.Context, domain string) platform.ProbeResult {
	return l.Prober.Probe(ctx, domain)
}

// Issue implements platform.Platform with the installation's DevIssuer.
func (l *Platform) Issue(ctx context.Context, env platform.Env, domain string, now time.Time, out platform.Output) (*platform.IssuedCertificate, platform.Issuance, error) {
	return l.DevIssuer().Issue(ctx, env, domain, now, out)
}

// DevIssuer is the development CA's issuance this platform does, a value
// another platform (Kubernetes without a ClusterIssuer) takes too.
func (l *Platform) DevIssuer() *DevIssuer {
	return &DevIssuer{CA: l.CA, Prober: l.Prober, Faults: l.Faults, StepDelay: l.StepDelay}
}

// Kind implements platform.Platform.
func (l *Platform) Kind() string { return "local" }

// Options configure the local platform.
type Options struct {
	// StepDelay is how long each simulated step takes.
	StepDelay time.Duration
	// LogEvery is how often a simulated container prints a line.
	LogEvery time.Duration
	// Resolver resolves domains (the system resolver when nil).
	Resolver platform.Resolver
	// EdgePort is the port probes and challenges reach (default 80).
	EdgePort int
	Faults   *Faults
	// ProbeTimeout bounds each address's answer (default 3s).
	ProbeTimeout time.Duration
}

// New returns the local platform of this installation and its edge
// identity, creating the installation's edge secret and development CA at
// first start.
func New(ctx context.Context, db *store.DB, vault *store.Vault, o Options) (*Platform, platform.Identity, error) {
	secret, err := vault.InstallationSecret(ctx, "edge-secret", func() ([]byte, error) {
		b := make([]byte, 32)
		_, err := rand.Read(b)
		return b, err
	})
	if err != nil {
		return nil, platform.Identity{}, fmt.Errorf("runs: edge secret: %w", err)
	}
	ca, err := LoadDevCA(ctx, db, vault)
	if err != nil {
		return nil, platform.Identity{}, err
	}
	if o.Resolver == nil {
		o.Resolver = platform.NewResolver("")
	}
	if o.EdgePort == 0 {
		o.EdgePort = 80
	}
	if o.Faults == nil {
		o.Faults = &Faults{}
	}
	id := platform.Identity{Secret: secret}
	l := &Platform{DB: db, StepDelay: o.StepDelay, LogEvery: o.LogEvery, Faults: o.Faults, CA: ca,
		Prober: &platform.Prober{Resolver: o.Resolver, EdgePort: o.EdgePort, Identity: id, Timeout: o.ProbeTimeout}}
	o.Faults.mu.Lock()
	o.Faults.changed = func() {
		l.applyPendingDrift()
		l.healthChanged(platform.Env{})
	}
	o.Faults.mu.Unlock()
	return l, id, nil
}

var (
	_ platform.Platform      = (*Platform)(nil)
	_ platform.ValueReceiver = (*Platform)(nil)
)

// receivedValues is what the local platform was handed, by environment.
type receivedValues struct {
	mu  sync.Mutex
	env map[int64]map[string]string
}

// SetValues implements platform.ValueReceiver.
func (l *Platform) SetValues(ctx context.Context, env platform.Env, values map[string]string) error {
	l.values.mu.Lock()
	defer l.values.mu.Unlock()
	if l.values.env == nil {
		l.values.env = map[int64]map[string]string{}
	}
	l.values.env[env.ID] = maps.Clone(values)
	return nil
}

// ReceivedValues returns a copy of the values the environment's
// applications were last handed (nil before any deploy reached them).
// Tests read it to see what a deploy really delivered.
func (l *Platform) ReceivedValues(envID int64) map[string]string {
	l.values.mu.Lock()
	defer l.values.mu.Unlock()
	return maps.Clone(l.values.env[envID])
}
