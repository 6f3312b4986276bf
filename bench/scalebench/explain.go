package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// planned is a statement a page runs, with arguments of the busy
// environment, whose generic plan -explain prints.
type planned struct {
	name string
	sql  string
	args func(inst *installation) []any
}

// explain prints each statement's generic plan: the one PostgreSQL uses
// for a prepared statement after five executions when it is no worse than
// the custom plans it made, which is what a page gets under load.
func explain(ctx context.Context, inst *installation) error {
	conn, err := inst.db.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		return err
	}
	defer conn.Exec(ctx, `RESET plan_cache_mode`)
	for i, p := range plannedStatements {
		name := fmt.Sprintf("bench_%d", i)
		if _, err := conn.Conn().Prepare(ctx, name, p.sql); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		args := p.args(inst)
		if len(args) == 0 {
			args = nil
		}
		ph := make([]string, len(args))
		for j := range args {
			ph[j] = fmt.Sprintf("$%d", j+1)
		}
		rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) EXECUTE "+pgx.Identifier{name}.Sanitize()+params(ph), append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		fmt.Printf("\n-- %s (generic plan)\n  %s\n", p.name, strings.Join(lines, "\n  "))
		_ = conn.Conn().Deallocate(ctx, name)
	}
	return nil
}

func busy(inst *installation) []any { return []any{inst.busy.ID} }

