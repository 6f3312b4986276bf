package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// AuditEvent is one entry of the audit log. It never holds a secret: values
// appear by name and version only.
type AuditEvent struct {
	ActorID       *int64
	Actor         string
	Action        string
	Project       string
	EnvironmentID *int64
	Environment   string
	Target        string
	Detail        map[string]any
	RequestID     string
}

// Audit records an event on its own.
func (db *DB) Audit(ctx context.Context, e AuditEvent) error {
	return audit(ctx, db.Pool, e)
}

// AuditTx records an event inside tx, so the change and its record commit together.
func AuditTx(ctx context.Context, tx pgx.Tx, e AuditEvent) error {
	return audit(ctx, tx, e)
}

// querier is what both a pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func audit(ctx context.Context, q querier, e AuditEvent) error {
	if e.Detail == nil {
		e.Detail = map[string]any{}
	}
	_, err := q.Exec(ctx, `
		INSERT INTO audit_events (actor_id, actor, action, project, environment_id, environment, target, detail, request_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		e.ActorID, e.Actor, e.Action, e.Project, e.EnvironmentID, e.Environment, e.Target, e.Detail, e.RequestID)
	if err != nil {
		return fmt.Errorf("store: audit %s: %w", e.Action, err)
	}
	return nil
}
