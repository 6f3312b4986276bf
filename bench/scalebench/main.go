// Command scalebench measures whether the Studio's pages and calls stay as
// fast on an installation after a year as on day one.
//
// It starts a private PostgreSQL, builds two installations in it (two
// databases): a small one, and a large one of the shape in issue 41 (300
// projects, 1,500 environments, 200,000 runs with their checkpoints and
// events, 2,000 values with 10 versions in one environment and values in
// the others, a million audit records, 20,000 snapshots, 500 users, at
// -scale 1). Both start with the same sample written through the product's
// own store calls (projects, environments, values through the vault,
// memberships, tokens, backup schedules and their audit records); the large
// one then grows by bulk INSERT … SELECT copies of the rows the sample
// wrote. It serves the Studio against each (web.New, as `studio serve`
// wires it), signs in, warms every page up (more than five executions, so
// PostgreSQL has switched its prepared statements to generic plans), then
// times each page and call against both, back to back and alternating, and
// prints p50 and p99 of each, their large/small ratios and the page's size.
//
//	go run ./scalebench              # the sizes (a few minutes)
//	go run ./scalebench -scale 0.05  # a quick run
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/pgserver"
	"github.com/skali-dev/studio/views"
	"github.com/skali-dev/studio/web"
)

type options struct {
	scale   float64
	samples int
	warmup  int
	values  int
	only    string
	explain bool
	profile string
	keep    string
}

func main() {
	var o options
	flag.Float64Var(&o.scale, "scale", 1, "size of the large installation relative to issue 41's (1: 200,000 runs, a million audit records, ...)")
	flag.IntVar(&o.samples, "samples", 30, "timed samples per page and installation, alternating")
	flag.IntVar(&o.warmup, "warmup", 8, "untimed requests per page and installation first (more than 5: generic plans)")
	flag.IntVar(&o.values, "values", 2000, "values in the large installation's busy environment (each with 10 versions)")
	flag.StringVar(&o.only, "only", "", "time only the pages whose name contains this (several: separated by commas)")
	flag.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the timed samples (both installations; the Studio runs in this process) to this file")
	flag.StringVar(&o.keep, "keep", "", "keep the installations in this directory and use them again on the next run with the same directory (the program's code may change in between: migrations run; the sizes are those of the first run)")
	flag.BoolVar(&o.explain, "explain", false, "print the plans of the slowest statements of the large installation (pg_stat_statements is not needed: the bench EXPLAINs what it knows)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

// sizes is the shape of one installation.
type sizes struct {
	projects, environments, bigProjectEnvs int
	runs, busyRuns, eventsPerRun           int
	busyValues, versions, otherValues      int
	audit, snapshots, users                int
	deliveries                             int
}

func (o options) large() sizes {
	n := func(full int, least int) int { return max(least, int(float64(full)*o.scale)) }
	return sizes{
		projects: n(300, 4), environments: n(1500, 12), bigProjectEnvs: n(200, 4),
		runs: n(200000, 200), busyRuns: n(40000, 100), eventsPerRun: 25,
		busyValues: o.values, versions: 10, otherValues: n(29000, 50),
		audit: n(1000000, 1000), snapshots: n(20000, 50), users: n(500, 10),
		deliveries: n(50000, 100),
	}
}

// small is day one, yet with at least one full page of everything a page
// lists, so that both installations render pages of the same size: the
// busy environment's runs (800: 114 failed, 133 restores; a runs page shows 100), snapshots (200),
// webhook deliveries (150), values (150 with 10 versions), audit records
// (600: each filter and the text search fill a page of 50), projects on
// home (60).
func small() sizes {
	return sizes{
		projects: 60, environments: 150, bigProjectEnvs: 30,
		runs: 1000, busyRuns: 800, eventsPerRun: 25,
		busyValues: 150, versions: 10, otherValues: 100,
		audit: 600, snapshots: 200, users: 20,
		deliveries: 150,
	}
}

// installation is one database with the Studio served against it.
type installation struct {
	name   string
	size   sizes
	db     *store.DB
	url    string
	client *http.Client
	token  string // an API token of the administrator
	busy   *store.Environment
	runID  int64 // a finished deploy of the busy environment
	stop   func()
}

func run(o options) error {
	ctx := context.Background()
	dir := o.keep
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "scalebench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	pg, err := pgserver.Start(ctx, pgserver.Options{Dir: dir, Ephemeral: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer pg.Stop()
	admin, err := pgx.Connect(ctx, pg.URL())
	if err != nil {
		return err
	}
	defer admin.Close(ctx)

	var insts []*installation
	for _, in := range []struct {
		name string
		size sizes
	}{{"small", small()}, {"large", o.large()}} {
		var exists bool
		if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, in.name).Scan(&exists); err != nil {
			return err
		}
		if exists {
			var built bool
			_ = admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, in.name+"_built").Scan(&built)
			if !built {
				// A build that did not finish: start again.
				if _, err := admin.Exec(ctx, "DROP DATABASE "+in.name); err != nil {
					return err
				}
				exists = false
			}
		}
		if !exists {
			if _, err := admin.Exec(ctx, "CREATE DATABASE "+in.name); err != nil {
				return err
			}
		}
		u, _ := url.Parse(pg.URL())
		u.Path = "/" + in.name
		start := time.Now()
		inst, err := build(ctx, in.name, in.size, u.String(), filepath.Join(dir, in.name+".key"), exists)
		if err == nil && !exists {
			// Marks the installation as built, for -keep.
			_, err = admin.Exec(ctx, "CREATE DATABASE "+in.name+"_built")
		}
		if err != nil {
			return fmt.Errorf("%s installation: %w", in.name, err)
		}
		defer inst.stop()
		fmt.Printf("%s installation built in %s: %s\n", in.name, time.Since(start).Round(time.Second), inst.counts(ctx))
		insts = append(insts, inst)
	}
	return measure(ctx, o, insts[0], insts[1])
}

