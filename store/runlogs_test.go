package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/events/payload"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// newLogRun creates a project, an environment and a run, and returns the
// run's id.
func newLogRun(t *testing.T, db *store.DB) int64 {
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

func logLines(at time.Time, texts ...string) []store.NewLogLine {
	out := make([]store.NewLogLine, len(texts))
	for i, s := range texts {
		out[i] = store.NewLogLine{At: at.Add(time.Duration(i) * time.Millisecond), Text: s}
	}
	return out
}

// logEvents reads the run's events that carry log lines.
func logEvents(t *testing.T, db *store.DB, runID int64) []payload.LogLines {
	t.Helper()
	evs, err := db.RunEventsAfter(context.Background(), runID, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	var out []payload.LogLines
	for _, e := range evs {
		p, err := payload.DecodeRun(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if p.Log != nil {
			if e.Checkpoint != nil {
				t.Errorf("event %d: a log event names checkpoint %d; it is a run-level event carrying its position", e.Seq, *e.Checkpoint)
			}
			if p.Run.Status != "running" {
				t.Errorf("event %d: run status %q, want the run's own (running)", e.Seq, p.Run.Status)
			}
			out = append(out, *p.Log)
		}
	}
	return out
}

func TestRunLogLinesAreNumberedPerRunAndCarriedByTheirEvent(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := context.Background()
	runID := newLogRun(t, db)
	at := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	if _, err := db.AppendRunLog(ctx, runID, 4, "", logLines(at, "$ ./manage.py migrate", "Applying 0001_initial... OK")); err != nil {
		t.Fatal(err)
	}
	res, err := db.AppendRunLog(ctx, runID, 6, "", logLines(at.Add(time.Second), "1 of 3 replicas ready", "bad\x00byte\r and \xff"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Applied || res.Kept != 2 || res.First != 3 || res.Cut {
		t.Errorf("second append = %+v, want 2 lines kept from line 3, not cut", res)
	}
	all, err := db.RunLog(ctx, runID, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"$ ./manage.py migrate", "Applying 0001_initial... OK", "1 of 3 replicas ready", "badbyte and \uFFFD"}
	if len(all) != len(want) {
		t.Fatalf("read %d lines, want %d", len(all), len(want))
	}
	for i, l := range all {
		if l.N != int64(i+1) || l.Text != want[i] {
			t.Errorf("line %d = %d %q, want %d %q", i, l.N, l.Text, i+1, want[i])
		}
	}
	if !all[0].At.Equal(at) || all[2].Position != 6 {
		t.Errorf("line 1 at %s (want %s), line 3 under checkpoint %d (want 6)", all[0].At, at, all[2].Position)
	}
	rollout, err := db.RunLog(ctx, runID, 6)
	if err != nil {
		t.Fatal(err)
	}
	if len(rollout) != 2 || rollout[0].N != 3 {
		t.Errorf("checkpoint 6 has %d lines starting at %v, want 2 from line 3", len(rollout), rollout)
	}
	evs := logEvents(t, db, runID)
	if len(evs) != 2 {
		t.Fatalf("%d log events, want one per append (2)", len(evs))
	}
	if evs[1].Position != 6 || evs[1].First != 3 || len(evs[1].Lines) != 2 || evs[1].Lines[1].Text != want[3] || evs[1].Lines[1].N != 4 {
		t.Errorf("second event = %+v, want checkpoint 6, lines 3 and 4 as stored", evs[1])
	}
}

func TestRunLogIsCutAtItsBoundsWithOneLineSayingSo(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)

	t.Run("lines", func(t *testing.T) {
		runID := newLogRun(t, db)
		batch := make([]string, 1000)
		for i := range batch {
			batch[i] = "line"
		}
		for range 9 {
			if _, err := db.AppendRunLog(ctx, runID, 1, "", logLines(at, batch...)); err != nil {
				t.Fatal(err)
			}
		}
		res, err := db.AppendRunLog(ctx, runID, 2, "", logLines(at, append(batch, "one more", "and another")...))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Cut || res.Kept != 1000 {
			t.Errorf("the append that crosses 10,000 lines = %+v, want 999 lines and the cut line kept", res)
		}
		res, err = db.AppendRunLog(ctx, runID, 2, "", logLines(at, "after the cut"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Kept != 0 || !res.Cut {
			t.Errorf("an append after the cut = %+v, want nothing kept", res)
		}
		all, err := db.RunLog(ctx, runID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != store.RunLogLineLimit {
			t.Fatalf("%d lines kept, want %d", len(all), store.RunLogLineLimit)
		}
		if last := all[len(all)-1]; last.Text != store.RunLogCutLine || last.N != store.RunLogLineLimit {
			t.Errorf("last line = %d %q, want line %d saying the log was cut", last.N, last.Text, store.RunLogLineLimit)
		}
		evs := logEvents(t, db, runID)
		if len(evs) != 10 || !evs[9].Cut {
			t.Errorf("%d log events (last cut: %v), want 10, the last saying the log was cut", len(evs), len(evs) > 0 && evs[len(evs)-1].Cut)
		}
	})

	t.Run("bytes", func(t *testing.T) {
		runID := newLogRun(t, db)
		long := strings.Repeat("x", 10000) // shortened to 4 KiB each
		batch := make([]string, 300)
		for i := range batch {
			batch[i] = long
		}
		if _, err := db.AppendRunLog(ctx, runID, 3, "", logLines(at, batch...)); err != nil {
			t.Fatal(err)
		}
		all, err := db.RunLog(ctx, runID, 0)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, l := range all[:len(all)-1] {
			if len(l.Text) != store.RunLogLineBytes || !strings.HasSuffix(l.Text, "…") {
				t.Fatalf("line %d has %d bytes, want a long line shortened to %d ending in …", l.N, len(l.Text), store.RunLogLineBytes)
			}
			size += len(l.Text)
		}
		if size+len(store.RunLogCutLine) > store.RunLogByteLimit || len(all) != 255+1 {
			t.Errorf("%d lines of %d bytes kept, want 255 lines and the cut line within 1 MiB", len(all)-1, size)
		}
		if all[len(all)-1].Text != store.RunLogCutLine {
			t.Errorf("last line %q, want the cut line", all[len(all)-1].Text)
		}
	})
}

func TestRunLogAppendIsOneTransactionWithItsEvent(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := context.Background()
	runID := newLogRun(t, db)
	at := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)

	// An event that cannot be stored takes its lines with it.
	if _, err := db.Pool.Exec(ctx, `
		CREATE FUNCTION refuse_log_events() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.payload ? 'log' THEN RAISE EXCEPTION 'no log events today'; END IF;
			RETURN NEW;
		END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TRIGGER refuse_log_events BEFORE INSERT ON run_events FOR EACH ROW EXECUTE FUNCTION refuse_log_events()`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AppendRunLog(ctx, runID, 1, "", logLines(at, "lost with its event")); err == nil {
		t.Fatal("the append succeeded although its event was refused")
	}
	if _, err := db.Pool.Exec(ctx, `DROP TRIGGER refuse_log_events ON run_events`); err != nil {
		t.Fatal(err)
	}
	all, err := db.RunLog(ctx, runID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 0 {
		t.Errorf("%d lines stored by an append whose event failed, want none", len(all))
	}

	// A run held by another executor takes no line.
	if _, err := db.Pool.Exec(ctx, `UPDATE runs SET lease_owner = 'other', lease_expires_at = now() + interval '1 minute' WHERE id = $1`, runID); err != nil {
		t.Fatal(err)
	}
	res, err := db.AppendRunLog(ctx, runID, 1, "mine", logLines(at, "from a lost executor"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied {
		t.Error("an executor without the run's lease appended lines")
	}
	res, err = db.AppendRunLog(ctx, runID, 1, "other", logLines(at, "from the executor"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Applied || res.First != 1 {
		t.Errorf("the lease holder's append = %+v, want applied from line 1 (numbers have no gaps)", res)
	}
	if evs := logEvents(t, db, runID); len(evs) != 1 || fmt.Sprint(evs[0].Lines[0].Text) != "from the executor" {
		t.Errorf("log events = %+v, want the lease holder's one", evs)
	}
}

// BenchmarkAppendRunLog appends batches of 100 lines of 80 bytes with
// their event (the log sink's full batch).
func BenchmarkAppendRunLog(b *testing.B) {
	db := storetest.NewDB(b)
	ctx := context.Background()
	var runID int64
	if err := db.Pool.QueryRow(ctx, `
		WITH p AS (INSERT INTO projects (name) VALUES ('bench') RETURNING id),
		     e AS (INSERT INTO environments (project_id, name) SELECT id, 'production' FROM p RETURNING id)
		INSERT INTO runs (environment_id, kind, status) SELECT id, 'deploy', 'running' FROM e RETURNING id`).Scan(&runID); err != nil {
		b.Fatal(err)
	}
	batch := make([]store.NewLogLine, 100)
	for i := range batch {
		batch[i] = store.NewLogLine{At: time.Now(), Text: strings.Repeat("x", 80)}
	}
	for b.Loop() {
		if _, err := db.AppendRunLog(ctx, runID, 1, "", batch); err != nil {
			b.Fatal(err)
		}
	}
}
