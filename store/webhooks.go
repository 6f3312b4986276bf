package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs/platform"
)

// Webhook event types: what an endpoint may choose to hear of.
const (
	WebhookDeployStarted               = "deploy.started"
	WebhookDeploySucceeded             = "deploy.succeeded"
	WebhookDeploySucceededWithWarnings = "deploy.succeeded_with_warnings"
	WebhookDeployFailed                = "deploy.failed"
	WebhookDeployCancelled             = "deploy.cancelled"
	WebhookCertificateIssued           = "certificate.issued"
	WebhookCertificateFailed           = "certificate.failed"
	WebhookBackupFailed                = "backup.failed"
	WebhookBackupAlarmRaised           = "backup.alarm_raised"
	WebhookBackupAlarmCleared          = "backup.alarm_cleared"
	WebhookBackupDrillFailed           = "backup.drill_failed"
	WebhookRestoreFinished             = "restore.finished"
	WebhookApprovalRequested           = "approval.requested"
	WebhookApprovalGranted             = "approval.granted"
	WebhookApprovalRejected            = "approval.rejected"
)

// WebhookEventType is an event type with the words the page shows for it.
type WebhookEventType struct {
	Name, Label string
}

// WebhookEventTypes are every event type, in the order the page lists them.
var WebhookEventTypes = []WebhookEventType{
	{WebhookDeployStarted, "Deploy started"},
	{WebhookDeploySucceeded, "Deploy succeeded"},
	{WebhookDeploySucceededWithWarnings, "Deploy succeeded with warnings"},
	{WebhookDeployFailed, "Deploy failed"},
	{WebhookDeployCancelled, "Deploy cancelled"},
	{WebhookCertificateIssued, "Certificate issued"},
	{WebhookCertificateFailed, "Certificate failed"},
	{WebhookBackupFailed, "Backup failed"},
	{WebhookBackupAlarmRaised, "Backup alarm raised"},
	{WebhookBackupAlarmCleared, "Backup alarm cleared"},
	{WebhookBackupDrillFailed, "Restore drill failed"},
	{WebhookRestoreFinished, "Restore finished"},
	{WebhookApprovalRequested, "Approval requested"},
	{WebhookApprovalGranted, "Approval granted"},
	{WebhookApprovalRejected, "Approval rejected"},
	{WebhookAppUnhealthy, "Application unhealthy"},
	{WebhookAppRecovered, "Application recovered"},
	{WebhookDriftDetected, "Drift detected"},
}

// WebhookEventLabel is the words for event type name (the name itself when
// unknown).
func WebhookEventLabel(name string) string {
	if name == WebhookTest {
		return "Test event"
	}
	for _, t := range WebhookEventTypes {
		if t.Name == name {
			return t.Label
		}
	}
	return name
}

// Webhook body formats.
const (
	WebhookFormatStandard = "standard"
	WebhookFormatSlack    = "slack"
)

// Webhook delivery statuses.
const (
	WebhookPending   = "pending"
	WebhookRetrying  = "retrying"
	WebhookSucceeded = "succeeded"
	WebhookFailed    = "failed"
)

// WebhookEndpoint is a URL that hears of chosen events of one environment,
// or of every environment (EnvironmentID nil: an installation admin's).
type WebhookEndpoint struct {
	ID            int64
	EnvironmentID *int64
	// Project and Environment name its environment ("" for every one).
	Project, Environment string
	URL                  string
	Events               []string
	Format               string
	CreatedBy            string
	CreatedAt            time.Time
	LastSuccessAt        *time.Time
	DisabledAt           *time.Time
	// DisabledReason says why it is off: turned off by someone, or kept failing.
	DisabledReason string
}

// Wants reports whether the endpoint chose event.
func (e *WebhookEndpoint) Wants(event string) bool {
	for _, ev := range e.Events {
		if ev == event {
			return true
		}
	}
	return false
}

// WebhookData is what an event says: names, states and the path of the page
// it concerns, never a value. The sender makes the path a link.
type WebhookData struct {
	Project     string `json:"project"`
	Environment string `json:"environment"`
	// Path is the page of the run, the environment or its backups.
	Path        string              `json:"path"`
	Run         *WebhookRun         `json:"run,omitempty"`
	Certificate *WebhookCertificate `json:"certificate,omitempty"`
	// Alarm is the backup alarm's reason (raised) or the one it had (cleared).
	Alarm string `json:"alarm,omitempty"`
	// App is the application whose health changed (app.unhealthy,
	// app.recovered).
	App *WebhookApp `json:"app,omitempty"`
	// Drift is what was newly seen to differ from what the Studio applied
	// (drift.detected).
	Drift []platform.Drift `json:"drift,omitempty"`
}