const manifest = `name: %s

applications:
  web:
    build:
      context: .
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: "${APP_DOMAIN}"
        port: http
`

// build writes the sample through the product's store, copies it up to
// the sizes and serves the Studio against the database.
// With reuse, the database was built by an earlier run (-keep): only the
// Studio is served against it.
func build(ctx context.Context, name string, sz sizes, dbURL, keyFile string, reuse bool) (*installation, error) {
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	if _, err := db.Migrate(ctx); err != nil {
		return nil, err
	}
	keys, err := store.OpenKeyring(ctx, db, store.KeyringOptions{KeyFile: keyFile})
	if err != nil {
		return nil, err
	}
	vault := store.NewVault(db, keys)
	// Errors only (a page answering 500 says why); requests are not logged.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	hub := events.NewHub(db, events.HubOptions{Logger: logger, LatestRuns: views.LatestRunsShown})
	metrics := web.NewMetrics(db)
	var handler http.Handler
	// Each request is labelled with its installation, so that a CPU
	// profile shows them apart: go tool pprof -tagfocus inst=large.
	labels := pprof.Labels("inst", name)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pprof.Do(r.Context(), labels, func(context.Context) {
			if r.URL.Path == "/metrics" {
				metrics.Handler().ServeHTTP(w, r)
				return
			}
			handler.ServeHTTP(w, r)
		})
	}))
	lp, _, err := local.New(ctx, db, vault, local.Options{Resolver: noDNS{}})
	if err != nil {
		return nil, err
	}
	svc := runs.NewService(db, vault, lp, db.Now, logger)
	handler = web.New(web.Deps{DB: db, Logger: logger, PublicURL: srv.URL, LocalLogin: true, Hub: hub, Metrics: metrics, Vault: vault, Runs: svc})
	inst := &installation{name: name, size: sz, db: db, url: srv.URL, stop: func() { srv.Close(); hub.Close(); db.Close() }}
	if err := inst.signIn(ctx); err != nil {
		return nil, err
	}
	var me store.User
	if err := db.Pool.QueryRow(ctx, `SELECT id FROM users WHERE is_admin ORDER BY id LIMIT 1`).Scan(&me.ID); err != nil {
		return nil, fmt.Errorf("the signed-in administrator: %w", err)
	}
	me.IsAdmin = true
	actor := store.Actor{User: &me}
	if reuse {
		if inst.busy, err = db.EnvironmentByName(ctx, "shop", "production"); err != nil {
			return nil, err
		}
		if _, inst.token, err = db.CreateToken(ctx, actor, store.NewToken{Name: "bench", Days: 30,
			Scope: []store.TokenGrant{{EnvironmentID: inst.busy.ID, Project: "shop", Environment: "production", Role: store.RoleAdmin}}}); err != nil {
			return nil, err
		}
		err = db.Pool.QueryRow(ctx, `SELECT max(id) FROM runs WHERE environment_id = $1 AND kind = 'deploy' AND finished_at IS NOT NULL`, inst.busy.ID).Scan(&inst.runID)
		return inst, err
	}

	// The sample, through the product's own writes.
	mk := func(project string) (*store.Project, error) {
		src := fmt.Sprintf(manifest, project)
		res := compiler.Compile([]byte(src))
		if !res.Valid() {
			return nil, fmt.Errorf("manifest: %v", res.Errors())
		}
		def := res.Definition
		p, _, err := db.CreateProject(ctx, actor, store.NewRevision{Name: def.Name, Description: def.Description, Source: src,
			Canonical: def.Canonical(), Hash: res.Hash, Summary: compiler.Summarize(nil, def)})
		return p, err
	}
	shop, err := mk("shop")
	if err != nil {
		return nil, err
	}
	big, err := mk("big")
	if err != nil {
		return nil, err
	}
	if inst.busy, err = db.CreateEnvironment(ctx, actor, shop.ID, "production"); err != nil {
		return nil, err
	}
	staging, err := db.CreateEnvironment(ctx, actor, shop.ID, "staging")
	if err != nil {
		return nil, err
	}
	for i := range 2 {
		if _, err := db.CreateEnvironment(ctx, actor, big.ID, fmt.Sprintf("env-%d", i)); err != nil {
			return nil, err
		}
	}
	for _, env := range []*store.Environment{inst.busy, staging} {
		for v := range 2 {
			for _, n := range []string{"APP_DOMAIN", "DATABASE_PASSWORD", "SMTP_URL"} {
				value := fmt.Sprintf("sample-%d", v)
				if n == "APP_DOMAIN" {
					// A hostname, so that a deploy of the busy environment may start.
					value = fmt.Sprintf("%s-%d.shop.example.test", env.Name, v)
				}
				if _, err := vault.SetValue(ctx, actor, env, n, value); err != nil {
					return nil, err
				}
			}
		}
		for _, email := range []string{"dev@example.test", "ops@example.test"} {
			if _, err := db.AddMember(ctx, actor, env, email, store.RoleDeployer); err != nil {
				return nil, err
			}
		}
		if err := db.SetBackupSchedule(ctx, actor, env, "0 3 * * *", "7d", 7*24*time.Hour, 24*time.Hour); err != nil {
			return nil, err
		}
	}
	if err := db.SetBackupTarget(ctx, actor, "/srv/backups"); err != nil {
		return nil, err
	}
	if _, inst.token, err = db.CreateToken(ctx, actor, store.NewToken{Name: "bench", Days: 30,
		Scope: []store.TokenGrant{{EnvironmentID: inst.busy.ID, Project: "shop", Environment: "production", Role: store.RoleAdmin}}}); err != nil {
		return nil, err
	}
	if _, _, err := vault.CreateWebhookEndpoint(ctx, actor, inst.busy, store.NewWebhookEndpoint{URL: "https://hooks.example.test/studio",
		Events: []string{store.WebhookDeploySucceeded, store.WebhookDeployFailed}, Format: "standard"}); err != nil {
		return nil, err
	}
	if err := grow(ctx, db, inst, sz); err != nil {
		return nil, err
	}
	if err := db.Pool.QueryRow(ctx, `SELECT max(id) FROM runs WHERE environment_id = $1 AND kind = 'deploy' AND finished_at IS NOT NULL`, inst.busy.ID).Scan(&inst.runID); err != nil {
		return nil, err
	}
	_, err = db.Pool.Exec(ctx, `VACUUM ANALYZE`)
	return inst, err
}

