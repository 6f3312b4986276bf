package stream_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/stream"
	"github.com/skali-dev/studio/web/webtest"
)

// closeCode reads until the connection closes and returns the close code.
func closeCode(t *testing.T, c *websocket.Conn) int {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		_, _, err := c.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		t.Fatalf("read until close: %v", err)
	}
}

// TestRunEventStreamReplaysThenFollows: an admin watching a run gets the
// events after the sequence number they name, then each new event as one
// JSON text frame.
func TestRunEventStreamReplaysThenFollows(t *testing.T) {
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	s.AppendRunEvent(t, runID, "running", 0)
	s.AppendRunEvent(t, runID, "running", 1)
	s.AppendRunEvent(t, runID, "succeeded", 1)

	conn, resp, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, 1), nil)
	if err != nil {
		t.Fatalf("dial: %v (status %v)", err, resp)
	}
	if c := resp.Header.Get("Set-Cookie"); c != "" {
		t.Errorf("the handshake set a cookie: %q", c)
	}
	for _, want := range []int64{2, 3} {
		if f := webtest.ReadFrame(t, conn); f.Seq != want || f.Checkpoint == nil || f.Checkpoint.Position != 1 {
			t.Fatalf("backlog frame %+v, want seq %d of checkpoint 1", f, want)
		}
	}
	s.AppendRunEvent(t, runID, "running", 2)
	s.AppendRunEvent(t, runID, "succeeded", 0)
	if f := webtest.ReadFrame(t, conn); f.Seq != 4 || f.Checkpoint.Position != 2 {
		t.Fatalf("live frame %+v, want seq 4 of checkpoint 2", f)
	}
	if f := webtest.ReadFrame(t, conn); f.Seq != 5 || f.Checkpoint != nil || f.Run.Status != "succeeded" {
		t.Fatalf("live frame %+v, want seq 5: run succeeded", f)
	}

	// Shutting the hub down (as the server's shutdown does) closes the
	// stream with "going away", so the page reconnects elsewhere.
	s.Hub.Close()
	if code := closeCode(t, conn); code != websocket.CloseGoingAway {
		t.Errorf("close code on shutdown = %d, want %d (going away)", code, websocket.CloseGoingAway)
	}
}

// TestEnvironmentEventStream follows the environment's own stream.
func TestEnvironmentEventStream(t *testing.T) {
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	conn, resp, err := s.DialStream(t, admin, "/projects/hello-world/environments/production/events?after=0", nil)
	if err != nil {
		t.Fatalf("dial: %v (status %v)", err, resp)
	}
	_, err = s.DB.Pool.Exec(t.Context(), `
		WITH s AS (UPDATE environments SET last_event_seq = last_event_seq + 1 WHERE id = $1 RETURNING id, last_event_seq),
		     i AS (INSERT INTO environment_events (environment_id, seq, run_id, payload)
		           SELECT id, last_event_seq, $2, '{"type": "run.started", "run": {"id": 1, "kind": "deploy", "status": "running"}}' FROM s
		           RETURNING environment_id, seq)
		SELECT pg_notify('environment_events.' || i.environment_id::text, i.environment_id::text || ':' || i.seq::text) FROM i`, env.ID, runID)
	if err != nil {
		t.Fatal(err)
	}
	if f := webtest.ReadFrame(t, conn); f.Seq != 1 || f.Type != "run.started" || f.Run.Status != "running" {
		t.Fatalf("frame %+v, want seq 1 run.started", f)
	}
}

// TestEventStreamRefusesForeignOrigins: a page of another site (or a
// sandboxed one, Origin "null") cannot open a stream with the person's
// cookie.
func TestEventStreamRefusesForeignOrigins(t *testing.T) {
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	for _, origin := range []string{"https://evil.example.test", "null", "http://127.0.0.1:1"} {
		t.Run(origin, func(t *testing.T) {
			conn, resp, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, 0), http.Header{"Origin": {origin}})
			if err == nil {
				conn.Close()
				t.Fatalf("handshake from origin %q succeeded", origin)
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Errorf("handshake from origin %q: %v, want 403", origin, resp)
			}
		})
	}
}

