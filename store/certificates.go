package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/events/payload"
)

// Certificate states.
const (
	CertDeferred = "deferred"
	CertIssued   = "issued"
	CertFailed   = "failed"
)

// Certificate is the TLS state of one hostname of an environment: deferred
// while its DNS points elsewhere, issued, or failed with cert-manager's
// backoff. The certificate on hand (serial, validity) stays after a later
// failure.
type Certificate struct {
	EnvironmentID    int64
	Domain           string
	Route            string
	State            string
	Attempts         int
	Failures         int
	LastFailureAt    *time.Time
	Reason           string
	NextRetryAt      *time.Time
	RateLimitedUntil *time.Time
	BypassedFailures int
	Serial           string
	NotBefore        *time.Time
	NotAfter         *time.Time
	CertificatePEM   string
	ProbedAt         *time.Time
	UpdatedAt        time.Time
	// LastProbe is the newest probe recorded without a run (MarkProbed):
	// what the domain's addresses answered (runs.ProbeResult as JSON), at
	// LastProbeAt. Saving a certificate leaves them as they are.
	LastProbe   json.RawMessage
	LastProbeAt *time.Time
}

// Usable reports whether the certificate on hand is valid at now.
func (c *Certificate) Usable(now time.Time) bool {
	return c != nil && c.Serial != "" && c.NotAfter != nil && now.Before(*c.NotAfter)
}

const certificateColumns = `environment_id, domain, route, state, attempts, failures, last_failure_at, reason, next_retry_at,
	rate_limited_until, bypassed_failures, serial, not_before, not_after, certificate_pem, probed_at, updated_at`

// certificateSelect is what a certificate is read with: its columns and
// its newest probe recorded without a run.
const certificateSelect = certificateColumns + `, last_probe, last_probe_at`

func scanCertificate(row pgx.Row) (*Certificate, error) {
	var c Certificate
	err := row.Scan(&c.EnvironmentID, &c.Domain, &c.Route, &c.State, &c.Attempts, &c.Failures, &c.LastFailureAt, &c.Reason, &c.NextRetryAt,
		&c.RateLimitedUntil, &c.BypassedFailures, &c.Serial, &c.NotBefore, &c.NotAfter, &c.CertificatePEM, &c.ProbedAt, &c.UpdatedAt,
		&c.LastProbe, &c.LastProbeAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "No certificate for this domain.")
	}
	if err != nil {
		return nil, err
	}
	return &c, nil
}

func upsertCertificate(ctx context.Context, tx pgx.Tx, c *Certificate, now time.Time) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO certificates (`+certificateColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
		ON CONFLICT (environment_id, domain) DO UPDATE SET
		    route = EXCLUDED.route, state = EXCLUDED.state, attempts = EXCLUDED.attempts, failures = EXCLUDED.failures,
		    last_failure_at = EXCLUDED.last_failure_at, reason = EXCLUDED.reason, next_retry_at = EXCLUDED.next_retry_at,
		    rate_limited_until = EXCLUDED.rate_limited_until, bypassed_failures = EXCLUDED.bypassed_failures,
		    serial = EXCLUDED.serial, not_before = EXCLUDED.not_before, not_after = EXCLUDED.not_after,
		    certificate_pem = EXCLUDED.certificate_pem, probed_at = EXCLUDED.probed_at, updated_at = EXCLUDED.updated_at`,
		c.EnvironmentID, c.Domain, c.Route, c.State, c.Attempts, c.Failures, c.LastFailureAt, c.Reason, c.NextRetryAt,
		c.RateLimitedUntil, c.BypassedFailures, c.Serial, c.NotBefore, c.NotAfter, c.CertificatePEM, c.ProbedAt, now)
	if err != nil {
		return fmt.Errorf("store: save certificate: %w", err)
	}
	return nil
}

// CertificateFor returns the certificate state of the environment's domain.
func (db *DB) CertificateFor(ctx context.Context, envID int64, domain string) (*Certificate, error) {
	c, err := scanCertificate(db.Pool.QueryRow(ctx, `SELECT `+certificateSelect+` FROM certificates WHERE environment_id = $1 AND domain = $2`, envID, domain))
	if err != nil && apperr.CodeOf(err) != apperr.NotFound {
		return nil, fmt.Errorf("store: certificate: %w", err)
	}
	return c, err
}

