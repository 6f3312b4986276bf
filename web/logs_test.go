package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// TestRunStreamCarriesLogLinesManyPerFrame: a batch of log lines is one
// frame that carries them all, under their checkpoint's position, without
// fragments (nothing the server renders changes), the same live and read
// back; the run page and its download show them.
func TestRunStreamCarriesLogLinesManyPerFrame(t *testing.T) {
	ctx := context.Background()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO run_checkpoints (run_id, position, kind, name, status, started_at)
		VALUES ($1, 1, 'release', 'Release command web', 'running', now())`, runID); err != nil {
		t.Fatal(err)
	}
	live, _, err := s.DialStream(t, admin, runEventsPath(runID, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	at := time.Now()
	batch := make([]store.NewLogLine, 50)
	for i := range batch {
		batch[i] = store.NewLogLine{At: at, Text: fmt.Sprintf("Applying %04d_migration... OK <b>", i+1)}
	}
	if _, err := s.DB.AppendRunLog(ctx, runID, 1, "", batch); err != nil {
		t.Fatal(err)
	}
	_ = live.SetReadDeadline(time.Now().Add(time.Minute))
	_, got, err := live.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Log *struct {
			Position int   `json:"position"`
			First    int64 `json:"first"`
			Lines    []struct {
				N    int64  `json:"n"`
				Text string `json:"text"`
			} `json:"lines"`
		} `json:"log"`
		Fragments []json.RawMessage `json:"fragments"`
	}
	if err := json.Unmarshal(got, &f); err != nil {
		t.Fatal(err)
	}
	if f.Log == nil || f.Log.Position != 1 || f.Log.First != 1 || len(f.Log.Lines) != 50 || f.Log.Lines[49].N != 50 || f.Log.Lines[49].Text != "Applying 0050_migration... OK <b>" {
		t.Fatalf("frame = %.300s, want the 50 lines of checkpoint 1 in one frame", got)
	}
	if len(f.Fragments) != 0 {
		t.Errorf("a frame of log lines carries %d fragments, want none", len(f.Fragments))
	}
	resumed, _, err := s.DialStream(t, admin, runEventsPath(runID, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resumed.SetReadDeadline(time.Now().Add(time.Minute))
	_, want, err := resumed.ReadMessage()
	resumed.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the live frame\n%.300s\ndiffers from the frame read from the table\n%.300s", got, want)
	}

	page := fmt.Sprintf("/projects/hello-world/environments/production/runs/%d", runID)
	code, body := s.Get(t, admin, page)
	if code != 200 || !strings.Contains(body, `id="L50"`) || !strings.Contains(body, "Applying 0050_migration... OK &lt;b&gt;") || !strings.Contains(body, `href="#L50"`) {
		t.Errorf("the run page (%d) lacks line 50, escaped, with its link", code)
	}
	code, body = s.Get(t, admin, page+"?q=0042")
	if code != 200 || !strings.Contains(body, `id="L42">`) || !strings.Contains(body, `id="L41" hidden>`) || !strings.Contains(body, "1 of 50 lines match") {
		t.Errorf("the run page filtered by 0042 (%d) does not show line 42 alone, the other lines hidden", code)
	}
	code, body = s.Get(t, admin, page+"?q="+strings.Repeat("x", 201))
	if code != 400 && code != 422 {
		t.Errorf("a filter of 201 characters answers %d, want it refused", code)
	}
	code, body = s.Get(t, admin, page+"/log")
	if code != 200 || strings.Count(body, "\n") != 50 || !strings.Contains(body, "Release command web  Applying 0001_migration... OK <b>\n") {
		t.Errorf("the download (%d) = %.200q, want 50 lines with their checkpoint", code, body)
	}
}
