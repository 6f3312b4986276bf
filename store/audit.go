package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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

// auditTx records an event inside tx, so the change and its record commit together.
func auditTx(ctx context.Context, tx pgx.Tx, e AuditEvent) error {
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

// AuditRecord is a stored audit event.
type AuditRecord struct {
	ID int64
	At time.Time
	AuditEvent
}

// AuditQuery selects audit records, newest first.
type AuditQuery struct {
	// All shows every record (installation admins); otherwise only records
	// of the environments in EnvironmentIDs and the project-wide records
	// (project created, revision added) of their projects, since a new
	// revision is what those environments run next.
	All            bool
	EnvironmentIDs []int64
	// EnvironmentID, when not zero, keeps only that environment's records
	// and the project-wide records of its project.
	EnvironmentID int64
	// Action, when not empty, keeps only records of that action.
	Action string
	// Person, when not empty, keeps records whose actor's name contains it
	// (case-insensitive).
	Person string
	// From and To, when not zero, keep records at or after From and
	// before To.
	From, To time.Time
	// Text, when not empty, keeps records whose action, project,
	// environment, target or detail contains it (case-insensitive).
	Text string
	// Before, when not zero, keeps records older than the record of that
	// id in the order (at, id); After, records newer than it (the page
	// just before, still listed newest first). Limit is a page's size.
	Before, After int64
	Limit         int
}

// projectWide selects the records of a project rather than one of its
// environments; projectsOf, completed with an environment id condition,
// selects the names of those environments' projects.
const (
	projectWide = `environment_id IS NULL AND environment = '' AND project <> ''`
	projectsOf  = `SELECT p.name FROM environments e JOIN projects p ON p.id = e.project_id WHERE e.id`
)

// auditWhere is the condition of q's filters, naming only the filters in
// use (so that each is an index condition in every plan, generic ones
// included), with its arguments after args.
func auditWhere(q AuditQuery, args []any) (string, []any, bool) {
	conds := []string{"true"}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if !q.All {
		ids := q.EnvironmentIDs
		if ids == nil {
			ids = []int64{}
		}
		n := arg(ids)
		conds = append(conds, `(environment_id = ANY(`+n+`) OR (`+projectWide+` AND project IN (`+projectsOf+` = ANY(`+n+`))))`)
	}
	if q.EnvironmentID != 0 {
		n := arg(q.EnvironmentID)
		conds = append(conds, `(environment_id = `+n+` OR (`+projectWide+` AND project IN (`+projectsOf+` = `+n+`)))`)
	}
	if q.Action != "" {
		conds = append(conds, `action = `+arg(q.Action))
	}
	searched := false
	if q.Person != "" {
		conds = append(conds, `lower(actor) LIKE '%' || lower(`+arg(likeEscape(q.Person))+`) || '%'`)
		searched = true
	}
	if !q.From.IsZero() {
		conds = append(conds, `at >= `+arg(q.From))
	}
	if !q.To.IsZero() {
		conds = append(conds, `at < `+arg(q.To))
	}
	if q.Text != "" {
		// audit_text is the indexed expression (migration 141).
		conds = append(conds, `audit_text(audit_events) LIKE '%' || lower(`+arg(likeEscape(q.Text))+`) || '%'`)
		searched = true
	}
	return strings.Join(conds, " AND "), args, searched
}

// likeEscape makes s match itself in a LIKE pattern.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// AuditEvents returns one page of the records q selects, newest first, and
// whether there are more after it (with q.After: newer ones before it).
func (db *DB) AuditEvents(ctx context.Context, q AuditQuery) ([]AuditRecord, bool, error) {
	if q.Limit <= 0 {
		q.Limit = 50
	}
	where, args, searched := auditWhere(q, []any{q.Limit + 1})
	// A keyset, not OFFSET: a deep page reads its rows from the index
	// position of the record it continues from.
	order := `at DESC, id DESC`
	keyOf := func(id int64) string {
		args = append(args, id)
		return fmt.Sprintf(`(SELECT k.at, k.id FROM audit_events k WHERE k.id = $%d)`, len(args))
	}
	switch {
	case q.Before > 0:
		where += ` AND (at, id) < ` + keyOf(q.Before)
	case q.After > 0:
		where += ` AND (at, id) > ` + keyOf(q.After)
		order = `at, id`
	}
	query := `
		SELECT id, at, actor_id, actor, action, project, environment_id, environment, target, detail, request_id
		FROM audit_events
		WHERE ` + where + `
		ORDER BY ` + order + `
		LIMIT $1`
	if searched {
		// A search's plan depends on its words (a trigram index for a rare
		// one, the newest records first for a common one): planned for
		// each, never a generic plan.
		args = append([]any{pgx.QueryExecModeExec}, args...)
	}
	rows, _ := db.Pool.Query(ctx, query, args...)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditRecord, error) {
		var r AuditRecord
		err := row.Scan(&r.ID, &r.At, &r.ActorID, &r.Actor, &r.Action, &r.Project, &r.EnvironmentID, &r.Environment,
			&r.Target, &r.Detail, &r.RequestID)
		return r, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: audit events: %w", err)
	}
	more := len(out) > q.Limit
	if more {
		out = out[:q.Limit]
	}
	if q.After > 0 && q.Before == 0 {
		slices.Reverse(out)
	}
	return out, more, nil
}

