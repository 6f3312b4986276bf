package main

import (
	"context"
	"fmt"
	"strings"

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
		ph := make([]string, len(args))
		for j := range args {
			ph[j] = fmt.Sprintf("$%d", j+1)
		}
		rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) EXECUTE "+pgx.Identifier{name}.Sanitize()+"("+strings.Join(ph, ", ")+")", args...)
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

var plannedStatements = []planned{}