// IssuedForRoute returns a usable certificate the route holds for a domain
// other than domain (the route was renamed), or nil.
func (db *DB) IssuedForRoute(ctx context.Context, envID int64, route, domain string) (*Certificate, error) {
	c, err := scanCertificate(db.Pool.QueryRow(ctx, `
		SELECT `+certificateSelect+` FROM certificates
		WHERE environment_id = $1 AND route = $2 AND domain <> $3 AND serial <> '' AND not_after > $4
		ORDER BY updated_at DESC LIMIT 1`, envID, route, domain, db.Now()))
	if apperr.CodeOf(err) == apperr.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: certificate for route: %w", err)
	}
	return c, nil
}

// Certificates returns the environment's certificates by domain.
func (db *DB) Certificates(ctx context.Context, envID int64) ([]Certificate, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+certificateSelect+` FROM certificates WHERE environment_id = $1 ORDER BY domain`, envID)
	return collectCertificates(rows)
}

// UnissuedCertificates returns every deferred or failed certificate of
// every environment: what the reconciler re-probes.
func (db *DB) UnissuedCertificates(ctx context.Context) ([]Certificate, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+certificateSelect+` FROM certificates WHERE state <> 'issued' ORDER BY environment_id, domain`)
	return collectCertificates(rows)
}

func collectCertificates(rows pgx.Rows) ([]Certificate, error) {
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Certificate, error) {
		c, err := scanCertificate(row)
		if err != nil {
			return Certificate{}, err
		}
		return *c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: certificates: %w", err)
	}
	return out, nil
}

// AuditCheckNow records that a person asked to probe domains now.
func (db *DB) AuditCheckNow(ctx context.Context, a Actor, env *Environment, domains []string) error {
	e := a.event("domains.checked")
	e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, env.Name
	e.Detail = map[string]any{"domains": domains}
	return db.Audit(ctx, e)
}

// MarkProbed records that the unissued certificate of domain was probed at
// at and does not point here yet: the pages count its next automatic check
// from then. For a DNS-pending domain it also appends a service.checked
// event, in the same transaction, so that a page that counted down to this
// check (and says "checking…") restarts the countdown.
//
// probe is what the domain's addresses answered (runs.ProbeResult as JSON):
// kept as the certificate's LastProbe, the pages show it with its time. A
// certificate that failed and waits for its retry gets the event too: its
// countdown restarts as well.
func (db *DB) MarkProbed(ctx context.Context, envID int64, domain string, at time.Time, probe json.RawMessage) error {
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var state string
		err := tx.QueryRow(ctx, `UPDATE certificates SET probed_at = $3, last_probe = $4, last_probe_at = $3
			WHERE environment_id = $1 AND domain = $2 AND state <> 'issued' RETURNING state`,
			envID, domain, at, probe).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = appendEnvironmentEvent(ctx, tx, envID, nil, payload.EnvironmentChanged{Type: payload.KindServiceChecked,
			Service: &payload.ServiceState{Domain: domain, State: map[bool]string{true: "DNS pending", false: "cert failed"}[state == CertDeferred]}})
		return err
	})
	if err != nil {
		return fmt.Errorf("store: mark probed: %w", err)
	}
	return nil
}

// ProbeRecord is the newest checkpoint of an environment that recorded what
// a domain's addresses answered: its detail (decoded by runs), its run and
// when it was recorded.
type ProbeRecord struct {
	RunID  int64
	Detail []byte
	At     time.Time
}

// LatestProbe returns the newest Issue TLS or domain-arrival checkpoint of
// the environment that probed domain, among its last 200 runs; NotFound
// when none did. The runs are read as newestRunsOf reads them.
func (db *DB) LatestProbe(ctx context.Context, envID int64, domain string) (*ProbeRecord, error) {
	var p ProbeRecord
	var at *time.Time
	err := db.Pool.QueryRow(ctx, `
		SELECT c.run_id, c.detail, COALESCE(c.finished_at, c.started_at)
		FROM environments e CROSS JOIN LATERAL (
		    SELECT id FROM runs WHERE environment_id = e.id ORDER BY id DESC LIMIT 200) r
		JOIN run_checkpoints c ON c.run_id = r.id
		WHERE e.id = $1 AND c.kind IN ('issue-tls', 'probe')
		  AND (c.detail->'tls'->>'domain' = $2 AND c.detail->'tls' ? 'verdict' OR c.detail->'probe'->>'domain' = $2)
		ORDER BY r.id DESC, c.position DESC LIMIT 1`, envID, domain).Scan(&p.RunID, &p.Detail, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "No probe of %s yet.", domain)
	}
	if err != nil {
		return nil, fmt.Errorf("store: latest probe: %w", err)
	}
	if at != nil {
		p.At = *at
	}
	return &p, nil
}
