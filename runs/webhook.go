package runs

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/store"
)

// QueueWebhooks is the River queue of webhook deliveries: an endpoint that
// answers slowly holds up other deliveries at most, never runs.
const QueueWebhooks = "webhooks"

// DefaultWebhookBackoff is how long a failed delivery waits before each
// next attempt: about a day in all, ten attempts. The first waits are short
// (a receiver that restarts or fails a few times is caught up within three
// minutes), the last ones Standard Webhooks' own.
var DefaultWebhookBackoff = []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute,
	30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 8 * time.Hour, 8 * time.Hour}

// DefaultWebhookTimeout bounds one attempt: connecting, sending, and the
// answer's headers and first 4 KiB.
const DefaultWebhookTimeout = 10 * time.Second

// webhookResponseLimit is the most of an answer read (and then dropped).
const webhookResponseLimit = 4 << 10

// WebhookOptions tune webhook deliveries.
type WebhookOptions struct {
	// PublicURL makes the events' paths links (STUDIO_PUBLIC_URL).
	PublicURL string
	// Backoff are the waits before each retry (default
	// DefaultWebhookBackoff); a delivery is attempted len(Backoff)+1 times.
	Backoff []time.Duration
	// Timeout bounds each attempt (default DefaultWebhookTimeout).
	Timeout time.Duration
	// Workers is how many deliveries one process makes at once (default 10).
	Workers int
	// AllowNetworks are ranges deliveries may reach although they are
	// refused by default (loopback, link-local, private, ...):
	// --webhook-allow-networks.
	AllowNetworks []netip.Prefix
	// Own are the Studio's own listeners and database, never reached
	// whatever AllowNetworks says.
	Own []OwnAddress

	// client sends the requests: through transport, following no redirect.
	client *http.Client
	// leases are this process's leases of attempts in flight.
	leases *webhookLeases
}

// WebhookArgs is the River job that delivers one webhook delivery.
type WebhookArgs struct {
	DeliveryID int64 `json:"delivery_id"`
	// Resumed is how many attempts were made before this job took the
	// delivery up (an attempt lost with its process, TakeOverLostWebhooks).
	Resumed int `json:"resumed,omitempty"`
}

// Kind implements river.JobArgs.
func (WebhookArgs) Kind() string { return "studio_webhook" }

// WebhookSweepArgs is the periodic job that announces backup alarms raised
// or cleared and queues deliveries whose job is missing.
type WebhookSweepArgs struct{}

// Kind implements river.JobArgs.
func (WebhookSweepArgs) Kind() string { return "studio_webhook_sweep" }

// webhookInsertOpts: one job per delivery ever (unique by its id), on the
// webhooks queue, attempted once and then once per backoff wait.
func (o *WebhookOptions) insertOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: QueueWebhooks, MaxAttempts: len(o.Backoff) + 1,
		UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

