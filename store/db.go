// Package store keeps the Studio's state in PostgreSQL through pgx: one file
// per aggregate, SQL written in the method that runs it. It also starts the
// private PostgreSQL server of the embedded default and applies migrations.
package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is the Studio's database: a pgx connection pool and the aggregates'
// methods on it.
type DB struct {
	Pool *pgxpool.Pool
	// Now is the clock used for timestamps the application decides (expiry,
	// schedules). Tests replace it; it defaults to time.Now.
	Now func() time.Time
}

// Open connects to the database at url and checks that it answers.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: parse database URL: %w", redactURLError(err))
	}
	cfg.MaxConns = 20
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

// Ping checks that the database answers within two seconds.
func (db *DB) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return db.Pool.Ping(ctx)
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
