package runs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
)

// Platform does a run's work on a cluster. Every method is idempotent for
// the same environment and service, so a resumed run may call it again.
type Platform interface {
	ProvisionDatabase(ctx context.Context, envID int64, name string, d *compiler.Database) error
	ProvisionBucket(ctx context.Context, envID int64, name string, b *compiler.Bucket) error
	// BucketBytes is what a live bucket stores.
	BucketBytes(ctx context.Context, envID int64, name string) int64
	// Build builds or imports an application's image and returns its reference.
	Build(ctx context.Context, envID int64, app string, a *compiler.Application) (string, error)
	// Release runs the application's release command once; ctx carries its
	// timeout. The platform keeps what the command came to under key.
	Release(ctx context.Context, envID int64, app string, cmd *compiler.ReleaseCommand, key ReleaseKey) error
	// ReleaseOutcome says what the release command started under key came
	// to, for a run resumed after the process that ran it stopped.
	ReleaseOutcome(ctx context.Context, key ReleaseKey) (ReleaseOutcome, error)
	// Rollout replaces the application's version by its strategy; ctx
	// carries the rollout timeout.
	Rollout(ctx context.Context, envID int64, app string, a *compiler.Application) error
	// Probe checks where a domain points.
	Probe(ctx context.Context, domain string) ProbeResult
	// Issue requests a certificate for a domain that points here.
	Issue(ctx context.Context, domain string, now time.Time) (*IssuedCertificate, Issuance, error)

	// Backups (runs/backup_local.go).
	BackupPlatform
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
	defer f.mu.Unlock()
	change(f)
}

func (f *Faults) get(read func(f *Faults) string) string {
	if f == nil {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return read(f)
}

// Local is the embedded platform: it simulates a cluster's work with a
// delay per step and injected faults, but resolves DNS, probes addresses
// and issues X.509 certificates for real.
type Local struct {
	// DB keeps what release commands came to (ReleaseOutcome); without it
	// nothing is kept and every outcome is unknown.
	DB        *store.DB
	StepDelay time.Duration
	Faults    *Faults
	Prober    *Prober
	CA        *DevCA
	// values keeps what SetValues received, as a cluster keeps a Secret.
	values receivedValues
}

func (l *Local) step(ctx context.Context) error {
	if l.StepDelay <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(l.StepDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ProvisionDatabase implements Platform.
func (l *Local) ProvisionDatabase(ctx context.Context, envID int64, name string, d *compiler.Database) error {
	return l.step(ctx)
}

// ProvisionBucket implements Platform.
func (l *Local) ProvisionBucket(ctx context.Context, envID int64, name string, b *compiler.Bucket) error {
	return l.step(ctx)
}

// BucketBytes implements Platform.
func (l *Local) BucketBytes(ctx context.Context, envID int64, name string) int64 {
	if l.Faults == nil {
		return 0
	}
	l.Faults.mu.Lock()
	defer l.Faults.mu.Unlock()
	return l.Faults.BucketBytes[name]
}

// Build implements Platform.
func (l *Local) Build(ctx context.Context, envID int64, app string, a *compiler.Application) (string, error) {
	if err := l.step(ctx); err != nil {
		return "", err
	}
	if r := l.Faults.get(func(f *Faults) string { return f.Build[app] }); r != "" {
		return "", fmt.Errorf("%s", r)
	}
	if a.Image != "" {
		return a.Image, nil
	}
	return fmt.Sprintf("registry.local/%d/%s:%s", envID, app, randomToken()[:12]), nil
}

// Release implements Platform. The simulated command runs inside this
// process, so it dies with it: the outcome records its start and its end.
func (l *Local) Release(ctx context.Context, envID int64, app string, cmd *compiler.ReleaseCommand, key ReleaseKey) error {
	if l.DB != nil {
		if err := withRetry(ctx, func(ctx context.Context, _ int) error { return l.DB.StartLocalRelease(ctx, key.RunID, key.Position) }); err != nil {
			return err
		}
	}
	err := l.step(ctx)
	if err == nil {
		if r := l.Faults.get(func(f *Faults) string { return f.Release[app] }); r != "" {
			err = fmt.Errorf("%s", r)
		}
	}
	if l.DB != nil && ctx.Err() == nil {
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if rerr := withRetry(ctx, func(ctx context.Context, _ int) error {
			return l.DB.FinishLocalRelease(ctx, key.RunID, key.Position, msg)
		}); rerr != nil && err == nil {
			return rerr
		}
	}
	return err
}

// ReleaseOutcome implements Platform.
func (l *Local) ReleaseOutcome(ctx context.Context, key ReleaseKey) (ReleaseOutcome, error) {
	if l.DB == nil {
		return ReleaseOutcome{State: ReleaseUnknown}, nil
	}
	o, err := l.DB.LocalRelease(ctx, key.RunID, key.Position)
	switch {
	case err != nil:
		return ReleaseOutcome{}, err
	case !o.Started:
		return ReleaseOutcome{State: ReleaseNotStarted}, nil
	case !o.Finished:
		// Started by a process that stopped before it ended: the command
		// stopped with it, halfway.
		return ReleaseOutcome{State: ReleaseUnknown}, nil
	case o.Error != "":
		return ReleaseOutcome{State: ReleaseFailed, Error: o.Error}, nil
	}
	return ReleaseOutcome{State: ReleaseSucceeded}, nil
}

// Rollout implements Platform.
func (l *Local) Rollout(ctx context.Context, envID int64, app string, a *compiler.Application) error {
	if err := l.step(ctx); err != nil {
		return err
	}
	if r := l.Faults.get(func(f *Faults) string { return f.Rollout[app] }); r != "" {
		return fmt.Errorf("%s", r)
	}
	return nil
}

// Probe implements Platform.
func (l *Local) Probe(ctx context.Context, domain string) ProbeResult {
	return l.Prober.Probe(ctx, domain)
}

// Issue implements Platform: a certificate request, an order and an HTTP-01
// challenge fetched from the domain through the same resolver and edge port.
func (l *Local) Issue(ctx context.Context, domain string, now time.Time) (*IssuedCertificate, Issuance, error) {
	var is Issuance
	if w := l.Faults.get(func(f *Faults) string { return f.RateLimit[domain] }); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil {
			d = time.Hour
		}
		until := now.Add(d)
		return nil, is, &IssueError{Reason: "urn:ietf:params:acme:error:rateLimited: too many certificates already issued for this domain; retry after " + until.UTC().Format(time.RFC3339), RetryAfter: &until}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, is, err
	}
	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: domain}, DNSNames: []string{domain}}, key)
	if err != nil {
		return nil, is, err
	}
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, is, err
	}
	is.CertificateRequest = "certificaterequest-" + randomToken()[:10]
	is.Order = "order-" + randomToken()[:10]
	token := randomToken()
	is.Challenge = "http-01 " + token[:12]
	is.ChallengeURL = fmt.Sprintf("http://%s:%d%s%s", domain, l.Prober.EdgePort, ChallengePrefix, token)
	if r := l.Faults.get(func(f *Faults) string { return f.Issuance[domain] }); r != "" {
		is.ChallengeResult = "invalid"
		return nil, is, &IssueError{Reason: r}
	}
	if err := l.step(ctx); err != nil {
		return nil, is, err
	}
	ips, err := l.Prober.Resolver.LookupIP(ctx, "ip", domain)
	if err != nil || len(ips) == 0 {
		is.ChallengeResult = "invalid"
		return nil, is, &IssueError{Reason: "Waiting for HTTP-01 challenge propagation: " + dnsErrorText(err)}
	}
	body, err := l.Prober.fetch(ctx, ips[0], domain, ChallengePrefix+token)
	if err != nil || body != l.Prober.Identity.KeyAuthorization(token) {
		is.ChallengeResult = "invalid"
		return nil, is, &IssueError{Reason: fmt.Sprintf("Waiting for HTTP-01 challenge propagation: wrong status code or key authorization from %s", ips[0])}
	}
	is.ChallengeResult = "valid"
	cert, err := l.CA.Sign(csr, domain, now)
	if err != nil {
		return nil, is, err
	}
	return cert, is, nil
}

