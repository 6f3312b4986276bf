// Package store keeps the Studio's state in PostgreSQL through pgx: one file
// per aggregate, SQL written in the method that runs it. It also starts the
// private PostgreSQL server of the embedded default and applies migrations.
package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultConnectTimeout is how long a new connection to the database may
// take when the URL sets no connect_timeout.
const DefaultConnectTimeout = 5 * time.Second

// DB is the Studio's database: a pgx connection pool and the aggregates'
// methods on it.
type DB struct {
	Pool *pgxpool.Pool
	// Now is the clock used for timestamps the application decides (expiry,
	// schedules). Tests replace it; it defaults to time.Now.
	Now func() time.Time
	// webhookJobs inserts a webhook delivery's job (SetWebhookEnqueuer).
	webhookJobs atomic.Pointer[WebhookEnqueuer]
	// admins is the configured list of installation admins
	// (SetInstallationAdmins).
	admins atomic.Pointer[InstallationAdmins]
}

// Open connects to the database at url and checks that it answers.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: parse database URL: %w", redactURLError(err))
	}
	cfg.MaxConns = 20
	// A database host that answers nothing, not even a refusal, would hold
	// every request for the system's TCP timeout (minutes) while it waits
	// for a connection: without connect_timeout in the URL, give up sooner,
	// so that pages answer that the database cannot be reached.
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	cfg.ConnConfig.RuntimeParams["application_name"] = "skali-studio"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open database: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: database does not answer: %w", err)
	}
	return &DB{Pool: pool, Now: time.Now}, nil
}

// Close closes every connection of the pool.
func (db *DB) Close() { db.Pool.Close() }

// Ping checks within two seconds that the pool and a new connection both
// answer. A pooled connection alone is not enough: a server told to shut
// down refuses new connections but keeps serving open ones, and waits for
// them to close before it exits. When no new connection can be had, the
// pool lets its connections go, so such a server can finish stopping (and
// the private one be restarted) instead of being held up by idle ones.
func (db *DB) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := db.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, db.Pool.Config().ConnConfig.Copy())
	if err != nil {
		db.Pool.Reset()
		return fmt.Errorf("store: ping: %w", err)
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// InTx runs fn in a transaction, committing when fn returns nil. Public store
// methods own their transactions; unexported helpers take the pgx.Tx.
func (db *DB) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db.Pool, fn)
}

// redactURLError keeps a password in a malformed URL out of error messages.
func redactURLError(err error) error {
	return fmt.Errorf("the URL is malformed (%T)", err)
}