// TestEventStreamChecksTheRole: only people with a role on the run's
// environment may watch it; a role removed mid-stream closes the stream
// before the next event goes out.
func TestEventStreamChecksTheRole(t *testing.T) {
	s := webtest.Start(t)
	prod := s.CreateEnvironment(t, "", "production")
	staging := s.CreateEnvironment(t, "", "staging")
	prodRun := s.CreateRun(t, prod, "deploy")
	stagingRun := s.CreateRun(t, staging, "deploy")
	s.AddMember(t, prod, "viewer@example.test", store.RoleViewer)
	s.AddMember(t, staging, "stager@example.test", store.RoleAdmin)
	viewer := s.SignInAs(t, "viewer@example.test", "Viewer")
	stager := s.SignInAs(t, "stager@example.test", "Stager")

	cases := []struct {
		name   string
		client *http.Client
		path   string
		status int
	}{
		{"anonymous", s.NewClient(), webtest.RunEventsPath(prodRun, 0), http.StatusUnauthorized},
		{"admin of staging watching production", stager, webtest.RunEventsPath(prodRun, 0), http.StatusForbidden},
		{"admin of staging watching production's environment stream", stager, "/projects/hello-world/environments/production/events", http.StatusForbidden},
		{"viewer of production naming staging's run under production", viewer, webtest.RunEventsPath(stagingRun, 0), http.StatusNotFound},
		{"bad after", viewer, webtest.RunEventsPath(prodRun, -1), http.StatusBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, resp, err := s.DialStream(t, tc.client, tc.path, nil)
			if err == nil {
				conn.Close()
				t.Fatal("handshake succeeded")
			}
			if resp == nil || resp.StatusCode != tc.status {
				t.Errorf("handshake: %v, want %d", resp, tc.status)
			}
		})
	}

	conn, resp, err := s.DialStream(t, viewer, webtest.RunEventsPath(prodRun, 0), nil)
	if err != nil {
		t.Fatalf("viewer's dial: %v (%v)", err, resp)
	}
	s.AppendRunEvent(t, prodRun, "running", 0)
	if f := webtest.ReadFrame(t, conn); f.Seq != 1 {
		t.Fatalf("frame %+v, want seq 1", f)
	}
	_, err = s.DB.Pool.Exec(t.Context(), `DELETE FROM memberships WHERE environment_id = $1`, prod.ID)
	if err != nil {
		t.Fatal(err)
	}
	closedForAccess(t, s, conn, prodRun, "the role was removed")
}

// closedForAccess appends events to the run until the stream closes, and
// fails unless it closes with 4403 (access removed). Access answers are
// shared for two seconds (and refreshed in the background after that,
// while events keep flowing): within a few seconds of more events the
// stream closes. Each event appended brings a frame or the close, so each
// read waits for it, however long a busy machine takes; the whole wait is
// bounded by a minute. The events are paced: the close comes with the
// answer's age, not with a number of events, and another stream of the
// run that the test does not read meanwhile keeps every frame.
func closedForAccess(t *testing.T, s *webtest.Server, conn *websocket.Conn, runID int64, why string) {
	t.Helper()
	began := time.Now()
	for frames := 0; ; frames++ {
		if frames > 0 {
			time.Sleep(10 * time.Millisecond)
		}
		s.AppendRunEvent(t, runID, "running", 0)
		_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
		_, _, err := conn.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			if ce.Code != 4403 {
				t.Errorf("close code after %s = %d, want 4403", why, ce.Code)
			}
			t.Logf("closed %v after %s, after %d more frames", time.Since(began).Round(time.Millisecond), why, frames)
			return
		}
		if err != nil {
			// A read that timed out leaves a gorilla connection unusable.
			t.Fatalf("after %s and %d more frames: no frame and no close for the event appended a minute ago: %v", why, frames, err)
		}
		if time.Since(began) > time.Minute {
			t.Fatalf("the stream stayed open a minute (%d more frames) after %s", frames+1, why)
		}
	}
}