// WebhookRun is the run an event concerns.
type WebhookRun struct {
	ID int64 `json:"id"`
	// Number counts the runs of the environment: how people name the run
	// ("#12 of production"); id is the run's id in URLs and the API.
	Number   int    `json:"number"`
	Kind     string `json:"kind"`
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
	Revision int    `json:"revision,omitempty"`
	// StartedBy names who started the run ("" for the Studio itself).
	StartedBy string `json:"started_by,omitempty"`
	// Deferred are the hostnames whose certificates the deploy deferred
	// (DNS pending): a deploy that succeeded with warnings says which.
	Deferred []string `json:"deferred,omitempty"`
}

// WebhookCertificate is the certificate an event concerns.
type WebhookCertificate struct {
	Domain   string     `json:"domain"`
	State    string     `json:"state"`
	Reason   string     `json:"reason,omitempty"`
	NotAfter *time.Time `json:"not_after,omitempty"`
}

// WebhookDelivery is one event sent (or to send) to one endpoint.
type WebhookDelivery struct {
	ID         int64
	EndpointID int64
	// MessageID is the webhook-id header; a redelivery keeps its original's.
	MessageID     string
	Event         string
	Data          WebhookData
	OccurredAt    time.Time
	Status        string
	Attempts      int
	ResponseCode  *int
	Duration      *time.Duration
	LastError     string
	LastAttemptAt *time.Time
	RedeliveryOf  *int64
	CreatedAt     time.Time
	// InFlightSince is when the attempt in flight now began (nil when
	// none): a process holds its lease (WebhookLockClass) and sends it.
	InFlightSince *time.Time
}

// WebhookLockClass is the first key of the PostgreSQL advisory lock a
// process holds, on a connection of its own, while an attempt of a
// delivery is in flight; the second is WebhookLockKey of the delivery's
// id. The lock is the attempt's lease: it ends with the process (its
// connection closes), so an attempt whose job still looks running but
// whose lock nobody holds was lost with its process.
const WebhookLockClass int32 = 0x77686b31 // "whk1"

// WebhookLockKey is the second key of delivery id's lock.
func WebhookLockKey(id int64) int32 { return int32(id % (1 << 31)) }

// webhookInFlight is the start of the attempt of delivery d in flight:
// its River job running and its lock held.
var webhookInFlight = fmt.Sprintf(`(SELECT j.attempted_at FROM river_job j
	WHERE j.kind = 'studio_webhook' AND j.state = 'running' AND j.args @> jsonb_build_object('delivery_id', d.id)
	  AND NOT (j.metadata ? 'cancel_attempted_at')
	  AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
	      AND l.classid = %d::oid AND l.objid = (d.id %% 2147483648)::oid)
	ORDER BY j.id DESC LIMIT 1)`, WebhookLockClass)

// WebhookWorkKind is the kind of the River job that delivers a delivery
// (runs.WebhookArgs).
const WebhookWorkKind = "studio_webhook"

// LostWebhookAttempt is an attempt whose River job still looks running
// while no process holds its lease: its process died mid-attempt.
type LostWebhookAttempt struct {
	JobID, DeliveryID int64
	// Attempts is how many attempts of the delivery are recorded now, the
	// lost one included; Resend is false when the delivery needs no other
	// attempt (it succeeded or failed for good meanwhile, or is gone).
	Attempts int
	Resend   bool
}

// lostWebhookAttemptError is what a lost attempt reads as on the page
// ({n} is its number).
const lostWebhookAttemptError = "Attempt {n} did not finish: the Studio process sending it stopped before an answer came. It is sent again with the same webhook-id (the endpoint may have received it)."