// grow copies the sample's rows up to the sizes, in bulk.
func grow(ctx context.Context, db *store.DB, inst *installation, sz sizes) error {
	steps := []struct {
		what string
		sql  string
		args []any
	}{
		{"users", `INSERT INTO users (issuer, subject, email, name, last_sign_in_at)
			SELECT 'https://id.example.test', 'user-' || g, 'user' || g || '@example.test', 'User ' || g, now() - g * interval '1 hour'
			FROM generate_series(1, $1::int) g`, []any{sz.users}},
		{"projects", `INSERT INTO projects (name, description, created_by, created_at)
			SELECT 'project-' || g, p.description, p.created_by, p.created_at - g * interval '1 hour'
			FROM projects p, generate_series(1, $1::int - 2) g WHERE p.name = 'shop'`, []any{sz.projects}},
		{"revisions", `INSERT INTO revisions (project_id, number, source, definition, hash, summary, created_by, created_at)
			SELECT p.id, 1, replace(r.source, 'name: shop', 'name: ' || p.name), r.definition || jsonb_build_object('name', p.name), r.hash, r.summary, r.created_by, p.created_at
			FROM projects p, revisions r JOIN projects s ON s.id = r.project_id AND s.name = 'shop'
			WHERE p.name LIKE 'project-%'`, nil},
		{"environments of the big project", `INSERT INTO environments (project_id, name, created_by, created_at)
			SELECT p.id, 'env-' || g, p.created_by, now() FROM projects p, generate_series(2, $1::int - 1) g WHERE p.name = 'big'`, []any{sz.bigProjectEnvs}},
		{"environments", `INSERT INTO environments (project_id, name, created_by, created_at)
			SELECT p.id, (array['production','staging','preview','qa','demo'])[1 + (g % 5)] || CASE WHEN g >= 5 THEN '-' || g ELSE '' END, p.created_by, now()
			FROM (SELECT id, created_by, row_number() OVER (ORDER BY id) AS i FROM projects WHERE name LIKE 'project-%') p,
			     generate_series(0, greatest(0, ($1::int - $2::int - 4) / greatest(1, $3::int - 2)) - 1) g`, []any{sz.environments, sz.bigProjectEnvs, sz.projects}},
		{"memberships", `INSERT INTO memberships (environment_id, user_id, role)
			SELECT e.id, u.id, 'viewer' FROM environments e
			JOIN LATERAL (SELECT id FROM users WHERE NOT is_admin AND issuer <> 'local' ORDER BY (id + e.id) % 97 LIMIT 2) u ON true
			ON CONFLICT DO NOTHING`, nil},
		{"backup schedules", `INSERT INTO backup_schedules (environment_id, cron, keep_ms, keep_text, interval_ms, considered_until, updated_by)
			SELECT e.id, s.cron, s.keep_ms, s.keep_text, s.interval_ms, s.considered_until, s.updated_by
			FROM environments e, backup_schedules s WHERE s.environment_id = $1 ON CONFLICT DO NOTHING`, []any{inst.busy.ID}},
		// Runs: the busy environment has busyRuns of them, the rest are spread.
		// The bulk copies bring their own per-environment numbers (a
		// trigger would otherwise update the environment's counter row
		// once per run); "run and snapshot counters" sets the counters.
		{"runs of the busy environment", `INSERT INTO runs (environment_id, kind, status, revision_id, created_at, started_at, finished_at, last_seq, reason, number)
			SELECT $1, k.kind, k.status, e.active_revision_id, t, t, t + interval '90 s', $3, k.reason, e.last_run_number + g
			FROM environments e, generate_series(1, $2::int) g,
			     LATERAL (SELECT now() - (g * interval '7 min') AS t) tt,
			     LATERAL (SELECT (array['deploy','deploy','reconcile','backup','deploy','restore'])[1 + g % 6] AS kind,
			                     (array['succeeded','succeeded','failed','succeeded-with-warnings','cancelled','succeeded','succeeded'])[1 + g % 7] AS status,
			                     CASE WHEN g % 7 IN (2, 4) THEN 'the rollout did not become ready' ELSE '' END AS reason) k
			WHERE e.id = $1`, []any{inst.busy.ID, sz.busyRuns, sz.eventsPerRun}},
		{"other runs", `INSERT INTO runs (environment_id, kind, status, created_at, started_at, finished_at, last_seq, number)
			SELECT e.id, (array['deploy','reconcile','backup'])[1 + g % 3], (array['succeeded','failed','succeeded','cancelled'])[1 + g % 4],
			       now() - g * interval '3 min', now() - g * interval '3 min', now() - g * interval '3 min' + interval '1 min', $3,
			       e.last_run_number + row_number() OVER (PARTITION BY e.id ORDER BY g)
			FROM (SELECT id, last_run_number, row_number() OVER (ORDER BY id) - 1 AS i, count(*) OVER () AS n FROM environments WHERE id <> $1) e,
			     generate_series(1, greatest(1, ($2::int) / 1)) g
			WHERE g % e.n = e.i`, []any{inst.busy.ID, sz.runs - sz.busyRuns, sz.eventsPerRun}},
		{"run counters", `UPDATE environments e SET last_run_number = s.n FROM (SELECT environment_id, max(number) AS n FROM runs GROUP BY 1) s WHERE s.environment_id = e.id`, nil},
		{"a queued run", `INSERT INTO runs (environment_id, kind) VALUES ($1, 'reconcile')`, []any{inst.busy.ID}},
		{"checkpoints", `INSERT INTO run_checkpoints (run_id, position, kind, name, status, started_at, finished_at)
			SELECT r.id, p, (array['check-values','build','release','rollout','issue-tls','activate'])[1 + p], 'web',
			       CASE WHEN r.status = 'failed' AND p = 3 THEN 'failed' WHEN r.status = 'failed' AND p > 3 THEN 'skipped' ELSE 'succeeded' END,
			       r.started_at, r.finished_at
			FROM runs r, generate_series(0, 5) p WHERE r.finished_at IS NOT NULL`, nil},
		{"run events", `INSERT INTO run_events (run_id, seq, at, checkpoint, payload)
			SELECT r.id, s, r.started_at + s * interval '2 s', CASE WHEN s > 1 AND s < $1 THEN (s % 6) END,
			       jsonb_build_object('run', jsonb_build_object('status', CASE WHEN s = $1 THEN r.status ELSE 'running' END))
			FROM runs r, generate_series(1, $1::int) s WHERE r.finished_at IS NOT NULL`, []any{sz.eventsPerRun}},
		{"environment events", `WITH ev AS (
				SELECT r.environment_id, r.id, r.finished_at, r.status, row_number() OVER (PARTITION BY r.environment_id ORDER BY r.id) AS seq
				FROM runs r WHERE r.finished_at IS NOT NULL)
			INSERT INTO environment_events (environment_id, seq, at, run_id, payload)
			SELECT environment_id, seq, finished_at, id, jsonb_build_object('run', jsonb_build_object('id', id, 'status', status)) FROM ev`, nil},
		{"environment event counters", `UPDATE environments e SET last_event_seq = s.n FROM (SELECT environment_id, max(seq) AS n FROM environment_events GROUP BY 1) s WHERE s.environment_id = e.id`, nil},
		{"deploy values", `INSERT INTO deploy_values (run_id, name, version)
			SELECT r.id, v.name, v.version FROM runs r JOIN environment_values v ON v.environment_id = r.environment_id
			WHERE r.kind = 'deploy' AND r.status LIKE 'succeeded%' AND v.ciphertext IS NOT NULL`, nil},
		{"values of the busy environment", `INSERT INTO environment_values (environment_id, name, version, key_id, nonce, ciphertext, updated_by, updated_at)
			SELECT v.environment_id, v.name || '_' || g, $3, v.key_id, v.nonce, v.ciphertext, v.updated_by, v.updated_at
			FROM environment_values v, generate_series(1, ($2::int - 3) / 3) g WHERE v.environment_id = $1`, []any{inst.busy.ID, sz.busyValues, sz.versions}},
		{"earlier versions in the busy environment", `INSERT INTO value_versions (environment_id, name, version, key_id, nonce, ciphertext, set_by, set_at, superseded_at)
			SELECT v.environment_id, v.name, n, v.key_id, v.nonce, v.ciphertext, v.updated_by, v.updated_at - (v.version - n) * interval '1 day', v.updated_at - (v.version - n - 1) * interval '1 day'
			FROM environment_values v, generate_series(1, $2::int - 1) n WHERE v.environment_id = $1 AND n < v.version ON CONFLICT DO NOTHING`, []any{inst.busy.ID, sz.versions}},
		{"values of other environments", `INSERT INTO environment_values (environment_id, name, version, key_id, nonce, ciphertext, updated_by, updated_at)
			SELECT e.id, v.name || '_' || g, v.version, v.key_id, v.nonce, v.ciphertext, v.updated_by, v.updated_at
			FROM (SELECT id, row_number() OVER (ORDER BY id) AS i FROM environments WHERE id <> $1) e,
			     (SELECT * FROM environment_values WHERE environment_id = $1 AND name IN ('APP_DOMAIN', 'SMTP_URL', 'DATABASE_PASSWORD')) v,
			     generate_series(1, greatest(1, $2::int / 3 / (SELECT count(*) FROM environments))) g
			ON CONFLICT DO NOTHING`, []any{inst.busy.ID, sz.otherValues}},
		// The alarm trigger refreshes the schedule once per snapshot, each
		// update reading the environment's snapshots: quadratic in one
		// statement (6m43s at -scale 0.05); once after the copy instead.
		{"snapshots: alarms refreshed once after", `ALTER TABLE backups DISABLE TRIGGER backups_refresh_alarm`, nil},
		{"snapshots", `WITH r AS (
				INSERT INTO runs (environment_id, kind, status, created_at, started_at, finished_at, number)
				SELECT e.id, 'backup', 'succeeded', now() - g * interval '1 day', now() - g * interval '1 day', now() - g * interval '1 day' + interval '1 min',
				       e.last_run_number + row_number() OVER (PARTITION BY e.id ORDER BY g)
				FROM (SELECT id, last_run_number, row_number() OVER (ORDER BY id <> $1, id) - 1 AS i FROM environments) e, generate_series(1, $2::int) g
				WHERE (e.i = 0 AND g <= least($2::int, 400)) OR (e.i > 0 AND g % (SELECT count(*) FROM environments) = e.i)
				RETURNING id, environment_id, created_at)
			INSERT INTO backups (environment_id, origin, scheduled_at, run_id, name, target, keep_ms, created_at, number)
			SELECT environment_id, 'scheduled', created_at, id, to_char(created_at, 'YYYYMMDD-HH24MISS') || '-' || id, '/srv/backups', 604800000, created_at,
			       (SELECT last_snapshot_number FROM environments WHERE id = r.environment_id) + row_number() OVER (PARTITION BY environment_id ORDER BY id)
			FROM r`, []any{inst.busy.ID, sz.snapshots}},
		{"snapshots' alarm trigger", `ALTER TABLE backups ENABLE TRIGGER backups_refresh_alarm`, nil},
		{"backup alarms", `UPDATE backup_schedules SET environment_id = environment_id`, nil},
		{"run and snapshot counters", `UPDATE environments e SET last_run_number = GREATEST(e.last_run_number, (SELECT max(number) FROM runs WHERE environment_id = e.id)),
			last_snapshot_number = GREATEST(e.last_snapshot_number, COALESCE((SELECT max(number) FROM backups WHERE environment_id = e.id), 0))`, nil},
		{"audit records", `INSERT INTO audit_events (at, actor_id, actor, action, project, environment_id, environment, target, detail, request_id)
			SELECT a.at - g * interval '20 s', a.actor_id, a.actor, a.action, a.project, a.environment_id, a.environment, a.target, a.detail, 'bulk-' || g
			FROM (SELECT *, row_number() OVER (ORDER BY id) - 1 AS i, count(*) OVER () AS n FROM audit_events) a, generate_series(1, $1::int) g
			WHERE g % a.n = a.i`, []any{sz.audit}},
		{"webhook deliveries", `INSERT INTO webhook_deliveries (endpoint_id, message_id, event, data, occurred_at, status, attempts, response_code, duration_ms, last_attempt_at, created_at)
			SELECT (SELECT max(id) FROM webhook_endpoints), 'msg_' || g, 'deploy.succeeded', jsonb_build_object('project', 'shop', 'environment', 'production', 'path', '/projects/shop/environments/production/runs/' || g,
			           'run', jsonb_build_object('id', g, 'kind', 'deploy', 'status', 'succeeded', 'revision', 1)), now() - g * interval '1 minute',
			       CASE WHEN g % 20 = 0 THEN 'failed' ELSE 'succeeded' END, 1 + (g % 20 = 0)::int * 4, CASE WHEN g % 20 = 0 THEN 500 ELSE 200 END, 40,
			       now() - g * interval '1 minute', now() - g * interval '1 minute'
			FROM generate_series(1, $1::int) g`, []any{sz.deliveries}},
	}
	for _, s := range steps {
		start := time.Now()
		if _, err := db.Pool.Exec(ctx, s.sql, s.args...); err != nil {
			return fmt.Errorf("grow %s: %w", s.what, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			fmt.Printf("  %s: %s\n", s.what, d.Round(time.Second))
		}
	}
	return nil
}

func (inst *installation) counts(ctx context.Context) string {
	var out []string
	for _, t := range []string{"projects", "environments", "users", "runs", "run_events", "environment_values", "value_versions", "audit_events", "backups"} {
		var n int64
		_ = inst.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+t).Scan(&n)
		out = append(out, fmt.Sprintf("%s %d", t, n))
	}
	return strings.Join(out, ", ")
}