// plannedStatements are the statements of issue 41's causes, as the store
// sends them, with the busy environment's arguments.
var plannedStatements = []planned{
	{"runs list, first page", `SELECT r.id FROM (SELECT r.* FROM environments e CROSS JOIN LATERAL (
			SELECT r.* FROM runs r WHERE r.environment_id = e.id ORDER BY r.id DESC LIMIT $2) r WHERE e.id = $1) r ORDER BY r.id DESC`,
		func(i *installation) []any { return []any{i.busy.ID, 101} }},
	{"runs list, deep page", `SELECT r.id FROM (SELECT r.* FROM environments e CROSS JOIN LATERAL (
			SELECT r.* FROM runs r WHERE r.environment_id = e.id AND r.id < $3 ORDER BY r.id DESC LIMIT $2) r WHERE e.id = $1) r ORDER BY r.id DESC`,
		func(i *installation) []any { return []any{i.busy.ID, 101, i.runID - 5000} }},
	{"runs list, by kind", `SELECT r.id FROM (SELECT r.* FROM environments e CROSS JOIN LATERAL (
			SELECT r.* FROM runs r WHERE r.environment_id = e.id AND r.kind = $3 ORDER BY r.id DESC LIMIT $2) r WHERE e.id = $1) r ORDER BY r.id DESC`,
		func(i *installation) []any { return []any{i.busy.ID, 101, "restore"} }},
	{"runs list, by status", `SELECT r.id FROM (
			(SELECT r.* FROM environments e CROSS JOIN LATERAL (SELECT r.* FROM runs r WHERE r.environment_id = e.id AND r.status = $3 ORDER BY r.id DESC LIMIT $2) r WHERE e.id = $1)
			UNION ALL (SELECT r.* FROM environments e CROSS JOIN LATERAL (SELECT r.* FROM runs r WHERE r.environment_id = e.id AND r.status = $4 ORDER BY r.id DESC LIMIT $2) r WHERE e.id = $1)) r
		ORDER BY r.id DESC LIMIT $2`,
		func(i *installation) []any { return []any{i.busy.ID, 101, "failed", "rejected"} }},
	{"stream: the runs its events concern", `SELECT r.id FROM (SELECT DISTINCT run_id FROM (
			SELECT run_id FROM environment_events WHERE environment_id = $1 AND seq > $2 ORDER BY seq LIMIT $3) e WHERE run_id IS NOT NULL) e
		CROSS JOIN LATERAL (SELECT r.* FROM runs r WHERE r.id = e.run_id AND r.environment_id = $1 LIMIT 1) r`,
		func(i *installation) []any { return []any{i.busy.ID, int64(0), 500} }},
	{"deploy plan: set names the revision references", `SELECT v.name FROM (SELECT DISTINCT unnest($2::text[]) AS name) n CROSS JOIN LATERAL (
		SELECT v.name FROM environment_values v WHERE v.environment_id = $1 AND v.name = n.name AND v.ciphertext IS NOT NULL LIMIT 1) v ORDER BY v.name`,
		func(i *installation) []any {
			return []any{i.busy.ID, []string{"APP_DOMAIN", "DATABASE_PASSWORD", "SMTP_URL"}}
		}},
	{"deploy plan: the first orphaned values", `SELECT v.name FROM environment_values v LEFT JOIN users u ON u.id = v.updated_by
		WHERE v.environment_id = $1 AND v.ciphertext IS NOT NULL AND v.name <> ALL($2) ORDER BY v.name OFFSET 0 LIMIT 20`,
		func(i *installation) []any {
			return []any{i.busy.ID, []string{"APP_DOMAIN", "DATABASE_PASSWORD", "SMTP_URL"}}
		}},
	{"active release", `SELECT id FROM runs WHERE environment_id = $1 AND kind = 'deploy'
		AND status IN ('succeeded', 'succeeded-with-warnings') AND revision_id IS NOT NULL ORDER BY finished_at DESC, id DESC LIMIT 1`, busy},
	{"queued runs (metrics)", `SELECT count(*) FROM runs WHERE status IN ('pending', 'running', 'waiting')`, func(*installation) []any { return nil }},
	{"backup alarms", `SELECT s.environment_id FROM backup_schedules s WHERE (s.fire_alarm OR s.alarm_from < $1::timestamptz)`,
		func(*installation) []any { return []any{time.Now()} }},
	{"last good backup", `SELECT COALESCE(b.scheduled_at, b.created_at) FROM backups b JOIN runs r ON r.id = b.run_id
		WHERE b.environment_id = $1 AND b.deleted_at IS NULL AND r.status IN ('succeeded', 'succeeded-with-warnings')
		ORDER BY COALESCE(b.scheduled_at, b.created_at) DESC, b.id DESC LIMIT 1`, busy},
	{"audit, by action", `SELECT id FROM audit_events WHERE true AND action = $2 ORDER BY at DESC, id DESC LIMIT $1`,
		func(*installation) []any { return []any{51, "value.set"} }},
	{"audit, deep page (keyset)", `SELECT id FROM audit_events WHERE true AND (at, id) < (SELECT k.at, k.id FROM audit_events k WHERE k.id = $2) ORDER BY at DESC, id DESC LIMIT $1`,
		func(i *installation) []any {
			var id int64
			_ = i.db.Pool.QueryRow(context.Background(), `SELECT id FROM audit_events ORDER BY at DESC, id DESC OFFSET (SELECT count(*) / 2 FROM audit_events) LIMIT 1`).Scan(&id)
			return []any{51, id}
		}},
	{"audit, by environment", `SELECT id FROM audit_events WHERE true AND (environment_id = $2 OR (environment_id IS NULL AND environment = '' AND project <> ''
		AND project IN (SELECT p.name FROM environments e JOIN projects p ON p.id = e.project_id WHERE e.id = $2))) ORDER BY at DESC, id DESC LIMIT $1`,
		func(i *installation) []any { return []any{51, i.busy.ID} }},
	{"audit, text search without a match (planned per search: custom plan shown by EXPLAIN of the literal)",
		`SELECT id FROM audit_events WHERE true AND audit_text(audit_events) LIKE '%' || lower($2) || '%' ORDER BY at DESC, id DESC LIMIT $1`,
		func(*installation) []any { return []any{51, "nothing-matches-this"} }},
	{"backups, older page (keyset)", `SELECT b.id FROM backups b WHERE b.environment_id = $1 AND b.deleted_at IS NULL
		AND (COALESCE(b.scheduled_at, b.created_at), b.id) < (SELECT COALESCE(o.scheduled_at, o.created_at), o.id FROM backups o WHERE o.id = $3 AND o.environment_id = $1)
		ORDER BY COALESCE(b.scheduled_at, b.created_at) DESC, b.id DESC LIMIT $2`,
		func(i *installation) []any {
			var id int64
			_ = i.db.Pool.QueryRow(context.Background(), `SELECT max(id) FROM backups WHERE environment_id = $1`, i.busy.ID).Scan(&id)
			return []any{i.busy.ID, 26, id}
		}},
	{"orphaned values count", `SELECT count(*) FROM environment_values v WHERE v.environment_id = $1 AND v.ciphertext IS NOT NULL AND v.name <> ALL($2)`,
		func(i *installation) []any {
			return []any{i.busy.ID, []string{"APP_DOMAIN", "DATABASE_PASSWORD", "SMTP_URL"}}
		}},
	{"audit actions", `WITH RECURSIVE a(action) AS (
			(SELECT action FROM audit_events ORDER BY action LIMIT 1)
			UNION ALL
			SELECT (SELECT action FROM audit_events WHERE action > a.action ORDER BY action LIMIT 1) FROM a WHERE a.action IS NOT NULL)
		SELECT a.action FROM a WHERE a.action IS NOT NULL ORDER BY a.action`, func(*installation) []any { return nil }},
	{"earlier version counts of a page", `SELECT name, count(*) FROM value_versions WHERE environment_id = $1 AND name = ANY($2) GROUP BY name`,
		func(i *installation) []any {
			return []any{i.busy.ID, []string{"APP_DOMAIN_1", "SMTP_URL_2", "DATABASE_PASSWORD_3"}}
		}},
}

func params(ph []string) string {
	if len(ph) == 0 {
		return ""
	}
	return "(" + strings.Join(ph, ", ") + ")"
}