// TakeOverLostWebhookAttempts finds every delivery attempt whose job has
// looked running for longer than after while no process holds its lease,
// records it as an attempt that did not finish, and calls requeue in the
// same transaction (which ends the lost job and inserts the next). Jobs are
// claimed with SKIP LOCKED and a job once handed over is marked by
// requeue, so each lost attempt is taken over once whichever process
// looks. It returns the deliveries taken over.
func (db *DB) TakeOverLostWebhookAttempts(ctx context.Context, after time.Duration, requeue func(ctx context.Context, tx pgx.Tx, l LostWebhookAttempt) error) ([]int64, error) {
	var ids []int64
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		ids = nil
		rows, _ := tx.Query(ctx, `SELECT j.id, (j.args->>'delivery_id')::bigint FROM river_job j
			WHERE j.kind = $1 AND j.state = 'running' AND NOT (j.metadata ? 'cancel_attempted_at')
			  AND j.attempted_at < now() - make_interval(secs => $2)
			  AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
			      AND l.classid = $3::oid AND l.objid = (((j.args->>'delivery_id')::bigint) % 2147483648)::oid)
			ORDER BY j.id LIMIT 100 FOR UPDATE OF j SKIP LOCKED`, WebhookWorkKind, after.Seconds(), int64(WebhookLockClass))
		lost, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (LostWebhookAttempt, error) {
			var l LostWebhookAttempt
			return l, row.Scan(&l.JobID, &l.DeliveryID)
		})
		if err != nil {
			return err
		}
		for _, l := range lost {
			err := tx.QueryRow(ctx, `UPDATE webhook_deliveries SET status = 'retrying', attempts = attempts + 1, response_code = NULL,
				duration_ms = NULL, last_error = replace($3, '{n}', (attempts + 1)::text), last_attempt_at = $2
				WHERE id = $1 AND status IN ('pending', 'retrying') RETURNING attempts`, l.DeliveryID, db.Now(), lostWebhookAttemptError).Scan(&l.Attempts)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return err
			default:
				l.Resend = true
			}
			if err := requeue(ctx, tx, l); err != nil {
				return err
			}
			ids = append(ids, l.DeliveryID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: take over lost webhook attempts: %w", err)
	}
	return ids, nil
}

// WebhookEnqueuer inserts the job that delivers a delivery, inside the
// transaction that records it.
type WebhookEnqueuer func(ctx context.Context, tx pgx.Tx, deliveryID int64) error

// SetWebhookEnqueuer makes every delivery recorded from now on insert its
// job with fn in the same transaction (the runs package sets it when its
// River client starts). Without one, a delivery waits for the periodic
// sweep of a process that has one (PendingWebhookDeliveries).
func (db *DB) SetWebhookEnqueuer(fn WebhookEnqueuer) { db.webhookJobs.Store(&fn) }

func (db *DB) webhookEnqueuer() WebhookEnqueuer {
	if fn := db.webhookJobs.Load(); fn != nil {
		return *fn
	}
	return nil
}

// NewWebhookEndpoint is an endpoint to add.
type NewWebhookEndpoint struct {
	URL    string
	Events []string
	Format string
}

// webhookSecretKey is the installation setting (sealed) holding the
// endpoint's signing secret.
func webhookSecretKey(endpointID int64) string { return "webhook:" + strconv.FormatInt(endpointID, 10) }

// newWebhookSecret is a signing secret as Standard Webhooks writes one:
// "whsec_" and the base64 of 32 random bytes (the HMAC key).
func newWebhookSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b), nil
}