func (o *WebhookOptions) defaults() {
	if len(o.Backoff) == 0 {
		o.Backoff = DefaultWebhookBackoff
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultWebhookTimeout
	}
	if o.Workers <= 0 {
		o.Workers = 10
	}
	o.client = &http.Client{Transport: o.transport(), Timeout: o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
}

type webhookWorker struct {
	river.WorkerDefaults[WebhookArgs]
	service *Service
	opts    *WebhookOptions
}

// NextRetry waits the backoff of the attempt that failed.
func (w *webhookWorker) NextRetry(job *river.Job[WebhookArgs]) time.Time {
	i := min(max(job.Args.Resumed+job.Attempt-1, 0), len(w.opts.Backoff)-1)
	return time.Now().Add(w.opts.Backoff[i])
}

// Timeout leaves room for the request's own timeout and the recording.
func (w *webhookWorker) Timeout(*river.Job[WebhookArgs]) time.Duration {
	return w.opts.Timeout + 30*time.Second
}

func (w *webhookWorker) Work(ctx context.Context, job *river.Job[WebhookArgs]) error {
	s := w.service
	d, err := s.DB.WebhookDeliveryByID(ctx, job.Args.DeliveryID)
	if apperr.CodeOf(err) == apperr.NotFound {
		return nil // its endpoint was deleted
	}
	if err != nil {
		return err
	}
	if d.Status == store.WebhookSucceeded || d.Status == store.WebhookFailed {
		return nil // never sent again once recorded
	}
	ep, err := s.DB.WebhookEndpointByID(ctx, d.EndpointID)
	if apperr.CodeOf(err) == apperr.NotFound {
		return nil
	}
	if err != nil {
		return err
	}
	final := job.Attempt >= job.MaxAttempts || job.Args.Resumed+job.Attempt >= len(w.opts.Backoff)+1
	if ep.DisabledAt != nil {
		return s.DB.RecordWebhookAttempt(ctx, d.ID, store.WebhookAttempt{Error: "The endpoint is turned off.", Final: true}, nil)
	}
	secret, err := s.Vault.WebhookSecret(ctx, ep.ID)
	if err != nil {
		return err
	}
	// The attempt's lease: held until its outcome is recorded. A process
	// that dies mid-attempt leaves it to any other within seconds.
	if w.opts.leases != nil {
		held, err := w.opts.leases.hold(ctx, d.ID)
		if err != nil || !held {
			// The database is out of reach, or an attempt thought lost is
			// still in flight: look again shortly, counting no attempt.
			return river.JobSnooze(lostWebhookAfter)
		}
		defer w.opts.leases.release(d.ID)
	}
	at := w.send(ctx, ep, d, secret)
	// A refused address is not tried again (nor is its endpoint, which
	// the refusal turns off): the refusal says why, once.
	at.Final = final || at.Refused
	var complete func(pgx.Tx) error
	if at.Succeeded {
		complete = func(tx pgx.Tx) error {
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		}
	}
	if err := s.DB.RecordWebhookAttempt(ctx, d.ID, at, complete); err != nil {
		return err
	}
	if at.Succeeded || at.Final {
		return nil
	}
	return errors.New(at.Error)
}

// send makes one attempt, bounded by the client's timeout, connecting only
// to addresses webhooks may reach, reading at most 16 KiB of the answer's
// headers and 4 KiB of its body, and following no redirect.
func (w *webhookWorker) send(ctx context.Context, ep *store.WebhookEndpoint, d *store.WebhookDelivery, secret string) store.WebhookAttempt {
	body, err := WebhookBody(ep.Format, d, w.opts.PublicURL)
	if err != nil {
		return store.WebhookAttempt{Error: "The event could not be encoded."}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return store.WebhookAttempt{Error: "The endpoint's URL is not valid."}
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	sig, err := SignWebhook(secret, d.MessageID, ts, body)
	if err != nil {
		return store.WebhookAttempt{Error: "The endpoint's secret could not be read."}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Skali-Studio-Webhooks/1")
	req.Header.Set("webhook-id", d.MessageID)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", sig)
	began := time.Now()
	resp, err := w.opts.client.Do(req)
	at := store.WebhookAttempt{}
	if err != nil {
		at.Duration = time.Since(began)
		if r := asRefusal(err); r != nil {
			at.Refused = true
			at.Error = "The delivery was " + r.Error() + "."
			return at
		}
		at.Error = attemptError(err, w.opts.Timeout)
		return at
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, webhookResponseLimit))
	_ = resp.Body.Close()
	at.Duration = time.Since(began)
	code := resp.StatusCode
	at.ResponseCode = &code
	switch {
	case code >= 200 && code < 300:
		at.Succeeded = true
	case code >= 300 && code < 400:
		at.Error = fmt.Sprintf("The endpoint answered %d, redirected to %s, which is not followed: give the final URL.", code, redirectTarget(resp))
	default:
		at.Error = fmt.Sprintf("The endpoint answered %d %s.", code, http.StatusText(code))
	}
	return at
}

// redirectTarget names where a redirect leads by its scheme and host only
// (its path may carry a credential, and its length is the receiver's).
func redirectTarget(resp *http.Response) string {
	u, err := resp.Location()
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || len(u.Host) > 255 {
		return "an address that is not a URL"
	}
	return u.Scheme + "://" + u.Host
}

// attemptError is a calm sentence for a failed request.
func attemptError(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() {
		return fmt.Sprintf("The endpoint did not answer within %s.", timeout)
	}
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return "The request failed: " + err.Error() + "."
}

// SignWebhook is the webhook-signature header of Standard Webhooks: "v1,"
// and the base64 of HMAC-SHA256 over "id.timestamp.body", keyed with the
// base64-decoded part of the "whsec_" secret.
func SignWebhook(secret, id, timestamp string, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// webhookEnvelope is the standard body: the event's type, when it happened
// and its data, with links.
type webhookEnvelope struct {
	Type      string            `json:"type"`
	Timestamp time.Time         `json:"timestamp"`
	Data      webhookLinkedData `json:"data"`
}

type webhookLinkedData struct {
	store.WebhookData
	URL string `json:"url"`
}

// DeliveryBody is the body the Studio sends (or sent) for delivery d in
// format, with the links deliveries carry: what a page shows of it.
func (s *Service) DeliveryBody(format string, d *store.WebhookDelivery) ([]byte, error) {
	publicURL := ""
	if s.webhooks != nil {
		publicURL = s.webhooks.PublicURL
	}
	return WebhookBody(format, d, publicURL)
}

// WebhookBody is the body delivered for d in format (standard or slack),
// the same at every attempt. Links are publicURL + the event's path.
func WebhookBody(format string, d *store.WebhookDelivery, publicURL string) ([]byte, error) {
	link := publicURL + d.Data.Path
	if format == store.WebhookFormatSlack {
		return json.Marshal(map[string]string{"text": slackText(d, link)})
	}
	return json.Marshal(webhookEnvelope{Type: d.Event, Timestamp: d.OccurredAt.UTC(),
		Data: webhookLinkedData{WebhookData: d.Data, URL: link}})
}

// slackText is one line for a chat: what happened, where, and a link
// (Slack's <url|text> form).
func slackText(d *store.WebhookDelivery, link string) string {
	where := d.Data.Project + "/" + d.Data.Environment
	var b strings.Builder
	switch d.Event {
	case store.WebhookDeploySucceeded:
		b.WriteString("✅ ")
	case store.WebhookDeployFailed, store.WebhookBackupFailed, store.WebhookCertificateFailed, store.WebhookBackupAlarmRaised, store.WebhookBackupDrillFailed:
		b.WriteString("🔴 ")
	case store.WebhookDeploySucceededWithWarnings, store.WebhookDriftDetected:
		b.WriteString("🟡 ")
	}
	b.WriteString(store.WebhookEventLabel(d.Event))
	b.WriteString(": " + where)
	if r := d.Data.Run; r != nil {
		if r.Number > 0 {
			fmt.Fprintf(&b, ", run #%d", r.Number)
		} else {
			// An event recorded before runs were numbered.
			fmt.Fprintf(&b, ", run %d", r.ID)
		}
		if r.Revision > 0 {
			fmt.Fprintf(&b, " (revision %d)", r.Revision)
		}
		if d.Event == store.WebhookRestoreFinished {
			b.WriteString(", " + r.Status)
		}
		if r.StartedBy != "" {
			b.WriteString(", started by " + r.StartedBy)
		}
		if r.Reason != "" {
			b.WriteString(". " + r.Reason)
		}
		if len(r.Deferred) > 0 {
			b.WriteString(". Deferred (DNS pending): " + strings.Join(r.Deferred, ", "))
		}
	}
	if c := d.Data.Certificate; c != nil {
		b.WriteString(", " + c.Domain)
		if c.Reason != "" {
			b.WriteString(". " + c.Reason)
		}
	}
	if d.Data.Alarm != "" {
		b.WriteString(". " + d.Data.Alarm)
	}
	if len(d.Data.Drift) > 0 {
		said := make([]string, 0, len(d.Data.Drift))
		for _, dr := range d.Data.Drift {
			said = append(said, dr.Sentence())
		}
		b.WriteString(". " + strings.Join(said, "; "))
	}
	fmt.Fprintf(&b, " <%s|Open in the Studio>", link)
	return b.String()
}

type webhookSweepWorker struct {
	river.WorkerDefaults[WebhookSweepArgs]
	service *Service
	opts    *WebhookOptions
}

func (w *webhookSweepWorker) Work(ctx context.Context, job *river.Job[WebhookSweepArgs]) error {
	return w.service.SweepWebhooks(ctx)
}

// SweepWebhooks announces backup alarms raised or cleared since the last
// sweep, and inserts the job of every delivery recorded over a minute ago
// and never attempted (a process without River recorded it): its unique
// job is not inserted twice.
func (s *Service) SweepWebhooks(ctx context.Context) error {
	if _, err := s.DB.SyncBackupAlarmWebhooks(ctx); err != nil {
		return err
	}
	if s.river == nil || s.webhooks == nil {
		return nil
	}
	ids, err := s.DB.PendingWebhookDeliveries(ctx, s.DB.Now().Add(-time.Minute))
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := s.river.Insert(ctx, WebhookArgs{DeliveryID: id}, s.webhooks.insertOpts()); err != nil {
			return err
		}
	}
	return nil
}

// enqueueWebhook inserts a delivery's job inside the transaction that
// records the delivery.
func (s *Service) enqueueWebhook(ctx context.Context, tx pgx.Tx, deliveryID int64) error {
	_, err := s.river.InsertTx(ctx, tx, WebhookArgs{DeliveryID: deliveryID}, s.webhooks.insertOpts())
	return err
}
