package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/runs/platforms"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/pgserver"
	"github.com/skali-dev/studio/views"
	"github.com/skali-dev/studio/web"
)

func newLogger(format string, w io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// database is an open store and, in the embedded default, the private
// server behind it.
type database struct {
	*store.DB
	pg *pgserver.Server
	// url is the connection string the store opened.
	url string
}

func (d *database) Close() {
	d.DB.Close()
	if d.pg != nil {
		d.pg.Stop()
	}
}

// openDatabase opens DATABASE_URL, or starts the private PostgreSQL in the
// data directory, and applies the migrations.
func openDatabase(ctx context.Context, cfg *Config, logger *slog.Logger) (*database, error) {
	d := &database{}
	url := cfg.DatabaseURL
	if url == "" {
		pg, err := pgserver.Start(ctx, pgserver.Options{Dir: cfg.DataDir, Logger: logger})
		if err != nil {
			return nil, err
		}
		d.pg = pg
		url = pg.URL()
	}
	db, err := store.Open(ctx, url)
	if err != nil {
		if d.pg != nil {
			d.pg.Stop()
		}
		return nil, err
	}
	d.DB, d.url = db, url
	applied, err := db.Migrate(ctx)
	if err != nil {
		d.Close()
		return nil, err
	}
	for _, name := range applied {
		logger.Info("applied migration", "name", name)
	}
	return d, nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	if err := cfg.parseFlags("serve", args, stderr); err != nil {
		return err
	}
	logger := newLogger(cfg.LogFormat, stderr)
	localLogin := cfg.OIDCIssuer == "" || cfg.AllowLocalLogin
	if cfg.OIDCIssuer != "" && cfg.OIDCClientID == "" {
		return fmt.Errorf("STUDIO_OIDC_ISSUER is set but STUDIO_OIDC_CLIENT_ID is not: set both (and STUDIO_OIDC_CLIENT_SECRET)")
	}

	db, err := openDatabase(ctx, &cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	keys, err := openKeyring(ctx, &cfg, db.DB, logger)
	if err != nil {
		return err
	}

	listener, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	vault := store.NewVault(db.DB, keys)
	var faults *local.Faults
	if cfg.LocalFaults != "" {
		if faults, err = local.LoadFaults(cfg.LocalFaults); err != nil {
			return err
		}
	}
	opened, err := platforms.Open(ctx, platforms.Config{Name: cfg.Platform, DB: db.DB, Vault: vault, Logger: logger,
		Local:      local.Options{StepDelay: cfg.LocalStepDelay, Resolver: platform.NewResolver(cfg.DNSServer), EdgePort: cfg.EdgePort, Faults: faults},
		Kubeconfig: cfg.Kubeconfig, Kubernetes: kubernetes.Options{Gateway: cfg.Gateway, ClusterIssuer: cfg.ClusterIssuer, PostgresImages: cfg.PostgresImages, HelperImage: cfg.HelperImage,
			ProvisionTimeout: cfg.ProvisionTimeout}})
	if err != nil {
		return err
	}
	defer opened.Close()
	identity, runPlatform := opened.Identity, opened.Platform
	runService := runs.NewService(db.DB, vault, runPlatform, time.Now, logger)
	runService.PublicAddresses = cfg.publicAddresses
	// The Studio's own address is no environment's hostname.
	var ownHosts []string
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Hostname() != "" {
		ownHosts = []string{strings.ToLower(u.Hostname())}
	}
	runService.SetReservedHostnames(ownHosts)
	// Environments deployed before hostname claims existed claim the
	// hostnames of their active revision (once per installation).
	if claimed, conflicts, err := vault.BackfillHostnameClaims(ctx, ownHosts); err != nil {
		return err
	} else if claimed > 0 || conflicts > 0 {
		logger.Info("hostname claims backfilled from the active revisions", "claimed", claimed, "held by an older environment", conflicts)
	}
	// The metrics listener opens before deliveries start: they never reach it.
	var ml net.Listener
	if cfg.MetricsAddr != "" {
		if ml, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return fmt.Errorf("listen on %s (metrics): %w", cfg.MetricsAddr, err)
		}
	}
	own := []net.Addr{listener.Addr()}
	if ml != nil {
		own = append(own, ml.Addr())
	}
	webhooks := runs.WebhookOptions{PublicURL: cfg.PublicURL, AllowNetworks: cfg.webhookAllow,
		Own: webhookOwnAddresses(ctx, db.url, own...)}
	if err := runService.StartRiver(ctx, runs.RiverOptions{ReconcileInterval: cfg.ReconcileInterval, RescueAfter: cfg.RunRescueAfter,
		Lease: cfg.RunLease, ValueRetention: cfg.ValueRetention, Webhooks: webhooks}); err != nil {
		return err
	}
	// What runs now: every process keeps the environments' health in step
	// with what the platform reports (the store announces a change once).
	go func() {
		if err := runService.WatchHealth(ctx); err != nil {
			logger.Warn("health: the platform's reports are not followed", "err", err)
		}
	}()
	// stopRuns stops taking runs and lets the running ones reach a safe
	// point within the shutdown timeout (once, whichever way serve ends).
	stopRuns := sync.OnceValue(func() error {
		stopCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		return runService.StopRiver(stopCtx)
	})
	defer stopRuns()
	// The hub holds this process's LISTEN connection and fans run events
	// out to the event stream websockets.
	hub := events.NewHub(db.DB, events.HubOptions{Logger: logger, LatestRuns: views.LatestRunsShown})
	defer hub.Close()
	var metrics *web.Metrics
	var metricsSrv *http.Server
	if ml != nil {
		metrics = web.NewMetrics(db.DB)
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics.Handler())
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := metricsSrv.Serve(ml); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Warn("metrics server", "err", err)
			}
		}()
		logger.Info("serving metrics", "addr", ml.Addr().String())
	}
	handler := web.New(web.Deps{
		DB:                 db.DB,
		Logger:             logger,
		PublicURL:          cfg.PublicURL,
		SessionIdleTimeout: cfg.SessionIdleTimeout,
		SessionLifetime:    cfg.SessionLifetime,
		LocalLogin:         localLogin,
		Vault:              vault,
		Runs:               runService,
		Edge:               identity.Handler(),
		OIDCIssuer:         cfg.OIDCIssuer,
		OIDCClientID:       cfg.OIDCClientID,
		OIDCClientSecret:   cfg.OIDCClientSecret,
		Admins:             splitList(cfg.Admins),
		Hub:                hub,
		Metrics:            metrics,
		TrustedProxies:     cfg.trustedProxies,
	})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		// No WriteTimeout: run pages hold websockets open for as long as a
		// deploy takes. Handlers bound their own work with the request context.
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// Shutdown does not track hijacked connections: closing the hub ends
	// every event stream with "going away" (the pages reconnect to another
	// replica or to this one once it is back), and the shutdown waits for
	// the streams to say so.
	srv.RegisterOnShutdown(hub.Close)
	go cleanSessions(ctx, db.DB, logger)

	fmt.Fprintf(stdout, "Skali Studio is serving on http://%s\n", listener.Addr())
	served := cfg.PublicURL
	if served == "http://"+cfg.Addr {
		served = "http://" + listener.Addr().String() // the port :0 chose
	}
	if err := writeServingURL(cfg.DataDir, served); err != nil {
		logger.Warn("write the address login-link reads", "err", err)
	} else {
		defer removeServingURL(cfg.DataDir, served)
	}
	if localLogin {
		token, err := db.CreateLoginToken(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Sign in: %s%s?token=%s\n", cfg.PublicURL, paths.LoginLocal, token)
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(listener) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: running steps finish or reach a safe point", "timeout", cfg.ShutdownTimeout)
	runsStopped := make(chan error, 1)
	go func() { runsStopped <- stopRuns() }()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("shutdown", "err", err)
	}
	hub.Close()
	if err := hub.WaitIdle(shutdownCtx); err != nil {
		logger.Warn("shutdown: event streams still open", "err", err)
	}
	if metricsSrv != nil {
		_ = metricsSrv.Shutdown(shutdownCtx)
	}
	if err := <-runsStopped; err != nil {
		logger.Warn("shutdown: runs", "err", err)
	}
	logger.Info("stopped")
	return nil
}