// CreateWebhookEndpoint adds an endpoint for env (nil: every environment)
// with a new signing secret, sealed like a value, and its audit record, in
// one transaction. It returns the endpoint and its secret, which is shown
// once and never again.
func (v *Vault) CreateWebhookEndpoint(ctx context.Context, a Actor, env *Environment, n NewWebhookEndpoint) (*WebhookEndpoint, string, error) {
	secret, err := newWebhookSecret()
	if err != nil {
		return nil, "", fmt.Errorf("store: webhook secret: %w", err)
	}
	var envID *int64
	if env != nil {
		envID = &env.ID
	}
	var id int64
	err = v.db.InTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO webhook_endpoints (environment_id, url, events, format, created_by, created_at)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, envID, n.URL, n.Events, n.Format, a.userID(), v.db.Now()).Scan(&id); err != nil {
			return err
		}
		keyID, err := activeKey(ctx, tx)
		if err != nil {
			return err
		}
		name := webhookSecretKey(id)
		nonce, ct, err := v.keys.seal(keyID, 0, name, 1, []byte(secret))
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO installation_settings (key, value) VALUES ($1, $2)`,
			sealedPrefix+name, encodeSealed(keyID, nonce, ct)); err != nil {
			return err
		}
		e := a.event("webhook.created")
		e.Target = webhookAuditTarget(n.URL)
		e.Detail = map[string]any{"endpoint": id, "events": n.Events, "format": n.Format}
		if env != nil {
			e.Project, e.Environment, e.EnvironmentID = env.Project, env.Name, &env.ID
		} else {
			e.Detail["scope"] = "every environment"
		}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return nil, "", fmt.Errorf("store: create webhook endpoint: %w", err)
	}
	ep, err := v.db.WebhookEndpointByID(ctx, id)
	return ep, secret, err
}

// WebhookSecret opens the endpoint's signing secret.
func (v *Vault) WebhookSecret(ctx context.Context, endpointID int64) (string, error) {
	b, err := v.readSecret(ctx, webhookSecretKey(endpointID))
	if err != nil {
		return "", err
	}
	if b == nil {
		return "", apperr.Errorf(apperr.NotFound, "No such webhook endpoint.")
	}
	return string(b), nil
}

var webhookEndpointColumns = `w.id, w.environment_id, COALESCE(p.name, ''), COALESCE(e.name, ''), w.url, w.events, w.format,
	` + displayNameOf("w.created_by") + `, w.created_at, w.last_success_at, w.disabled_at, w.disabled_reason`

const webhookEndpointFrom = ` FROM webhook_endpoints w LEFT JOIN environments e ON e.id = w.environment_id LEFT JOIN projects p ON p.id = e.project_id`

func collectWebhookEndpoint(row pgx.CollectableRow) (WebhookEndpoint, error) {
	var w WebhookEndpoint
	err := row.Scan(&w.ID, &w.EnvironmentID, &w.Project, &w.Environment, &w.URL, &w.Events, &w.Format,
		&w.CreatedBy, &w.CreatedAt, &w.LastSuccessAt, &w.DisabledAt, &w.DisabledReason)
	return w, err
}

// WebhookEndpointByID returns one endpoint.
func (db *DB) WebhookEndpointByID(ctx context.Context, id int64) (*WebhookEndpoint, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+webhookEndpointColumns+webhookEndpointFrom+` WHERE w.id = $1`, id)
	w, err := pgx.CollectExactlyOneRow(rows, collectWebhookEndpoint)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "No such webhook endpoint.")
	}
	if err != nil {
		return nil, fmt.Errorf("store: webhook endpoint: %w", err)
	}
	return &w, nil
}

// WebhookEndpoints returns the endpoints of the environment envID and those
// of every environment, or with envID 0 only those of every environment,
// oldest first.
func (db *DB) WebhookEndpoints(ctx context.Context, envID int64) ([]WebhookEndpoint, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+webhookEndpointColumns+webhookEndpointFrom+`
		WHERE w.environment_id IS NULL OR w.environment_id = $1 ORDER BY w.environment_id NULLS LAST, w.id`, envID)
	out, err := pgx.CollectRows(rows, collectWebhookEndpoint)
	if err != nil {
		return nil, fmt.Errorf("store: webhook endpoints: %w", err)
	}
	return out, nil
}

// webhookAuditTarget is an endpoint's URL as the audit log names it: its
// scheme and host only, since chat services put their credential in the
// path (https://hooks.slack.com/services/T…/B…/SECRET).
func webhookAuditTarget(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "webhook endpoint"
	}
	t := u.Scheme + "://" + u.Host
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		t += "/…"
	}
	return t
}

func webhookAudit(a Actor, action string, w *WebhookEndpoint) AuditEvent {
	e := a.event(action)
	e.Target = webhookAuditTarget(w.URL)
	e.Detail = map[string]any{"endpoint": w.ID}
	if w.EnvironmentID != nil {
		e.Project, e.Environment, e.EnvironmentID = w.Project, w.Environment, w.EnvironmentID
	} else {
		e.Detail["scope"] = "every environment"
	}
	return e
}

// DeleteWebhookEndpoint removes the endpoint, its secret and its deliveries,
// with its audit record.
func (db *DB) DeleteWebhookEndpoint(ctx context.Context, a Actor, w *WebhookEndpoint) error {
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, w.ID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return apperr.Errorf(apperr.NotFound, "No such webhook endpoint.")
		}
		return auditTx(ctx, tx, webhookAudit(a, "webhook.deleted", w))
	})
	if err != nil {
		return fmt.Errorf("store: delete webhook endpoint: %w", err)
	}
	return nil
}

// SetWebhookEndpointEnabled turns the endpoint on or off, with its audit
// record. Turned off, it is sent nothing; turned on again, it hears of
// events from then on.
func (db *DB) SetWebhookEndpointEnabled(ctx context.Context, a Actor, w *WebhookEndpoint, enabled bool) error {
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		action := "webhook.enabled"
		if enabled {
			_, err = tx.Exec(ctx, `UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = '' WHERE id = $1`, w.ID)
		} else {
			action = "webhook.disabled"
			_, err = tx.Exec(ctx, `UPDATE webhook_endpoints SET disabled_at = $2, disabled_reason = 'Turned off by an admin.'
				WHERE id = $1 AND disabled_at IS NULL`, w.ID, db.Now())
		}
		if err != nil {
			return err
		}
		return auditTx(ctx, tx, webhookAudit(a, action, w))
	})
	if err != nil {
		return fmt.Errorf("store: webhook endpoint on/off: %w", err)
	}
	return nil
}

var webhookDeliveryColumns = `d.id, d.endpoint_id, d.message_id, d.event, d.data, d.occurred_at, d.status, d.attempts,
	d.response_code, d.duration_ms, d.last_error, d.last_attempt_at, d.redelivery_of, d.created_at,
	CASE WHEN d.status IN ('pending', 'retrying') THEN ` + webhookInFlight + ` END`

func collectWebhookDelivery(row pgx.CollectableRow) (WebhookDelivery, error) {
	var d WebhookDelivery
	var data []byte
	var ms *int64
	err := row.Scan(&d.ID, &d.EndpointID, &d.MessageID, &d.Event, &data, &d.OccurredAt, &d.Status, &d.Attempts,
		&d.ResponseCode, &ms, &d.LastError, &d.LastAttemptAt, &d.RedeliveryOf, &d.CreatedAt, &d.InFlightSince)
	if err != nil {
		return d, err
	}
	if ms != nil {
		dur := time.Duration(*ms) * time.Millisecond
		d.Duration = &dur
	}
	return d, json.Unmarshal(data, &d.Data)
}

// WebhookDeliveries returns the newest deliveries to the endpoints, at most
// limit, newest first.
func (db *DB) WebhookDeliveries(ctx context.Context, endpointIDs []int64, limit int) ([]WebhookDelivery, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+webhookDeliveryColumns+` FROM webhook_deliveries d
		WHERE d.endpoint_id = ANY($1) ORDER BY d.id DESC LIMIT $2`, endpointIDs, limit)
	out, err := pgx.CollectRows(rows, collectWebhookDelivery)
	if err != nil {
		return nil, fmt.Errorf("store: webhook deliveries: %w", err)
	}
	return out, nil
}

// WebhookDeliveryByID returns one delivery.
func (db *DB) WebhookDeliveryByID(ctx context.Context, id int64) (*WebhookDelivery, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT `+webhookDeliveryColumns+` FROM webhook_deliveries d WHERE d.id = $1`, id)
	d, err := pgx.CollectExactlyOneRow(rows, collectWebhookDelivery)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "No such webhook delivery.")
	}
	if err != nil {
		return nil, fmt.Errorf("store: webhook delivery: %w", err)
	}
	return &d, nil
}

