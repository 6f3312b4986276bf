package events_test

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// noticeSetup is a hub following one run of two checkpoints, quiet (no
// read due), with its reads after notifications counted.
type noticeSetup struct {
	db    *store.DB
	h     *events.Hub
	runID int64
	sub   *events.Subscription
	reads *atomic.Int64
	ctx   context.Context
}

func newNoticeSetup(t *testing.T) *noticeSetup {
	t.Helper()
	db := storetest.NewDB(t)
	_, runID := newRun(t, db)
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO run_checkpoints (run_id, position, kind, name) VALUES
		($1, 1, 'deploy-service', 'Deploy web'), ($1, 2, 'issue-tls', 'Issue TLS certificate · web / public')`, runID); err != nil {
		t.Fatal(err)
	}
	h := newHub(t, db, events.HubOptions{})
	reads := &atomic.Int64{}
	h.ObserveReads(func(events.StreamKind, time.Duration) { reads.Add(1) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	sub, err := h.Subscribe(ctx, events.RunStream(runID), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	// Past its (empty) backlog: from now on it gets only what the hub
	// hands out.
	if evs, err := sub.Poll(ctx); err != nil || len(evs) != 0 {
		t.Fatalf("backlog of a new run: %d events, %v", len(evs), err)
	}
	waitFor(t, "the hub to follow the run", h.QuietForTest)
	return &noticeSetup{db: db, h: h, runID: runID, sub: sub, reads: reads, ctx: ctx}
}

// next returns the subscription's next events up to seq upTo.
func (n *noticeSetup) next(t *testing.T, upTo int64) []*events.Event {
	t.Helper()
	var out []*events.Event
	for len(out) == 0 || out[len(out)-1].Seq < upTo {
		evs, err := n.sub.Next(n.ctx)
		if err != nil {
			t.Fatalf("waiting for event %d: %v (%s)", upTo, err, n.h.DebugState())
		}
		out = append(out, evs...)
	}
	for i, e := range out {
		if want := upTo - int64(len(out)-1-i); e.Seq != want {
			t.Fatalf("got events %d..%d with %d at %d; want them in order, once each", out[0].Seq, upTo, e.Seq, i)
		}
	}
	return out
}

// TestHubHandsOutNotifiedEventsWithoutARead is the delivery production
// uses: the run's changes, appended by the store's own statement, reach the
// subscriber from their notifications alone, each with the run and
// checkpoint as the change left them — what a read of the table gives for
// the same event.
func TestHubHandsOutNotifiedEventsWithoutARead(t *testing.T) {
	n := newNoticeSetup(t)
	ctx := n.ctx
	changes := []store.RunChange{
		{RunID: n.runID, Status: store.RunRunning},
		{RunID: n.runID, Checkpoint: &store.CheckpointChange{Position: 1, Status: store.CheckpointRunning}},
		{RunID: n.runID, Checkpoint: &store.CheckpointChange{Position: 1, Status: store.CheckpointSucceeded, Detail: map[string]any{"service": "web"}}},
		{RunID: n.runID, Detail: map[string]any{"summary": "1 of 2 done"}, Checkpoint: &store.CheckpointChange{Position: 2, Status: store.CheckpointWaiting, Warning: "shop.example.test waits for its DNS"}},
	}
	reads := n.reads.Load()
	for i, c := range changes {
		if ok, err := n.db.ApplyRunChange(ctx, c); err != nil || !ok {
			t.Fatalf("change %d: applied %v, %v", i, ok, err)
		}
		seq := int64(i + 1)
		got := n.next(t, seq)
		if len(got) != 1 {
			t.Fatalf("change %d: got %d events, want 1", i, len(got))
		}
		live := got[0]
		stored, run, _, err := n.db.RunEventsWithState(ctx, n.runID, seq-1, 1)
		if err != nil || len(stored) != 1 {
			t.Fatalf("read event %d: %v", seq, err)
		}
		want := stored[0]
		if !bytes.Equal(live.Payload, want.Payload) || !live.At.Equal(want.At) || !sameInt(live.Checkpoint, want.Checkpoint) {
			t.Errorf("event %d: live %s at %v checkpoint %v; stored %s at %v checkpoint %v", seq, live.Payload, live.At, live.Checkpoint, want.Payload, want.At, want.Checkpoint)
		}
		if live.Run == nil || live.Environment == nil {
			t.Fatalf("event %d came without the run's state", seq)
		}
		if r := live.Run; r.Status != run.Status || r.Reason != run.Reason || !bytes.Equal(r.Detail, run.Detail) ||
			!sameTime(r.StartedAt, run.StartedAt) || !sameTime(r.FinishedAt, run.FinishedAt) || r.Kind != run.Kind || !r.CreatedAt.Equal(run.CreatedAt) {
			t.Errorf("event %d: the live run is %+v; the table holds %+v", seq, *r, *run)
		}
		if (live.CheckpointNow == nil) != (want.CheckpointNow == nil) {
			t.Fatalf("event %d: live checkpoint %+v, stored %+v", seq, live.CheckpointNow, want.CheckpointNow)
		}
		if c, w := live.CheckpointNow, want.CheckpointNow; c != nil {
			if c.Position != w.Position || c.Kind != w.Kind || c.Name != w.Name || c.Status != w.Status || c.Warning != w.Warning ||
				!bytes.Equal(c.Detail, w.Detail) || !sameTime(c.StartedAt, w.StartedAt) || !sameTime(c.FinishedAt, w.FinishedAt) {
				t.Errorf("event %d: the live checkpoint is %+v; the table holds %+v", seq, *c, *w)
			}
		}
	}
	if r := n.reads.Load() - reads; r != 0 {
		t.Errorf("the hub read the table %d times for %d events that their notifications carried; want 0", r, len(changes))
	}
}

// TestHubReadsWhenASequenceNumberIsSkipped: an event whose notification
// never arrived (here: stored without one) is read from the table when the
// next notification shows the gap, and both go out in order.
func TestHubReadsWhenASequenceNumberIsSkipped(t *testing.T) {
	n := newNoticeSetup(t)
	ctx := n.ctx
	reads := n.reads.Load()
	if _, err := n.db.Pool.Exec(ctx, `
		WITH s AS (UPDATE runs SET last_seq = last_seq + 1 WHERE id = $1 RETURNING id, last_seq)
		INSERT INTO run_events (run_id, seq, payload) SELECT id, last_seq, '{"run": {"status": "silent"}}' FROM s`, n.runID); err != nil {
		t.Fatal(err)
	}
	pos := 1
	if _, err := n.db.AppendRunEvent(ctx, n.runID, &pos, map[string]any{"run": map[string]any{"status": "heard"}}); err != nil {
		t.Fatal(err)
	}
	got := n.next(t, 2)
	if len(got) != 2 || !strings.Contains(string(got[0].Payload), "silent") || !strings.Contains(string(got[1].Payload), "heard") {
		t.Fatalf("got %d events; want the silent one, then the one heard", len(got))
	}
	if got[1].CheckpointNow == nil || got[1].CheckpointNow.Name != "Deploy web" {
		t.Errorf("the event read after the gap lacks its checkpoint: %+v", got[1].CheckpointNow)
	}
	if n.reads.Load() == reads {
		t.Error("the hub did not read the table after a gap in the sequence numbers")
	}
	// Back in step: the next event comes from its notification again.
	reads = n.reads.Load()
	appendEvents(t, n.db, n.runID, 1)
	n.next(t, 3)
	if r := n.reads.Load() - reads; r != 0 {
		t.Errorf("after the gap, the hub read the table %d times for an event its notification carried", r)
	}
}

// TestHubReadsAnEventTooLargeForItsNotification: an event whose encoding
// would not fit in a notification is announced by number only and read
// from the table, whole.
func TestHubReadsAnEventTooLargeForItsNotification(t *testing.T) {
	n := newNoticeSetup(t)
	ctx := n.ctx
	reads := n.reads.Load()
	long := strings.Repeat("a line of a long summary ", store.RunNoticeLimit/20)
	if _, err := n.db.AppendRunEvent(ctx, n.runID, nil, map[string]any{"run": map[string]any{"status": "running", "summary": long}}); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, n.db, n.runID, 1)
	got := n.next(t, 2)
	if !strings.Contains(string(got[0].Payload), long) {
		t.Errorf("the large event arrived without its summary (%d bytes)", len(got[0].Payload))
	}
	if got[0].Run == nil {
		t.Error("the large event arrived without the run's state")
	}
	if n.reads.Load() == reads {
		t.Error("the hub did not read the table for an event too large for its notification")
	}
}

func sameInt(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func sameTime(a, b *time.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(*b)) }