// cleanSessions removes expired sessions every ten minutes.
func cleanSessions(ctx context.Context, db *store.DB, logger *slog.Logger) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := db.Sessions().DeleteExpired(ctx); err != nil && ctx.Err() == nil {
				logger.Warn("clean expired sessions", "err", err)
			}
		}
	}
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	if err := cfg.parseFlags("migrate", args, stderr); err != nil {
		return err
	}
	db, err := openDatabase(ctx, &cfg, newLogger(cfg.LogFormat, stderr))
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintln(stdout, "The database is up to date.")
	return nil
}

func runLoginLink(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	if err := cfg.parseFlags("login-link", args, stderr); err != nil {
		return err
	}
	url := cfg.DatabaseURL
	if url == "" {
		var err error
		if url, err = pgserver.RunningURL(cfg.DataDir); err != nil {
			return err
		}
	}
	db, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close()
	token, err := db.CreateLoginToken(ctx)
	if err != nil {
		return err
	}
	base := cfg.PublicURL
	if !cfg.addressGiven {
		// The Studio running with this data directory says where it is.
		if running, err := os.ReadFile(filepath.Join(cfg.DataDir, servingURLFile)); err == nil && strings.TrimSpace(string(running)) != "" {
			base = strings.TrimSpace(string(running))
		}
	}
	fmt.Fprintf(stdout, "Sign in: %s%s?token=%s\n", base, paths.LoginLocal, token)
	_ = os.Stdout.Sync()
	return nil
}

// servingURLFile, in the data directory, holds the public URL of the
// Studio serving with it, for login-link.
const servingURLFile = "studio.url"

// writeServingURL records url as the address of the Studio serving with
// dataDir.
func writeServingURL(dataDir, url string) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dataDir, servingURLFile), []byte(url+"\n"), 0o600)
}

// removeServingURL removes the record at shutdown, unless another Studio
// serving with the same data directory wrote its own since.
func removeServingURL(dataDir, url string) {
	path := filepath.Join(dataDir, servingURLFile)
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == url {
		_ = os.Remove(path)
	}
}

// splitList splits a comma-separated setting such as STUDIO_ADMINS into its
// non-empty, trimmed items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