// Redeliver sends delivery d of endpoint w again: a new delivery with the
// same webhook-id (so a receiver that already handled it can tell) and
// body, its job inserted in the same transaction, with its audit record.
func (db *DB) Redeliver(ctx context.Context, a Actor, w *WebhookEndpoint, d *WebhookDelivery) (int64, error) {
	var id int64
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO webhook_deliveries (endpoint_id, message_id, event, data, occurred_at, redelivery_of, created_at)
			SELECT endpoint_id, message_id, event, data, occurred_at, id, $3 FROM webhook_deliveries WHERE id = $1 AND endpoint_id = $2
			RETURNING id`, d.ID, w.ID, db.Now()).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return apperr.Errorf(apperr.NotFound, "No such webhook delivery.")
		}
		if err != nil {
			return err
		}
		if fn := db.webhookEnqueuer(); fn != nil {
			if err := fn(ctx, tx, id); err != nil {
				return err
			}
		}
		e := webhookAudit(a, "webhook.redelivered", w)
		e.Detail["delivery"], e.Detail["event"] = d.ID, d.Event
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return 0, fmt.Errorf("store: redeliver: %w", err)
	}
	return id, nil
}

// recordWebhookEvent records event of the environment as a delivery to
// every enabled endpoint that chose it, inside tx (the transaction of the
// change that caused it), and inserts their jobs there too. data's project
// and environment are filled in here. Nothing is written when no endpoint
// wants it.
func (db *DB) recordWebhookEvent(ctx context.Context, tx pgx.Tx, envID int64, event string, data WebhookData) error {
	var wanted bool
	err := tx.QueryRow(ctx, `SELECT p.name, e.name, EXISTS (SELECT 1 FROM webhook_endpoints w
		    WHERE (w.environment_id = e.id OR w.environment_id IS NULL) AND w.disabled_at IS NULL AND $2 = ANY(w.events))
		FROM environments e JOIN projects p ON p.id = e.project_id WHERE e.id = $1`, envID, event).Scan(&data.Project, &data.Environment, &wanted)
	if err != nil || !wanted {
		return err
	}
	if data.Path == "" {
		data.Path = paths.Environment(data.Project, data.Environment)
	}
	body, err := json.Marshal(data)
	if err != nil {
		return err
	}
	rows, _ := tx.Query(ctx, `INSERT INTO webhook_deliveries (endpoint_id, message_id, event, data, occurred_at, created_at)
		SELECT w.id, 'msg_' || replace(gen_random_uuid()::text, '-', ''), $2, $3, $4, $4 FROM webhook_endpoints w
		WHERE (w.environment_id = $1 OR w.environment_id IS NULL) AND w.disabled_at IS NULL AND $2 = ANY(w.events)
		RETURNING id`, envID, event, body, db.Now())
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("store: record webhook %s: %w", event, err)
	}
	if fn := db.webhookEnqueuer(); fn != nil {
		for _, id := range ids {
			if err := fn(ctx, tx, id); err != nil {
				return fmt.Errorf("store: enqueue webhook delivery: %w", err)
			}
		}
	}
	return nil
}

// recordRunWebhooks records the webhook events of a run's change inside
// its transaction: a deploy started or finished, a backup failed, a
// restore finished.
func (db *DB) recordRunWebhooks(ctx context.Context, tx pgx.Tx, c RunChange, envID int64, kind RunKind, status string, wasStarted, wasFinished bool) error {
	started := !wasStarted && c.Status != "" && c.Status != RunPending && c.Status != RunCancelled
	finished := !wasFinished && RunFinished(c.Status)
	var events []string
	if kind == RunDeploy && started {
		events = append(events, WebhookDeployStarted)
	}
	if finished {
		switch {
		case kind == RunDeploy && status == RunSucceeded:
			events = append(events, WebhookDeploySucceeded)
		case kind == RunDeploy && status == RunSucceededWithWarnings:
			events = append(events, WebhookDeploySucceededWithWarnings)
		case kind == RunDeploy && status == RunFailed:
			events = append(events, WebhookDeployFailed)
		case kind == RunDeploy && status == RunCancelled:
			events = append(events, WebhookDeployCancelled)
		case kind == RunBackup && status == RunFailed:
			events = append(events, WebhookBackupFailed)
		case kind == RunRestore:
			events = append(events, WebhookRestoreFinished)
		case kind == RunDrill && status == RunFailed:
			events = append(events, WebhookBackupDrillFailed)
		}
	}
	if len(events) == 0 {
		return nil
	}
	run := &WebhookRun{ID: c.RunID, Kind: string(kind), Status: status, Reason: c.Reason}
	var project, env string
	if err := tx.QueryRow(ctx, `SELECT p.name, e.name, r.number, COALESCE((SELECT number FROM revisions WHERE id = r.revision_id), 0),
		    COALESCE((SELECT COALESCE(NULLIF(u.name, ''), u.email) FROM users u WHERE u.id = r.created_by), ''),
		    ARRAY(SELECT DISTINCT c.detail->'tls'->>'domain' FROM run_checkpoints c
		          WHERE c.run_id = r.id AND c.kind = 'issue-tls' AND (c.detail->'tls'->>'deferred')::boolean
		          ORDER BY 1)
		FROM runs r JOIN environments e ON e.id = r.environment_id JOIN projects p ON p.id = e.project_id WHERE r.id = $1`,
		c.RunID).Scan(&project, &env, &run.Number, &run.Revision, &run.StartedBy, &run.Deferred); err != nil {
		return err
	}
	if len(run.Deferred) == 0 {
		run.Deferred = nil
	}
	for _, ev := range events {
		data := WebhookData{Run: run, Path: paths.Run(project, env, c.RunID)}
		if err := db.recordWebhookEvent(ctx, tx, envID, ev, data); err != nil {
			return err
		}
	}
	return nil
}

// recordApprovalWebhook records approval.requested, approval.granted (an
// approval, or a bypass) or approval.rejected of a run inside tx.
func (db *DB) recordApprovalWebhook(ctx context.Context, tx pgx.Tx, envID, runID int64, action string, count, needed int) error {
	event := action
	if action == "approval.bypassed" {
		event = WebhookApprovalGranted
	}
	run := &WebhookRun{ID: runID, Kind: string(RunDeploy)}
	var project, env string
	if err := tx.QueryRow(ctx, `SELECT p.name, e.name, r.number, r.status, r.reason, COALESCE((SELECT number FROM revisions WHERE id = r.revision_id), 0)
		FROM runs r JOIN environments e ON e.id = r.environment_id JOIN projects p ON p.id = e.project_id WHERE r.id = $1`,
		runID).Scan(&project, &env, &run.Number, &run.Status, &run.Reason, &run.Revision); err != nil {
		return err
	}
	if needed > 0 && event == WebhookApprovalGranted {
		run.Reason = fmt.Sprintf("%d of %d approvals", count, needed)
	}
	data := WebhookData{Run: run, Path: paths.Run(project, env, runID)}
	return db.recordWebhookEvent(ctx, tx, envID, event, data)
}

// recordCertificateWebhook records certificate.issued or certificate.failed
// inside the transaction that stores cert, when its state becomes issued (a
// new certificate) or failed (not on every failed retry after the first).
// It runs before the certificate is stored, to compare with what was.
func (db *DB) recordCertificateWebhook(ctx context.Context, tx pgx.Tx, envID int64, cert *Certificate) error {
	if cert.State != CertIssued && cert.State != CertFailed {
		return nil
	}
	var state, serial string
	err := tx.QueryRow(ctx, `SELECT state, serial FROM certificates WHERE environment_id = $1 AND domain = $2`, envID, cert.Domain).Scan(&state, &serial)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	event := WebhookCertificateIssued
	switch {
	case cert.State == CertIssued && (state != CertIssued || serial != cert.Serial):
	case cert.State == CertFailed && state != CertFailed:
		event = WebhookCertificateFailed
	default:
		return nil
	}
	wc := &WebhookCertificate{Domain: cert.Domain, State: cert.State, Reason: cert.Reason}
	if cert.State == CertIssued {
		wc.Reason, wc.NotAfter = "", cert.NotAfter
	}
	return db.recordWebhookEvent(ctx, tx, envID, event, WebhookData{Certificate: wc})
}

// SyncBackupAlarmWebhooks compares the backup alarms with those last
// announced and records backup.alarm_raised and backup.alarm_cleared for
// each change, with the change of the announced set, in one transaction
// (processes doing it at once take turns). It returns how many changed.
func (db *DB) SyncBackupAlarmWebhooks(ctx context.Context) (int, error) {
	changed := 0
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		changed = 0
		if _, err := tx.Exec(ctx, `LOCK TABLE webhook_backup_alarms IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		alarms, err := db.BackupAlarms(ctx)
		if err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, `SELECT environment_id, reason FROM webhook_backup_alarms`)
		announced := map[int64]string{}
		var id int64
		var reason string
		if _, err := pgx.ForEachRow(rows, []any{&id, &reason}, func() error { announced[id] = reason; return nil }); err != nil {
			return err
		}
		now := db.Now()
		for _, a := range alarms {
			if _, ok := announced[a.EnvironmentID]; ok {
				delete(announced, a.EnvironmentID)
				continue
			}
			if _, err := tx.Exec(ctx, `INSERT INTO webhook_backup_alarms (environment_id, reason, raised_at) VALUES ($1, $2, $3)`,
				a.EnvironmentID, a.Reason, now); err != nil {
				return err
			}
			data := WebhookData{Alarm: a.Reason, Path: paths.Backups(a.Project, a.Environment)}
			if err := db.recordWebhookEvent(ctx, tx, a.EnvironmentID, WebhookBackupAlarmRaised, data); err != nil {
				return err
			}
			changed++
		}
		for envID, reason := range announced {
			if _, err := tx.Exec(ctx, `DELETE FROM webhook_backup_alarms WHERE environment_id = $1`, envID); err != nil {
				return err
			}
			var project, env string
			if err := tx.QueryRow(ctx, `SELECT p.name, e.name FROM environments e JOIN projects p ON p.id = e.project_id WHERE e.id = $1`,
				envID).Scan(&project, &env); err != nil {
				return err
			}
			data := WebhookData{Alarm: reason, Path: paths.Backups(project, env)}
			if err := db.recordWebhookEvent(ctx, tx, envID, WebhookBackupAlarmCleared, data); err != nil {
				return err
			}
			changed++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: backup alarm webhooks: %w", err)
	}
	return changed, nil
}

