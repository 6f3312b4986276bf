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
	t.Parallel()
	ctx := context.Background()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO run_checkpoints (run_id, position, kind, name, status, started_at)
		VALUES ($1, 1, 'release', 'Release command web', 'running', now())`, runID); err != nil {
		t.Fatal(err)
	}
	live, _, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, 0), nil)
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
	resumed, _, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, 0), nil)
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

// TestRunLogDownloadShowsTerminalControlsVisibly stores log lines that a
// hostile build printed (a screen clear, a window title, a hyperlink, a C1
// CSI, a right-to-left override): the download, read on terminals with
// curl or cat, writes each as a visible escape (\x1b[2J, \u009b,
// \u202e), never as the bytes a terminal acts on, one line per log line.
func TestRunLogDownloadShowsTerminalControlsVisibly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO run_checkpoints (run_id, position, kind, name, status, started_at)
		VALUES ($1, 1, 'build', 'Build web', 'running', now())`, runID); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	if _, err := s.DB.AppendRunLog(ctx, runID, 1, "", []store.NewLogLine{
		{At: at, Text: "Step 1/3 \x1b[2J\x1b]0;owned\a done"},
		{At: at, Text: "see \x1b]8;;https://evil.test/\x1b\\here\x1b]8;;\x1b\\ and \u009b31m red \u202egnp.exe\u202c"},
		{At: at, Text: "tab\tstays"},
	}); err != nil {
		t.Fatal(err)
	}
	code, body := s.Get(t, admin, fmt.Sprintf("/projects/hello-world/environments/production/runs/%d/log", runID))
	if code != 200 || strings.Count(body, "\n") != 3 {
		t.Fatalf("the download answers %d with %d lines, want 200 with 3", code, strings.Count(body, "\n"))
	}
	for i, r := range body {
		if r < 0x20 && r != '\t' && r != '\n' || r >= 0x7f && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			t.Errorf("the download holds U+%04X at byte %d", r, i)
		}
	}
	for _, want := range []string{`Build web  Step 1/3 \x1b[2J\x1b]0;owned\x07 done` + "\n", `see \x1b]8;;https://evil.test/\x1b\here`, `and \u009b31m red \u202egnp.exe\u202c` + "\n", "tab\tstays\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("the download lacks %q\n%q", want, body)
		}
	}
}
