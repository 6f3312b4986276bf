package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/store"
)

// frame is what a stream sends for each event (the fields read here).
type frame struct {
	Seq  int64  `json:"seq"`
	Type string `json:"type"`
	Run  *struct {
		Status string `json:"status"`
	} `json:"run"`
	Fragments []struct {
		ID   string `json:"id"`
		HTML string `json:"html"`
	} `json:"fragments"`
}

// TestTwoProcessesStreamEachOthersRuns starts two Studio processes on one
// database, deploys through the first and watches through both: the run's
// stream and the environment's. Mid-run both processes lose their LISTEN
// connection (pg_terminate_backend) and one watcher's connection is cut and
// resumed with after=: every watcher still sees every event exactly once,
// in order, each with the page fragments, up to the run's end.
func TestTwoProcessesStreamEachOthersRuns(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Studio processes")
	}
	ctx := context.Background()
	db, dbURL, key := newKilledEnvironment(t)

	a, b := startStudio(t, dbURL, key), startStudio(t, dbURL, key)
	signIn := func(s *studioProcess) (*http.Client, string) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(s.addr + s.link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		u, _ := url.Parse(s.addr)
		var cookie string
		for _, ck := range jar.Cookies(u) {
			cookie = ck.Name + "=" + ck.Value
		}
		if cookie == "" {
			t.Fatalf("signing in on %s set no cookie (%d)", s.addr, resp.StatusCode)
		}
		return c, cookie
	}
	clientA, cookieA := signIn(a)
	_, cookieB := signIn(b)
	const envPath = "/projects/killed/environments/production"
	// tryDial may run in any goroutine; dial is for the test's own.
	tryDial := func(s *studioProcess, cookie, path string, after int64) (*websocket.Conn, error) {
		u := fmt.Sprintf("ws%s%s?after=%d", strings.TrimPrefix(s.addr, "http"), path, after)
		c, resp, err := websocket.DefaultDialer.Dial(u, http.Header{"Cookie": {cookie}, "Origin": {s.addr}})
		if err != nil {
			return nil, fmt.Errorf("dial %s: %v (%v)", u, err, resp)
		}
		t.Cleanup(func() { c.Close() })
		return c, nil
	}
	dial := func(s *studioProcess, cookie, path string, after int64) *websocket.Conn {
		t.Helper()
		c, err := tryDial(s, cookie, path, after)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	envStream := dial(b, cookieB, envPath+"/events", 0)

	runID := deployRevision1(t, clientA, a.addr, db)
	runPath := fmt.Sprintf("%s/runs/%d/events", envPath, runID)
	onA, onB, cut := dial(a, cookieA, runPath, 0), dial(b, cookieB, runPath, 0), dial(b, cookieB, runPath, 0)

	// read follows conn until the run has finished, resuming from its last
	// sequence number on a fresh connection when reconnect says so.
	type result struct {
		seqs      []int64
		fragments int
		err       error
	}
	var cutRead atomic.Int64 // what the watcher to be cut has read
	follow := func(conn *websocket.Conn, reconnect func(after int64) (*websocket.Conn, error)) <-chan result {
		out := make(chan result, 1)
		go func() {
			var r result
			defer func() { out <- r }()
			var last int64
			for {
				_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
				_, data, err := conn.ReadMessage()
				if err != nil {
					if reconnect == nil {
						r.err = err
						return
					}
					if conn, r.err = reconnect(last); r.err != nil {
						return
					}
					reconnect = nil
					continue
				}
				var f frame
				if err := json.Unmarshal(data, &f); err != nil {
					r.err = fmt.Errorf("frame %.200s: %v", data, err)
					return
				}
				r.seqs = append(r.seqs, f.Seq)
				last = f.Seq
				if reconnect != nil {
					cutRead.Store(last)
				}
				for _, fr := range f.Fragments {
					if strings.HasPrefix(fr.ID, "checkpoint-") && strings.Contains(fr.HTML, `id="`+fr.ID+`"`) {
						r.fragments++
					}
				}
				if f.Run != nil && store.RunFinished(f.Run.Status) && f.Type == "" {
					return
				}
			}
		}()
		return out
	}
	resA, resB := follow(onA, nil), follow(onB, nil)
	resumed := make(chan int64, 1)
	resCut := follow(cut, func(after int64) (*websocket.Conn, error) {
		resumed <- after
		return tryDial(b, cookieB, runPath, after)
	})

	// Mid-run: both processes lose their LISTEN connection, and one
	// watcher's connection is cut.
	waitFor(t, func() bool {
		var status string
		db.Pool.QueryRow(ctx, `SELECT status FROM run_checkpoints WHERE run_id = $1 AND position = 2`, runID).Scan(&status)
		return status == store.CheckpointRunning
	})
	var killed int
	if err := db.Pool.QueryRow(ctx, `
		SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'skali-studio-events' AND datname = current_database()`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 2 {
		t.Errorf("terminated %d LISTEN connections, want one per process (2)", killed)
	}
	waitFor(t, func() bool { return cutRead.Load() > 0 })
	cut.Close()

	var lastSeq int64
	waitFor(t, func() bool {
		var finished bool
		db.Pool.QueryRow(ctx, `SELECT finished_at IS NOT NULL, last_seq FROM runs WHERE id = $1`, runID).Scan(&finished, &lastSeq)
		return finished
	})
	for name, ch := range map[string]<-chan result{"watcher on the deploying process": resA, "watcher on the other process": resB, "watcher cut and resumed": resCut} {
		var r result
		select {
		case r = <-ch:
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s: the run's end never arrived", name)
		}
		if r.err != nil {
			t.Errorf("%s: %v", name, r.err)
			continue
		}
		if int64(len(r.seqs)) != lastSeq {
			t.Errorf("%s got %d frames, want %d (seq %v)", name, len(r.seqs), lastSeq, r.seqs)
		}
		for i, s := range r.seqs {
			if s != int64(i+1) {
				t.Errorf("%s: frame %d has seq %d, want %d: every event once, in order (%v)", name, i+1, s, i+1, r.seqs)
				break
			}
		}
		if r.fragments == 0 {
			t.Errorf("%s: no frame carried a checkpoint row to swap in", name)
		}
	}
	select {
	case after := <-resumed:
		if after <= 0 {
			t.Errorf("the cut watcher resumed after %d, want after the events it had", after)
		}
	default:
		t.Error("the cut watcher never had to resume")
	}

	// The environment's stream, on the process that did not run the
	// deploy, told of its start and its end.
	var types []string
	for len(types) < 2 {
		_ = envStream.SetReadDeadline(time.Now().Add(time.Minute))
		_, data, err := envStream.ReadMessage()
		if err != nil {
			t.Fatalf("environment stream: %v (after %v)", err, types)
		}
		var f frame
		_ = json.Unmarshal(data, &f)
		if f.Type == "run.started" || f.Type == "run.finished" {
			types = append(types, f.Type)
		}
	}
	if types[0] != "run.started" || types[1] != "run.finished" {
		t.Errorf("environment stream said %v, want run.started then run.finished", types)
	}
}