// PendingWebhookDeliveries returns deliveries never attempted that were
// recorded before since (recorded by a process without River, or whose job
// went missing), for the periodic sweep to insert their jobs.
func (db *DB) PendingWebhookDeliveries(ctx context.Context, since time.Time) ([]int64, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT id FROM webhook_deliveries WHERE status = 'pending' AND attempts = 0 AND created_at < $1 ORDER BY id LIMIT 1000`, since)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("store: pending webhook deliveries: %w", err)
	}
	return ids, nil
}

// WebhookAttempt is the outcome of one attempt to deliver.
type WebhookAttempt struct {
	// ResponseCode is the endpoint's answer (nil when it gave none).
	ResponseCode *int
	Duration     time.Duration
	// Error says what went wrong ("" on success); it is stored clipped to
	// WebhookErrorLimit bytes.
	Error string
	// Succeeded: a 2xx answer. Final: no attempt follows.
	Succeeded, Final bool
	// Refused: the address was one webhooks do not reach; nothing was
	// sent, and the endpoint is turned off with Error as the reason.
	Refused bool
}

// WebhookErrorLimit bounds an attempt's stored error (and so an endpoint's
// reason for being turned off): what a receiver answers is the
// receiver's, not the page's.
const WebhookErrorLimit = 300

// RecordWebhookAttempt records an attempt of delivery id. complete, when
// not nil, runs in the same transaction (River's JobCompleteTx: success is
// recorded before the job is acknowledged, so it is never sent again). A
// final failure with no success of the endpoint since the delivery was
// recorded (a day of failing with the default retries) disables the
// endpoint, with its reason and an audit record; so does a refusal, at once.
func (db *DB) RecordWebhookAttempt(ctx context.Context, id int64, at WebhookAttempt, complete func(tx pgx.Tx) error) error {
	at.Error = humanize.Clip(at.Error, WebhookErrorLimit)
	status := WebhookRetrying
	switch {
	case at.Succeeded:
		status = WebhookSucceeded
	case at.Final:
		status = WebhookFailed
	}
	ms := at.Duration.Milliseconds()
	now := db.Now()
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var endpointID int64
		var created time.Time
		err := tx.QueryRow(ctx, `UPDATE webhook_deliveries SET status = $2, attempts = attempts + 1, response_code = $3, duration_ms = $4,
			last_error = $5, last_attempt_at = $6 WHERE id = $1 AND status <> 'succeeded' RETURNING endpoint_id, created_at`,
			id, status, at.ResponseCode, ms, at.Error, now).Scan(&endpointID, &created)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // deleted with its endpoint, or already succeeded
		}
		if err != nil {
			return err
		}
		switch {
		case at.Succeeded:
			if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET last_success_at = $2 WHERE id = $1`, endpointID, now); err != nil {
				return err
			}
		case at.Final:
			var url, project, env string
			var envID *int64
			err := tx.QueryRow(ctx, `UPDATE webhook_endpoints w SET disabled_at = $2,
				    disabled_reason = CASE WHEN $5 THEN $4
				        ELSE 'Turned off after failing for a day: every attempt to deliver failed (last: ' || $4 || ').' END
				FROM webhook_endpoints old LEFT JOIN environments e ON e.id = old.environment_id LEFT JOIN projects p ON p.id = e.project_id
				WHERE w.id = $1 AND old.id = w.id AND w.disabled_at IS NULL AND ($5 OR w.last_success_at IS NULL OR w.last_success_at < $3)
				RETURNING w.url, w.environment_id, COALESCE(p.name, ''), COALESCE(e.name, '')`,
				endpointID, now, created, at.Error, at.Refused).Scan(&url, &envID, &project, &env)
			if errors.Is(err, pgx.ErrNoRows) {
				break
			}
			if err != nil {
				return err
			}
			e := webhookAudit(Actor{}, "webhook.auto-disabled", &WebhookEndpoint{ID: endpointID, URL: url, EnvironmentID: envID, Project: project, Environment: env})
			e.Actor = "Studio"
			e.Detail["delivery"] = id
			if at.Refused {
				e.Detail["refused"] = true
			}
			if err := auditTx(ctx, tx, e); err != nil {
				return err
			}
		}
		if complete != nil {
			return complete(tx)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: record webhook attempt: %w", err)
	}
	return nil
}