// TestOpenStreamsEndWithTheirSessionOrToken: an open stream re-checks who
// its viewer is by the same rule as the handshake: a person who signs out
// (their session is gone) and a token revoked while its stream is open
// both lose the stream, closed with 4403, though the role is still there.
func TestOpenStreamsEndWithTheirSessionOrToken(t *testing.T) {
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	s.AddMember(t, env, "viewer@example.test", store.RoleViewer)
	viewer := s.SignInAs(t, "viewer@example.test", "Viewer")

	conn, resp, err := s.DialStream(t, viewer, webtest.RunEventsPath(runID, 0), nil)
	if err != nil {
		t.Fatalf("viewer's dial: %v (%v)", err, resp)
	}
	s.AppendRunEvent(t, runID, "running", 0)
	if f := webtest.ReadFrame(t, conn); f.Seq != 1 {
		t.Fatalf("frame %+v, want seq 1", f)
	}
	id, secret := s.CreateToken(t, viewer, "watcher", "", "hello-world/production:viewer")
	bearer := http.Header{"Authorization": {"Bearer " + secret}}
	tokenConn, resp, err := s.DialStream(t, nil, webtest.RunEventsPath(runID, 1), bearer)
	if err != nil {
		t.Fatalf("token's dial: %v (%v)", err, resp)
	}

	if resp, _ := s.PostForm(t, viewer, "/logout", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out = %d, want 303", resp.StatusCode)
	}
	closedForAccess(t, s, conn, runID, "the viewer signed out")

	// The token outlives the session it was made in, until revoked.
	var n int64
	if err := s.DB.Pool.QueryRow(t.Context(), `SELECT last_seq FROM runs WHERE id = $1`, runID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	for seq := int64(2); seq <= n; seq++ {
		if f := webtest.ReadFrame(t, tokenConn); f.Seq != seq {
			t.Fatalf("token stream: frame %+v, want seq %d", f, seq)
		}
	}
	admin := s.SignInLocal(t)
	if resp, _ := s.PostForm(t, admin, fmt.Sprintf("/tokens/%d/revoke", id), nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke = %d, want 303", resp.StatusCode)
	}
	closedForAccess(t, s, tokenConn, runID, "the token was revoked")
}

// TestEventStreamLeavesTheSessionAlone: a stream reads the session but
// never writes it back (a connection open for hours must not overwrite what
// the person's other tabs saved meanwhile).
func TestEventStreamLeavesTheSessionAlone(t *testing.T) {
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	snapshot := func() string {
		var out string
		err := s.DB.Pool.QueryRow(t.Context(), `SELECT string_agg(encode(token_hash, 'hex') || md5(data) || expiry::text, ',' ORDER BY token_hash) FROM sessions`).Scan(&out)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := snapshot()
	conn, resp, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, 0), nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	if c := resp.Header.Get("Set-Cookie"); c != "" {
		t.Errorf("the handshake set a cookie: %q", c)
	}
	s.AppendRunEvent(t, runID, "running", 0)
	webtest.ReadFrame(t, conn)
	conn.Close()
	if after := snapshot(); after != before {
		t.Errorf("sessions changed while streaming:\nbefore %s\nafter  %s", before, after)
	}
}

// TestEventStreamPingsAndDropsADeadPeer: a client that answers pings stays
// connected; one that stops answering is closed. The silence allowed is
// 2 s, not less: the answering client's pong must come within it on a
// machine that a browser and the race detector keep busy.
func TestEventStreamPingsAndDropsADeadPeer(t *testing.T) {
	defer stream.SetStreamTimingsForTest(50*time.Millisecond, 2*time.Second)()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)

	alive, resp, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, 0), nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	var pings atomic.Int32
	alive.SetPingHandler(func(data string) error {
		pings.Add(1)
		return alive.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	go func() {
		for {
			if _, _, err := alive.ReadMessage(); err != nil {
				return
			}
		}
	}()
	// The silent client never reads, so it never answers a ping.
	silent, resp, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, 0), nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	// The server drops the silent client (its subscription ends) once it
	// has heard nothing for 2 s; the answering one stays.
	for deadline := time.Now().Add(time.Minute); s.Hub.Subscribers() > 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers a minute on; the silent client should have been dropped", s.Hub.Subscribers())
		}
	}
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := silent.ReadMessage(); err != nil {
			break // closed by the server (the pings it got were ignored)
		}
	}
	if n := pings.Load(); n < 5 {
		t.Errorf("the answering client got %d pings while the silent one went unheard for 2 s, want one every 50 ms", n)
	}
	s.AppendRunEvent(t, runID, "running", 0)
	_ = alive.SetReadDeadline(time.Now().Add(5 * time.Second))
	waitUntil(t, "the answering client to still be subscribed", func() bool {
		return s.Hub.Subscribers() == 1
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEventStreamManyWatchersExactlyOnce connects watchers from random
// starting points while events are appended: over the real websocket, each
// gets every event after its starting point once, in order.
func TestEventStreamManyWatchersExactlyOnce(t *testing.T) {
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	const before, during, watchers = 10, 40, 25
	for range before {
		s.AppendRunEvent(t, runID, "running", 1)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range during {
			s.AppendRunEvent(t, runID, "running", 2)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	errs := make(chan error, watchers)
	for i := range watchers {
		after := int64(i % (before + during/2))
		go func() {
			conn, resp, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, after), nil)
			if err != nil {
				errs <- fmt.Errorf("dial after %d: %v (%v)", after, err, resp)
				return
			}
			want := after + 1
			for want <= before+during {
				_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
				_, data, err := conn.ReadMessage()
				if err != nil {
					errs <- fmt.Errorf("after %d, waiting for %d: %v", after, want, err)
					return
				}
				var f webtest.StreamFrame
				if err := json.Unmarshal(data, &f); err != nil || f.Seq != want {
					errs <- fmt.Errorf("after %d: got seq %d (%v), want %d", after, f.Seq, err, want)
					return
				}
				want++
			}
			errs <- nil
		}()
	}
	for range watchers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	<-done
}