// LocalOptions configure the local platform.
type LocalOptions struct {
	// StepDelay is how long each simulated step takes.
	StepDelay time.Duration
	// Resolver resolves domains (the system resolver when nil).
	Resolver Resolver
	// EdgePort is the port probes and challenges reach (default 80).
	EdgePort int
	Faults   *Faults
	// ProbeTimeout bounds each address's answer (default 3s).
	ProbeTimeout time.Duration
}

// NewLocal returns the local platform of this installation and its edge
// identity, creating the installation's edge secret and development CA at
// first start.
func NewLocal(ctx context.Context, db *store.DB, vault *store.Vault, o LocalOptions) (*Local, Identity, error) {
	secret, err := vault.InstallationSecret(ctx, "edge-secret", func() ([]byte, error) {
		b := make([]byte, 32)
		_, err := rand.Read(b)
		return b, err
	})
	if err != nil {
		return nil, Identity{}, fmt.Errorf("runs: edge secret: %w", err)
	}
	ca, err := LoadDevCA(ctx, db, vault)
	if err != nil {
		return nil, Identity{}, err
	}
	if o.Resolver == nil {
		o.Resolver = NewResolver("")
	}
	if o.EdgePort == 0 {
		o.EdgePort = 80
	}
	if o.Faults == nil {
		o.Faults = &Faults{}
	}
	id := Identity{Secret: secret}
	return &Local{DB: db, StepDelay: o.StepDelay, Faults: o.Faults, CA: ca,
		Prober: &Prober{Resolver: o.Resolver, EdgePort: o.EdgePort, Identity: id, Timeout: o.ProbeTimeout}}, id, nil
}