// WebhookTest is the event of a test delivery an admin sends to check an
// endpoint (Send a test event): never recorded by a change, only sent.
const WebhookTest = "webhook.test"

// SendTestEvent records a test delivery to endpoint w (data names where it
// is from), its job inserted in the same transaction, with its audit
// record. A turned-off endpoint is refused.
func (db *DB) SendTestEvent(ctx context.Context, a Actor, w *WebhookEndpoint, data WebhookData) (int64, error) {
	if w.DisabledAt != nil {
		return 0, apperr.Errorf(apperr.Conflict, "%s is turned off. Turn it on before sending it anything.", w.URL)
	}
	body, err := json.Marshal(data)
	if err != nil {
		return 0, err
	}
	var id int64
	err = db.InTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO webhook_deliveries (endpoint_id, message_id, event, data, occurred_at, created_at)
			VALUES ($1, 'msg_' || replace(gen_random_uuid()::text, '-', ''), $2, $3, $4, $4) RETURNING id`,
			w.ID, WebhookTest, body, db.Now()).Scan(&id); err != nil {
			return err
		}
		if fn := db.webhookEnqueuer(); fn != nil {
			if err := fn(ctx, tx, id); err != nil {
				return err
			}
		}
		return auditTx(ctx, tx, webhookAudit(a, "webhook.tested", w))
	})
	if err != nil {
		return 0, fmt.Errorf("store: send a test event: %w", err)
	}
	return id, nil
}