func (inst *installation) signIn(ctx context.Context) error {
	jar, _ := cookiejar.New(nil)
	inst.client = &http.Client{Jar: jar, Timeout: time.Minute}
	token, err := inst.db.CreateLoginToken(ctx)
	if err != nil {
		return err
	}
	resp, err := inst.client.Get(inst.url + "/login/local?token=" + url.QueryEscape(token))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("local sign-in: %s", resp.Status)
	}
	return nil
}

// page is one page or call to time.
type page struct {
	name string
	// path is relative to the installation, from what it holds.
	path   func(inst *installation) string
	method string
	api    bool
	// limitP50 and limitP99 are the ratios; maxBytes a size limit.
	maxBytes int
	maxLarge time.Duration
	// timed, when set, times the page itself (a websocket, a POST that
	// needs undoing) instead of a GET of path; want is its success status
	// (200 when zero).
	timed func(inst *installation) (time.Duration, int, int, error)
	want  int
}

func pages() []page {
	env := func(inst *installation) string { return "/projects/shop/environments/production" }
	get := func(name string, p func(inst *installation) string) page {
		return page{name: name, path: p, method: http.MethodGet}
	}
	fixed := func(s string) func(*installation) string { return func(*installation) string { return s } }
	return []page{
		get("home", fixed("/")),
		get("projects", fixed("/projects")),
		get("project with many environments", fixed("/projects/big")),
		get("project", fixed("/projects/shop")),
		get("busy environment", env),
		get("runs, first page", func(i *installation) string { return env(i) + "/runs" }),
		get("runs, deep page", func(i *installation) string {
			var id int64
			_ = i.db.Pool.QueryRow(context.Background(), `SELECT id FROM runs WHERE environment_id = $1 ORDER BY id LIMIT 1 OFFSET 20`, i.busy.ID).Scan(&id)
			return fmt.Sprintf("%s/runs?before=%d", env(i), id)
		}),
		get("runs, failed", func(i *installation) string { return env(i) + "/runs?status=failed" }),
		get("runs, restores", func(i *installation) string { return env(i) + "/runs?kind=restore" }),
		get("run", func(i *installation) string { return fmt.Sprintf("%s/runs/%d", env(i), i.runID) }),
		{name: "values (2,000 in large)", path: func(i *installation) string { return env(i) + "/values" }, method: http.MethodGet, maxBytes: 100 << 10},
		get("backups", func(i *installation) string { return env(i) + "/backups" }),
		get("backups, older page", func(i *installation) string {
			// The snapshot in the middle of the busy environment's list.
			var id int64
			_ = i.db.Pool.QueryRow(context.Background(), `SELECT id FROM backups WHERE environment_id = $1 AND deleted_at IS NULL
				ORDER BY COALESCE(scheduled_at, created_at) DESC, id DESC OFFSET (SELECT count(*) / 2 FROM backups WHERE environment_id = $1) LIMIT 1`, i.busy.ID).Scan(&id)
			return fmt.Sprintf("%s/backups?before=%d", env(i), id)
		}),
		get("deploy plan", func(i *installation) string { return env(i) + "/deploys/new" }),
		get("webhooks", func(i *installation) string { return env(i) + "/webhooks" }),
		get("members", func(i *installation) string { return env(i) + "/members" }),
		get("audit, first page", fixed("/audit")),
		get("audit, deep page", func(i *installation) string {
			// Halfway down the whole log: 500,000 records deep at -scale 1.
			var id int64
			_ = i.db.Pool.QueryRow(context.Background(), `SELECT id FROM audit_events ORDER BY at DESC, id DESC
				OFFSET (SELECT count(*) / 2 FROM audit_events) LIMIT 1`).Scan(&id)
			return fmt.Sprintf("/audit?before=%d", id)
		}),
		get("audit, by action", fixed("/audit?action=value.set")),
		get("audit, by environment", fixed("/audit?environment=shop%2Fproduction")),
		{name: "audit, text search without a match", path: fixed("/audit?q=nothing-matches-this"), method: http.MethodGet, maxLarge: 50 * time.Millisecond},
		get("audit, text search", fixed("/audit?q=DATABASE_PASSWORD")),
		get("installation", fixed("/admin")),
		get("tokens", fixed("/tokens")),
		get("metrics", fixed("/metrics")),
		{name: "API environments", path: fixed("/api/v1/environments"), method: http.MethodGet, api: true},
		{name: "API plan", path: func(i *installation) string { return "/api/v1" + env(i) + "/plan" }, method: http.MethodGet, api: true},
		{name: "API run", path: func(i *installation) string { return fmt.Sprintf("/api/v1%s/runs/%d", env(i), i.runID) }, method: http.MethodGet, api: true},
		{name: "environment stream, first frame", timed: func(i *installation) (time.Duration, int, int, error) { return i.stream(1) }},
		{name: "environment stream, replay of 20", timed: func(i *installation) (time.Duration, int, int, error) { return i.stream(20) }},
		{name: "starting a deploy (API)", timed: (*installation).startDeploy, want: http.StatusCreated},
	}
}

