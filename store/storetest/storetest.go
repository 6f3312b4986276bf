// Package storetest gives tests a real PostgreSQL: the private server of the
// embedded default, started once per test package (or the server named by
// DATABASE_URL), and a fresh, migrated database for every test.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/pgserver"
)

var (
	once     sync.Once
	setupErr error
	server   *pgserver.Server
	dataDir  string
	admin    *pgxpool.Pool
	baseURL  *url.URL
	template string
	// copyClause makes each test database a copy of the template's files
	// (PostgreSQL 15 and later) instead of writing its every page to the
	// WAL, 15's default: measured here, 98 instead of 146 ms and 30
	// instead of 75 ms of the server's CPU per database (created and
	// dropped). The checkpoints a file copy needs cost little in a server
	// that does not fsync; no one else connects to the template.
	copyClause string
	createMu   sync.Mutex
)

// DefaultParallel makes n of the package's parallel tests run at once
// unless the command line says how many (-parallel). Go's default is
// GOMAXPROCS, 2 on a two-core machine; a package whose tests mostly wait
// (for a Studio process, a page, a River poll, a cluster) fits more. Call
// it from TestMain before Main; it parses the command line.
func DefaultParallel(n int) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// Main runs a test package's tests and then stops the private server, so no
// postgres process outlives the test binary. Call it from TestMain; after
// runs before the server stops (a package's shared browser, say).
func Main(m *testing.M, after ...func()) {
	code := m.Run()
	for _, f := range after {
		f()
	}
	shutdown()
	os.Exit(code)
}

func shutdown() {
	if admin != nil {
		if template != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{template}.Sanitize()+" WITH (FORCE)")
			cancel()
		}
		admin.Close()
	}
	if server != nil {
		server.Stop()
	}
	if dataDir != "" {
		os.RemoveAll(dataDir)
	}
}

func setup() error {
	ctx := context.Background()
	raw := os.Getenv("DATABASE_URL")
	if raw == "" {
		dir, err := os.MkdirTemp("", "studio-test-pg-")
		if err != nil {
			return err
		}
		dataDir = dir
		server, err = pgserver.Start(ctx, pgserver.Options{
			Dir:       dir,
			Ephemeral: true,
			Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			return err
		}
		raw = server.URL()
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("storetest: DATABASE_URL is malformed")
	}
	baseURL = u
	admin, err = pgxpool.New(ctx, raw)
	if err != nil {
		return err
	}
	var version int
	if err := admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return fmt.Errorf("storetest: server version: %w", err)
	}
	if version >= 150000 {
		copyClause = " STRATEGY FILE_COPY"
	}
	template = "studio_tpl_" + randomSuffix()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{template}.Sanitize()); err != nil {
		return fmt.Errorf("storetest: create template database: %w", err)
	}
	db, err := store.Open(ctx, databaseURL(template))
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		return err
	}
	return nil
}

func databaseURL(name string) string {
	u := *baseURL
	u.Path = "/" + name
	return u.String()
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewURL creates a fresh, migrated database for this test and returns its
// connection string; the database is dropped when the test ends.
func NewURL(tb testing.TB) string {
	tb.Helper()
	once.Do(func() { setupErr = setup() })
	if setupErr != nil {
		tb.Fatalf("storetest: start PostgreSQL: %v", setupErr)
	}
	name := "studio_t_" + randomSuffix()
	ctx := context.Background()
	createMu.Lock()
	_, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize()+copyClause)
	createMu.Unlock()
	if err != nil {
		tb.Fatalf("storetest: create database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return databaseURL(name)
}

// NewDB returns an open store on a fresh, migrated database of its own,
// closed and dropped when the test ends.
func NewDB(tb testing.TB) *store.DB {
	tb.Helper()
	url := NewURL(tb)
	db, err := store.Open(context.Background(), url)
	if err != nil {
		tb.Fatalf("storetest: open database: %v", err)
	}
	tb.Cleanup(db.Close)
	return db
}

// Server returns the private server of this test package, or nil when the
// tests use DATABASE_URL. Tests that stop and restart the database use it.
func Server() *pgserver.Server {
	return server
}

// Exec runs sql on the server's administrative connection (not a test
// database), for tests that change what a database allows, such as
// ALTER DATABASE ... WITH ALLOW_CONNECTIONS.
func Exec(tb testing.TB, sql string) {
	tb.Helper()
	once.Do(func() { setupErr = setup() })
	if setupErr != nil {
		tb.Fatalf("storetest: start PostgreSQL: %v", setupErr)
	}
	if _, err := admin.Exec(context.Background(), sql); err != nil {
		tb.Fatalf("storetest: %v", err)
	}
}