// AuditActions lists the distinct actions of the records q selects (its
// All and EnvironmentIDs), for the filter. It skips through the action
// index (one probe per action), so it reads a few rows per action, not
// every record.
func (db *DB) AuditActions(ctx context.Context, q AuditQuery) ([]string, error) {
	scope := ""
	args := []any{}
	if !q.All {
		ids := q.EnvironmentIDs
		if ids == nil {
			ids = []int64{}
		}
		args = append(args, ids)
		scope = ` AND (EXISTS (SELECT 1 FROM audit_events x WHERE x.environment_id = ANY($1) AND x.action = a.action)
			OR EXISTS (SELECT 1 FROM audit_events x WHERE x.environment_id IS NULL AND x.environment = '' AND x.project <> ''
			           AND x.project IN (` + projectsOf + ` = ANY($1)) AND x.action = a.action))`
	}
	rows, _ := db.Pool.Query(ctx, `
		WITH RECURSIVE a(action) AS (
			(SELECT action FROM audit_events ORDER BY action LIMIT 1)
			UNION ALL
			SELECT (SELECT action FROM audit_events WHERE action > a.action ORDER BY action LIMIT 1) FROM a WHERE a.action IS NOT NULL)
		SELECT a.action FROM a WHERE a.action IS NOT NULL`+scope+` ORDER BY a.action`, args...)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: audit actions: %w", err)
	}
	return out, nil
}

// FailedSignInWindow is how long repeated failed sign-ins from one address
// add to the same audit record instead of writing new ones.
const FailedSignInWindow = time.Hour

// RecordFailedSignIn audits a failed sign-in from addr. Repeated failures
// from one address within FailedSignInWindow of the first are one record
// whose detail counts them (count, last_at, last reason), so that a flood of
// bad links or callbacks grows a counter, not the table.
func (db *DB) RecordFailedSignIn(ctx context.Context, addr, target string, detail map[string]any, requestID string) error {
	if detail == nil {
		detail = map[string]any{}
	}
	return db.InTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			UPDATE audit_events SET detail = detail || jsonb_build_object(
				'count', COALESCE((detail->>'count')::int, 1) + 1, 'last_at', now(), 'last_reason', $4::jsonb->'reason')
			WHERE id = (SELECT id FROM audit_events
			            WHERE action = 'sign-in.failed' AND detail->>'address' = $1 AND target = $2 AND at > now() - make_interval(secs => $3)
			            ORDER BY id DESC LIMIT 1 FOR UPDATE)`,
			addr, target, FailedSignInWindow.Seconds(), detail)
		if err != nil {
			return fmt.Errorf("store: record failed sign-in: %w", err)
		}
		if tag.RowsAffected() > 0 {
			return nil
		}
		d := map[string]any{"address": addr, "count": 1}
		for k, v := range detail {
			d[k] = v
		}
		return audit(ctx, tx, AuditEvent{Action: "sign-in.failed", Target: target, Detail: d, RequestID: requestID})
	})
}

// nullTime is nil for the zero time, so that SQL can tell "no bound".
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
