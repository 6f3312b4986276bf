package runs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// xids returns the next transaction id to be assigned: the difference of
// two readings is the number of writing transactions committed (or rolled
// back) in between on this server. Each test package has a server of its
// own, so only the benchmark writes to it.
func xids(b *testing.B, db *store.DB) int64 {
	var x int64
	if err := db.Pool.QueryRow(context.Background(), `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&x); err != nil {
		b.Fatal(err)
	}
	return x
}

// BenchmarkDeploy deploys the reference's production-shaped example with no
// step delay, each to a fresh environment whose domain points here (so each
// run issues a real certificate), and reports the time and writing
// transactions per run next to the floor: as many single-row
// insert-and-commit transactions.
func BenchmarkDeploy(b *testing.B) {
	src, err := os.ReadFile("../compiler/testdata/production.skali.yaml")
	if err != nil {
		b.Fatal(err)
	}
	f := newBenchFixture(b, string(src))
	ctx := context.Background()
	var txs int64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		env, err := f.db.CreateEnvironment(ctx, store.Actor{}, f.project.ID, fmt.Sprintf("b%d", i))
		if err != nil {
			b.Fatal(err)
		}
		domain := fmt.Sprintf("wiki-%d.test", i)
		f.resolver.Set(domain, here)
		for k, v := range map[string]string{"APP_DOMAIN": domain, "SESSION_SECRET": "x"} {
			if _, err := f.vault.SetValue(ctx, store.Actor{}, env, k, v); err != nil {
				b.Fatal(err)
			}
		}
		before := xids(b, f.db)
		b.StartTimer()
		run, err := f.svc.StartDeploy(ctx, store.Actor{}, env, runs.DeployRequest{})
		if err != nil {
			b.Fatal(err)
		}
		res, err := f.svc.Runner.Execute(ctx, run.ID)
		if err != nil || !res.Finished {
			b.Fatalf("execute: %v %+v", err, res)
		}
		b.StopTimer()
		txs += xids(b, f.db) - before
		b.StartTimer()
	}
	b.StopTimer()
	perRun := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	txPerRun := float64(txs) / float64(b.N)
	// The floor: the same number of single-row insert-and-commit transactions.
	if _, err := f.db.Pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_floor (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload jsonb NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	// Each floor transaction is BEGIN, one INSERT, COMMIT, as the store's
	// transactions are (pgx.BeginFunc).
	n := int(txs)
	start := time.Now()
	for range n {
		err := f.db.InTx(ctx, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO bench_floor (payload) VALUES ($1)`, `{"run":{"status":"running"}}`)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	floor := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.ReportMetric(perRun/1e6, "ms/run")
	b.ReportMetric(txPerRun, "tx/run")
	b.ReportMetric(floor/1e6, "floor-ms/run")
	b.ReportMetric(perRun/floor, "x-floor")
}

// BenchmarkConcurrentRuns executes 100 runs at once on one and on two
// River clients sharing the database.
func BenchmarkConcurrentRuns(b *testing.B) {
	for _, clients := range []int{1, 2} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			f := newBenchFixture(b, plainManifest)
			f.db.Now = time.Now
			var svcs []*runs.Service
			for range clients {
				svc := runs.NewService(f.db, f.vault, f.local, time.Now, slog.New(slog.NewTextHandler(io.Discard, nil)))
				if err := svc.StartRiver(context.Background(), runs.RiverOptions{PollInterval: 50 * time.Millisecond, ReconcileInterval: -1, Workers: 100}); err != nil {
					b.Fatal(err)
				}
				svcs = append(svcs, svc)
			}
			defer func() {
				for _, s := range svcs {
					s.StopRiver(context.Background())
				}
			}()
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				var envs []*store.Environment
				for j := range 100 {
					env, err := f.db.CreateEnvironment(ctx, store.Actor{}, f.project.ID, fmt.Sprintf("c%d-%d", i, j))
					if err != nil {
						b.Fatal(err)
					}
					envs = append(envs, env)
				}
				b.StartTimer()
				var ids []int64
				for j, env := range envs {
					run, err := svcs[j%clients].StartDeploy(ctx, store.Actor{}, env, runs.DeployRequest{})
					if err != nil {
						b.Fatal(err)
					}
					ids = append(ids, run.ID)
				}
				waitFinished(b, f.db, ids)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100/1e6, "ms/run")
		})
	}
}

// newBenchFixture is newFixture for benchmarks.
func newBenchFixture(b *testing.B, manifest string) *fixture {
	b.Helper()
	res := compiler.Compile([]byte(manifest))
	if !res.Valid() {
		b.Fatalf("manifest: %v", res.Errors())
	}
	return newFixture(b, manifest, nil)
}
