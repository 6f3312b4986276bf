package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestServeStreamsRunEventsAndClosesThemOnShutdown runs `studio serve` on a
// database, watches a run over its websocket, reads /metrics from
// --metrics-addr, and stops the server: the stream is closed with "going
// away" and serve returns.
func TestServeStreamsRunEventsAndClosesThemOnShutdown(t *testing.T) {
	t.Parallel()
	url := storetest.NewURL(t)
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var runID int64
	err = db.Pool.QueryRow(context.Background(), `
		WITH p AS (INSERT INTO projects (name) VALUES ('wiki') RETURNING id),
		     e AS (INSERT INTO environments (project_id, name) SELECT id, 'production' FROM p RETURNING id)
		INSERT INTO runs (environment_id, kind) SELECT id, 'deploy' FROM e RETURNING id`).Scan(&runID)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--addr", "127.0.0.1:0", "--database-url", url, "--data-dir", t.TempDir(),
			"--metrics-addr", metricsAddr}, outW, io.Discard)
		outW.Close()
	}()
	lines := bufio.NewScanner(out)
	var addr, link string
	for (addr == "" || link == "") && lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "Skali Studio is serving on "); ok {
			addr = rest
		}
		if rest, ok := strings.CutPrefix(lines.Text(), "Sign in: "); ok {
			link = rest
		}
	}
	go io.Copy(io.Discard, out)
	if addr == "" || link == "" {
		cancel()
		t.Fatalf("serve printed no address or sign-in link: %v", <-done)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(addr + link[strings.Index(link, "/login/"):])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie string
	for _, c := range resp.Cookies() {
		cookie = c.Name + "=" + c.Value
	}
	if cookie == "" {
		t.Fatalf("sign-in answered %d without a cookie", resp.StatusCode)
	}

	ws, resp, err := websocket.DefaultDialer.Dial(fmt.Sprintf("ws%s/projects/wiki/environments/production/runs/%d/events?after=0",
		strings.TrimPrefix(addr, "http"), runID), http.Header{"Cookie": {cookie}, "Origin": {addr}})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer ws.Close()
	if _, err := db.AppendRunEvent(context.Background(), runID, nil, map[string]any{"run": map[string]any{"status": "running"}}); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, data, err := ws.ReadMessage(); err != nil || !strings.Contains(string(data), `"seq":1`) {
		t.Fatalf("first frame %s, %v; want seq 1", data, err)
	}

	resp, err = http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `studio_event_streams_open{stream="run"} 1`) {
		t.Errorf("/metrics does not count the open stream")
	}

	cancel()
	_, _, err = ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Errorf("on shutdown the stream ended with %v, want close 1001 (going away)", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not return after shutdown")
	}
}
