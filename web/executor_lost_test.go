package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestARunWhoseExecutorIsLostSaysSoLiveAndOnEveryPage: a run whose
// executor stopped renewing its lease is marked lost; a watcher of the run
// page gets the new heading at once, and the run page, the runs list and
// the environment page all say "executor lost · resuming" while the run's
// machine status stays running.
func TestARunWhoseExecutorIsLostSaysSoLiveAndOnEveryPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	if ok, _, err := s.DB.ClaimRunLease(ctx, runID, "gone:1:x", time.Millisecond); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if ok, err := s.DB.ApplyRunChange(ctx, store.RunChange{RunID: runID, Status: store.RunRunning, Lease: "gone:1:x"}); err != nil || !ok {
		t.Fatalf("start: %v %v", ok, err)
	}
	run, err := s.DB.RunByID(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	runPath := fmt.Sprintf("/projects/hello-world/environments/production/runs/%d", runID)
	if _, body := s.Get(t, admin, runPath); strings.Contains(body, "executor lost") {
		t.Fatal("a run with a live lease shows its executor lost")
	}
	conn, _, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, run.LastSeq), nil)
	if err != nil {
		t.Fatal(err)
	}
	takeOverOnceItsLeaseExpires(t, s, runID)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, data, err := conn.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Run struct {
			Status       string `json:"status"`
			ExecutorLost bool   `json:"executorLost"`
		} `json:"run"`
		Fragments []struct{ ID, HTML string } `json:"fragments"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if f.Run.Status != store.RunRunning || !f.Run.ExecutorLost {
		t.Fatalf("frame run %+v, want running with its executor lost", f.Run)
	}
	var header string
	for _, fr := range f.Fragments {
		if fr.ID == "run-header" {
			header = fr.HTML
		}
	}
	if !strings.Contains(header, "executor lost · resuming") || !strings.Contains(header, `data-run-status="running"`) {
		t.Fatalf("the live heading does not say the executor is lost: %s", header)
	}
	for _, path := range []string{runPath, "/projects/hello-world/environments/production/runs", "/projects/hello-world/environments/production"} {
		code, body := s.Get(t, admin, path)
		if code != 200 || !strings.Contains(body, "executor lost · resuming") {
			t.Errorf("%s (%d) does not say the run's executor is lost", path, code)
		}
	}
}

// TestBrowserRunPageShowsItsExecutorLostWithoutAReload opens a running
// run's page in a browser; its executor's lease then expires and the run
// is marked lost: the heading says so live, with the machine status still
// running, and the page offers Cancel.
func TestBrowserRunPageShowsItsExecutorLostWithoutAReload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	if ok, _, err := s.DB.ClaimRunLease(ctx, runID, "gone:1:x", 300*time.Millisecond); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if ok, err := s.DB.ApplyRunChange(ctx, store.RunChange{RunID: runID, Status: store.RunRunning, Lease: "gone:1:x"}); err != nil || !ok {
		t.Fatalf("start: %v %v", ok, err)
	}
	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(fmt.Sprintf("%s/projects/hello-world/environments/production/runs/%d", s.URL, runID)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status[data-run-status="running"]`)),
		chromedp.WaitReady(chromedp.CSS(`[data-stream][data-stream-status="live"]`)))
	if strings.Contains(b.Text("main"), "executor lost") {
		t.Fatal("the page says the executor is lost while its lease holds")
	}
	takeOverOnceItsLeaseExpires(t, s, runID)
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#run-status[data-executor-lost][data-run-status="running"]`)))
	page := b.Text("main")
	for _, want := range []string{"executor lost · resuming", "resumes it from its last recorded checkpoint", "Cancel run"} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %q", want)
		}
	}
	b.Screenshot("run-executor-lost")
}

// takeOverOnceItsLeaseExpires waits, up to ten seconds, until the run's
// lease has expired in the database's clock and the run is taken over as
// lost (as the Studio's sweep does), and fails if any other run is.
func takeOverOnceItsLeaseExpires(t *testing.T, s *webtest.Server, runID int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids, err := s.DB.TakeOverLostRuns(context.Background(), nil)
		if err != nil || len(ids) > 1 || (len(ids) == 1 && ids[0] != runID) {
			t.Fatalf("take over: %v %v, want run %d", ids, err, runID)
		}
		if len(ids) == 1 {
			return
		}
		if time.Now().After(deadline) {
			var expires string
			_ = s.DB.Pool.QueryRow(context.Background(), `SELECT coalesce(lease_expires_at::text, 'none') || ' (now ' || clock_timestamp()::text || ')' FROM runs WHERE id = $1`, runID).Scan(&expires)
			t.Fatalf("run %d was not taken over within 10s; its lease expires at %s", runID, expires)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
