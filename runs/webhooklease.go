package runs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/skali-dev/studio/store"
)

// webhookLeases holds the lease of each delivery attempt this process has
// in flight: a PostgreSQL advisory lock (store.WebhookLockClass) on one
// connection of its own, outside the pool. The lock ends with the process
// (its connection closes when it dies, however it dies), so any process
// can tell an attempt lost with its process from a slow one, and send it
// again within seconds instead of waiting for River's rescue.
type webhookLeases struct {
	cfg *pgx.ConnConfig
	mu  sync.Mutex
	// conn is nil until first used, and again after it broke (its locks
	// went with it).
	conn *pgx.Conn
}

// hold takes delivery id's lease; false when another live attempt holds
// it (the lost job's process is still there after all).
func (l *webhookLeases) hold(ctx context.Context, id int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil || l.conn.IsClosed() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := pgx.ConnectConfig(cctx, l.cfg.Copy())
		cancel()
		if err != nil {
			return false, err
		}
		l.conn = conn
	}
	var ok bool
	if err := l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, store.WebhookLockClass, store.WebhookLockKey(id)).Scan(&ok); err != nil {
		l.conn.Close(context.Background())
		l.conn = nil
		return false, err
	}
	return ok, nil
}

// release ends delivery id's lease.
func (l *webhookLeases) release(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, store.WebhookLockClass, store.WebhookLockKey(id)); err != nil {
		// A lock that cannot be released goes with its connection.
		l.conn.Close(context.Background())
		l.conn = nil
	}
}

func (l *webhookLeases) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		l.conn.Close(context.Background())
		l.conn = nil
	}
}

// lostWebhookAfter is how long an attempt's job must have looked running,
// with no process holding its lease, before it counts as lost: a live
// attempt takes its lease the moment it starts.
const lostWebhookAfter = 5 * time.Second

// TakeOverLostWebhooks sends again every delivery whose attempt was lost
// with its process (its job looks running, nobody holds its lease): the
// attempt is recorded as not finished, its job is cancelled (never run
// again) and a new one inserted, in one transaction. Every process looks
// (with the run leases); each lost attempt is taken over once.
func (s *Service) TakeOverLostWebhooks(ctx context.Context) ([]int64, error) {
	if s.river == nil || s.webhooks == nil {
		return nil, nil
	}
	ids, err := s.DB.TakeOverLostWebhookAttempts(ctx, lostWebhookAfter, func(ctx context.Context, tx pgx.Tx, l store.LostWebhookAttempt) error {
		if _, err := s.river.JobCancelTx(ctx, tx, l.JobID); err != nil && !errors.Is(err, river.ErrNotFound) {
			return err
		}
		if !l.Resend {
			return nil
		}
		_, err := s.river.InsertTx(ctx, tx, WebhookArgs{DeliveryID: l.DeliveryID, Resumed: l.Attempts}, s.webhooks.resumeOpts(l.Attempts))
		return err
	})
	for _, id := range ids {
		s.Logger.Warn("webhook attempt lost with its process; sending it again", "delivery", id)
	}
	if err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	return ids, nil
}

// resumeOpts is how the job that takes a delivery up again after done
// attempts is inserted: at once, with the attempts left.
func (o *WebhookOptions) resumeOpts(done int) *river.InsertOpts {
	opts := o.insertOpts()
	opts.MaxAttempts = max(1, len(o.Backoff)+1-done)
	return opts
}
