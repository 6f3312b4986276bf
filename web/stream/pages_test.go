package stream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// TestRunStreamSendsThePageFragmentsOfACheckpointChange follows a run with
// the renderer production uses (the run page's own components, built in
// views): a certificate checkpoint deferred because its domain does not
// point here yet arrives as that checkpoint's row, which says so, with the
// run's heading. The row reads the typed detail, whatever the warning
// says; a checkpoint recorded before the typed detail existed (its
// warning only) reads the same.
func TestRunStreamSendsThePageFragmentsOfACheckpointChange(t *testing.T) {
	ctx := context.Background()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO run_checkpoints (run_id, position, kind, name) VALUES
		($1, 1, 'issue-tls', 'Issue TLS certificate · web / public'), ($1, 2, 'issue-tls', 'Issue TLS certificate · web / admin')`, runID); err != nil {
		t.Fatal(err)
	}
	run, err := s.DB.RunByID(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	conn, _, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, run.LastSeq), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	typed := runs.CheckpointDetail{TLS: &runs.TLSDetail{Route: "web / public", Domain: "shop.example.test", Policy: "automatic", Deferred: true}}
	if ok, err := s.DB.ApplyRunChange(ctx, store.RunChange{RunID: runID, Status: store.RunRunning,
		Checkpoint: &store.CheckpointChange{Position: 1, Status: store.CheckpointSkipped, Warning: "shop.example.test waits for its DNS", Detail: typed}}); err != nil || !ok {
		t.Fatalf("change: %v %v", ok, err)
	}
	legacy := runs.CheckpointDetail{TLS: &runs.TLSDetail{Route: "web / admin", Domain: "admin.example.test", Policy: "automatic"}}
	if ok, err := s.DB.ApplyRunChange(ctx, store.RunChange{RunID: runID,
		Checkpoint: &store.CheckpointChange{Position: 2, Status: store.CheckpointSkipped, Warning: "TLS deferred: admin.example.test is not pointing here yet", Detail: legacy}}); err != nil || !ok {
		t.Fatalf("change: %v %v", ok, err)
	}
	for position, domain := range []string{1: "shop.example.test", 2: "admin.example.test"} {
		if position == 0 {
			continue
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Seq        int64                   `json:"seq"`
			Run        struct{ Status string } `json:"run"`
			Checkpoint struct {
				Position int    `json:"position"`
				Kind     string `json:"kind"`
				Status   string `json:"status"`
			} `json:"checkpoint"`
			Fragments []struct{ ID, HTML string } `json:"fragments"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		if f.Run.Status != store.RunRunning || f.Checkpoint.Position != position || f.Checkpoint.Kind != runs.KindIssueTLS || f.Checkpoint.Status != store.CheckpointSkipped {
			t.Fatalf("frame %d: run %+v checkpoint %+v, want running with checkpoint %d skipped", f.Seq, f.Run, f.Checkpoint, position)
		}
		frags := map[string]string{}
		for _, fr := range f.Fragments {
			frags[fr.ID] = fr.HTML
		}
		row := frags[fmt.Sprintf("checkpoint-%d", position)]
		if !strings.Contains(row, "cert deferred · domain not pointing here yet") || !strings.Contains(row, domain) {
			t.Errorf("checkpoint %d's live row does not say its certificate is deferred:\n%s", position, row)
		}
		if !strings.Contains(frags["run-header"], `data-run-status="running"`) {
			t.Errorf("frame %d lacks the run's live heading: %v", f.Seq, frags["run-header"])
		}
	}
	// The page, rendered by the same models, says the same of both.
	code, body := s.Get(t, admin, fmt.Sprintf("/projects/hello-world/environments/production/runs/%d", runID))
	if code != 200 || strings.Count(body, "cert deferred · domain not pointing here yet") < 2 {
		t.Errorf("the run page (%d) does not say both certificates are deferred", code)
	}
}

// TestRunStreamLiveFramesAreTheFramesOfARead follows a run the way
// production delivers its events (each change's notification carries the
// event and the state the page renders from, and the hub reads nothing):
// every live frame is, byte for byte, the frame a watcher resuming from
// the table gets for the same event, fragments included.
func TestRunStreamLiveFramesAreTheFramesOfARead(t *testing.T) {
	ctx := context.Background()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO run_checkpoints (run_id, position, kind, name) VALUES
		($1, 1, 'deploy-service', 'Deploy web'), ($1, 2, 'issue-tls', 'Issue TLS certificate · web / public')`, runID); err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	s.Hub.ObserveReads(func(events.StreamKind, time.Duration) { reads.Add(1) })
	live, _, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	// The changes start once the hub follows the run (its LISTEN
	// connection holds the run's followed mark) and has read the run once
	// since it listens: a change committed before that is announced
	// without its event, or to nobody, and is read from the table, as it
	// must be; those races are not what this test is about.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var followed bool
		if err := s.DB.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid = $1 AND objid = $2 AND objsubid = 2 AND granted)`,
			store.RunFollowedLockClass, store.RunFollowedLockKey(runID)).Scan(&followed); err != nil {
			t.Fatal(err)
		}
		if followed && reads.Load() >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the hub does not follow run %d (followed %v, %d reads)", runID, followed, reads.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	tls := runs.CheckpointDetail{TLS: &runs.TLSDetail{Route: "web / public", Domain: "shop.example.test", Policy: "automatic", Deferred: true}}
	changes := []store.RunChange{
		{RunID: runID, Checkpoint: &store.CheckpointChange{Position: 1, Status: store.CheckpointRunning}},
		{RunID: runID, Checkpoint: &store.CheckpointChange{Position: 1, Status: store.CheckpointSucceeded}},
		{RunID: runID, Detail: map[string]any{"summary": "1 of 2 done"}, Checkpoint: &store.CheckpointChange{Position: 2, Status: store.CheckpointSkipped, Warning: "shop.example.test waits for its DNS", Detail: tls}},
		{RunID: runID, Checkpoint: &store.CheckpointChange{Position: 2, Status: store.CheckpointFailed, Warning: "no certificate"}},
		{RunID: runID, Status: store.RunFailed, Reason: "the certificate failed"},
	}
	read := func(c *websocket.Conn) []byte {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, data, err := c.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	for i, c := range changes {
		if ok, err := s.DB.ApplyRunChange(ctx, c); err != nil || !ok {
			t.Fatalf("change %d: applied %v, %v", i, ok, err)
		}
		got := read(live)
		resumed, _, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, int64(i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := read(resumed)
		resumed.Close()
		if !bytes.Equal(got, want) {
			t.Errorf("event %d: the live frame\n%s\ndiffers from the frame read from the table\n%s", i+1, got, want)
		}
		if !bytes.Contains(got, []byte(`"fragments"`)) {
			t.Errorf("event %d: the live frame has no fragments: %s", i+1, got)
		}
	}
	// The stream's first read (when the hub starts listening) and at most
	// one more that a change's notification may have met under way (that
	// first read's loop ending); every other change came with its
	// notification alone.
	if n := reads.Load(); n > 2 {
		t.Errorf("the hub read the table %d times for %d changes in a row; their notifications carry them", n, len(changes))
	}
}