type result struct {
	times  []time.Duration
	bytes  int
	status int
}

func (r *result) pct(p float64) time.Duration {
	s := slices.Clone(r.times)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func (inst *installation) do(pg page) (time.Duration, int, int, error) {
	if pg.timed != nil {
		return pg.timed(inst)
	}
	req, err := http.NewRequest(pg.method, inst.url+pg.path(inst), nil)
	if err != nil {
		return 0, 0, 0, err
	}
	c := inst.client
	if pg.api {
		req.Header.Set("Authorization", "Bearer "+inst.token)
		c = http.DefaultClient
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(start), int(n), resp.StatusCode, err
}

func measure(ctx context.Context, o options, sm, lg *installation) error {
	fmt.Printf("\n%d samples per page and installation, alternating, after %d warm-up requests each\n", o.samples, o.warmup)
	fmt.Printf("%-36s %9s %9s %9s %9s %7s %7s %9s %9s  %s\n", "page", "small p50", "large p50", "small p99", "large p99", "p50 ×", "p99 ×", "small KB", "large KB", "goal (p50 ≤ 1.5×, p99 ≤ 2×)")
	failed := 0
	if o.profile != "" {
		f, err := os.Create(o.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for _, pg := range pages() {
		if o.only != "" && !slices.ContainsFunc(strings.Split(o.only, ","), func(w string) bool { return strings.Contains(pg.name, w) }) {
			continue
		}
		res := map[*installation]*result{sm: {}, lg: {}}
		var err error
		for range o.warmup {
			for _, inst := range []*installation{sm, lg} {
				if _, res[inst].bytes, res[inst].status, err = inst.do(pg); err != nil {
					return fmt.Errorf("%s: %w", pg.name, err)
				}
			}
		}
		for i := range o.samples {
			order := []*installation{sm, lg}
			if i%2 == 1 {
				order = []*installation{lg, sm}
			}
			for _, inst := range order {
				d, n, st, err := inst.do(pg)
				if err != nil {
					return fmt.Errorf("%s: %w", pg.name, err)
				}
				r := res[inst]
				r.times, r.bytes, r.status = append(r.times, d), n, st
			}
		}
		s, l := res[sm], res[lg]
		r50 := float64(l.pct(0.5)) / float64(max(1, s.pct(0.5)))
		r99 := float64(l.pct(0.99)) / float64(max(1, s.pct(0.99)))
		ok := r50 <= 1.5 && r99 <= 2
		var notes []string
		if pg.maxBytes > 0 && l.bytes > pg.maxBytes {
			ok = false
			notes = append(notes, fmt.Sprintf("over %d KB", pg.maxBytes>>10))
		}
		if pg.maxLarge > 0 && l.pct(0.5) > pg.maxLarge {
			ok = false
			notes = append(notes, fmt.Sprintf("large p50 over %s", pg.maxLarge))
		}
		want := cmp.Or(pg.want, http.StatusOK)
		if s.status != want || l.status != want {
			ok = false
			notes = append(notes, fmt.Sprintf("status %d / %d", s.status, l.status))
		}
		verdict := "ok"
		if !ok {
			verdict = "FAIL"
			failed++
		}
		fmt.Printf("%-36s %9s %9s %9s %9s %6.1fx %6.1fx %9.1f %9.1f  %s %s\n", pg.name, ms(s.pct(0.5)), ms(l.pct(0.5)), ms(s.pct(0.99)), ms(l.pct(0.99)),
			r50, r99, float64(s.bytes)/1024, float64(l.bytes)/1024, verdict, strings.Join(notes, ", "))
	}
	if o.explain {
		if err := explain(ctx, lg); err != nil {
			return err
		}
	}
	if failed > 0 {
		return errors.New(fmt.Sprint(failed, " pages or calls missed their goal"))
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// noDNS answers no name: the bench's installations resolve nothing.
type noDNS struct{}

func (noDNS) LookupIP(ctx context.Context, network, host string) ([]net.IP, error) {
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
