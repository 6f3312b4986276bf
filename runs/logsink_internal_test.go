package runs

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skali-dev/studio/runs/mask"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// sinkRun inserts a running deploy and returns its id.
func sinkRun(t *testing.T, db *store.DB) int64 {
	t.Helper()
	var runID int64
	err := db.Pool.QueryRow(context.Background(), `
		WITH p AS (INSERT INTO projects (name) VALUES ('wiki-' || (SELECT count(*) FROM projects)) RETURNING id),
		     e AS (INSERT INTO environments (project_id, name) SELECT id, 'production' FROM p RETURNING id)
		INSERT INTO runs (environment_id, kind, status) SELECT id, 'deploy', 'running' FROM e RETURNING id`).Scan(&runID)
	if err != nil {
		t.Fatal(err)
	}
	return runID
}

func testSink(db *store.DB, runID int64, values ...string) *LogSink {
	m := mask.New(values)
	return newLogSink(db, nil, runID, 1, "", func() *mask.Masker { return m })
}

// outage is a database that accepts connections and never answers, as a
// host cut off mid-way does.
func outage(t *testing.T) *store.DB {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	pool, err := pgxpool.New(context.Background(), "postgres://studio@"+ln.Addr().String()+"/studio?connect_timeout=600")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &store.DB{Pool: pool, Now: time.Now}
}

func TestLogSinkStopsTakingLinesOnceTheLogIsCut(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	runID := sinkRun(t, db)
	if _, err := db.Pool.Exec(context.Background(), `UPDATE runs SET log_cut = true WHERE id = $1`, runID); err != nil {
		t.Fatal(err)
	}
	s := testSink(db, runID)
	defer s.Close()
	s.Line("first line after the cut")
	s.flush()
	s.Line("second line after the cut")
	s.mu.Lock()
	n := len(s.pending)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d lines wait to be written after the store said the log is cut, want 0", n)
	}
}

func TestLogSinkBoundsWhatWaitsWhileTheDatabaseIsOut(t *testing.T) {
	// Parallel though it times Close: it waits logCloseWait (5 s), and the
	// bound is store.RetryWindow (45 s), what a sink that retried would take.
	t.Parallel()
	s := testSink(outage(t), 1, "a-secret-value")
	lines := make([]string, 2*logPendingLines)
	for i := range lines {
		lines[i] = "line"
	}
	s.Line(strings.Join(lines, "\n"))
	s.mu.Lock()
	n := len(s.pending)
	s.mu.Unlock()
	if n > logPendingLines {
		t.Errorf("%d lines wait to be written, want at most %d", n, logPendingLines)
	}
	start := time.Now()
	s.Close()
	// The run's other writes retry for store.RetryWindow: a step's lines must
	// not hold its end that long.
	if waited := time.Since(start); waited >= store.RetryWindow {
		t.Errorf("Close waited %s for a database that does not answer, want less than %s", waited.Round(time.Second), store.RetryWindow)
	}
}

func TestLogSinkCutsALongLineBeforeMaskingIt(t *testing.T) {
	t.Parallel()
	s := testSink(outage(t), 1, "a-secret-value")
	defer s.Close()
	s.Line(strings.Repeat("x", 1<<20))
	s.Line("key=" + strings.Repeat("a-secret-value", 20000) + "-and-more")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.pending {
		if len(l.Text) > logRawLineBytes+len("…") {
			t.Errorf("a line of %d bytes waits to be written, want at most %d", len(l.Text), logRawLineBytes)
		}
		if strings.Contains(l.Text, "a-secret") {
			t.Errorf("the cut line holds part of the value")
		}
	}
}
