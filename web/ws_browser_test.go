package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/static"
	"github.com/skali-dev/studio/views"
	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/stream"
	"github.com/skali-dev/studio/web/webtest"
)

// checkpointRows renders a checkpoint row per run event, standing in for
// the run page's templ component until it lands.
type checkpointRows struct{ stream.NoFragments }

func (checkpointRows) RunFragments(_ context.Context, runID int64, ev *events.Event) ([]views.Fragment, error) {
	var p webtest.StreamFrame
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return nil, err
	}
	if p.Checkpoint == nil {
		// A run-level change re-renders the header, which carries the
		// data-stream attribute itself.
		st := html.EscapeString(p.Run.Status)
		return []views.Fragment{{ID: "run-header", HTML: fmt.Sprintf(
			`<section id="run-header" data-stream="/projects/hello-world/environments/production/runs/%d/events" data-last-seq="%d">`+
				`<span id="run-status" data-run-status="%s">%s</span></section>`, runID, ev.Seq, st, st)}}, nil
	}
	id := fmt.Sprintf("checkpoint-%d", p.Checkpoint.Position)
	return []views.Fragment{{ID: id, HTML: fmt.Sprintf(`<li id="%s" data-status="%s">checkpoint %d: %s</li>`,
		id, html.EscapeString(p.Checkpoint.Status), p.Checkpoint.Position, html.EscapeString(p.Checkpoint.Status))}}, nil
}

// trackingListener remembers its connections so the test can cut them all,
// as a network failure would.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// TestBrowserFollowsARunLive opens a page carrying the data-stream contract
// in Chromium (served, like the Studio's pages, with its content security
// policy and the hashed live.js): it applies the backlog after
// data-last-seq, swaps checkpoint rows and the run status as events land,
// shows the connection banner when the connection drops and resumes where
// it left off. (Countdowns are tested on the real run and environment
// pages: watch_browser_test.go.)
func TestBrowserFollowsARunLive(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, func(d *web.Deps) { d.Fragments = checkpointRows{} })
	b := browsertest.New(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	s.AppendRunEvent(t, runID, "running", 0)   // seq 1: already on the page
	s.AppendRunEvent(t, runID, "running", 1)   // seq 2: backlog
	s.AppendRunEvent(t, runID, "succeeded", 1) // seq 3: backlog

	// A front server for the page: it serves the test page and passes
	// everything else (sign-in, live.js, the websocket) to the Studio. A
	// flag makes it refuse event streams, to hold the page disconnected.
	target, _ := url.Parse(s.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var down atomic.Bool
	page := fmt.Sprintf(`<!doctype html><html><head><title>run</title>
<script src="%s" defer></script></head><body>
<section id="run-header" data-stream="/projects/hello-world/environments/production/runs/%d/events" data-last-seq="1">
<span id="run-status" data-run-status="running">running</span></section>
<ol><li id="checkpoint-1">checkpoint 1: pending</li><li id="checkpoint-2">checkpoint 2: pending</li></ol>
</body></html>`, static.Path("js/live.js"), runID)
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/test/run" {
			w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; connect-src 'self'")
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, page)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/events") && down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	tl := &trackingListener{Listener: front.Listener}
	front.Listener = tl
	front.Start()
	t.Cleanup(front.Close)

	login := front.URL + strings.TrimPrefix(s.LocalLoginURL(t), s.URL)
	b.Do(
		chromedp.Navigate(login),
		chromedp.WaitVisible(chromedp.CSS("h1")),
		chromedp.Navigate(front.URL+"/test/run"),
		chromedp.WaitVisible(chromedp.CSS("#run-header")),
	)
	waitFor := func(what, expr string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !browsertest.Eval[bool](b, expr) {
			if time.Now().After(deadline) {
				b.Screenshot("live-run-timeout")
				t.Fatalf("timed out waiting for %s (%s); page: %s", what, expr,
					browsertest.Eval[string](b, `document.body.outerHTML`))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Backlog after data-last-seq=1.
	waitFor("the backlog", `document.querySelector("#run-header").dataset.lastSeq === "3"`)
	if got := b.Text("#checkpoint-1"); got != "checkpoint 1: succeeded" {
		t.Errorf("checkpoint 1 = %q after the backlog, want succeeded", got)
	}

	// Live.
	s.AppendRunEvent(t, runID, "running", 2)
	waitFor("checkpoint 2 running", `document.querySelector("#checkpoint-2").dataset.status === "running"`)
	s.AppendRunEvent(t, runID, "succeeded-with-warnings", 0)
	waitFor("the run status", `document.querySelector("#run-status").dataset.runStatus === "succeeded-with-warnings"`)
	if got := b.Text("#run-status"); got != "succeeded · with warnings" {
		t.Errorf("run status text = %q", got)
	}

	// The connection drops and stays down for a while.
	down.Store(true)
	tl.cut()
	waitFor("the paused banner", `((document.querySelector("#live-banner") || {}).textContent || "").startsWith("Live updates paused")`)
	b.Screenshot("live-run-reconnecting")
	s.AppendRunEvent(t, runID, "failed", 2) // seq 6, while disconnected
	down.Store(false)
	waitFor("the resumed stream", `document.querySelector("#run-header").dataset.lastSeq === "6"`)
	if got := b.Text("#checkpoint-2"); got != "checkpoint 2: failed" {
		t.Errorf("checkpoint 2 = %q after resuming, want failed", got)
	}
	waitFor("the live state", `document.querySelector("#run-header").dataset.streamStatus === "live"`)
	waitFor("the banner to go", `document.querySelector("#live-banner").hidden`)
	s.AppendRunEvent(t, runID, "succeeded", 2)
	waitFor("an event after resuming", `document.querySelector("#run-header").dataset.lastSeq === "7"`)
	b.Screenshot("live-run")
}
