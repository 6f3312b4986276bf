package webtest

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/store"
)

// CreateRun inserts a pending run of kind (deploy when empty) into the
// environment with plain SQL and returns its id.
func (s *Server) CreateRun(tb testing.TB, env *store.Environment, kind string) int64 {
	tb.Helper()
	if kind == "" {
		kind = "deploy"
	}
	var id int64
	err := s.DB.Pool.QueryRow(context.Background(),
		`INSERT INTO runs (environment_id, kind) VALUES ($1, $2) RETURNING id`, env.ID, kind).Scan(&id)
	if err != nil {
		tb.Fatalf("create run: %v", err)
	}
	return id
}

// DialStream opens the event stream websocket at path (with its query) as
// the client c (its session cookie), from the Studio's own origin unless
// header sets another Origin. It returns the handshake's response even when
// the handshake is refused.
func (s *Server) DialStream(tb testing.TB, c *http.Client, path string, header http.Header) (*websocket.Conn, *http.Response, error) {
	tb.Helper()
	h := http.Header{}
	for k, v := range header {
		h[k] = v
	}
	if _, ok := h["Origin"]; !ok {
		h.Set("Origin", s.URL)
	}
	if c != nil && c.Jar != nil {
		req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
		for _, ck := range c.Jar.Cookies(req.URL) {
			req.AddCookie(ck)
		}
		if v := req.Header.Get("Cookie"); v != "" {
			h.Set("Cookie", v)
		}
	}
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.URL, "http")+path, h)
	if conn != nil {
		tb.Cleanup(func() { conn.Close() })
	}
	return conn, resp, err
}

// RunEventsPath is the event stream of run runID of hello-world/production,
// from after sequence number after.
func RunEventsPath(runID int64, after int64) string {
	return paths.RunEvents("hello-world", "production", runID) + "?after=" + strconv.FormatInt(after, 10)
}

// AppendRunEvent appends an event to the run as the runner would: with a
// position, a change of that checkpoint (an issue-tls one) to status;
// without one, a change of the run to status.
func (s *Server) AppendRunEvent(tb testing.TB, runID int64, status string, position int) {
	tb.Helper()
	payload := map[string]any{"run": map[string]any{"status": "running"}}
	var cp *int
	if position > 0 {
		cp = &position
		payload["checkpoint"] = map[string]any{"position": position, "kind": "issue-tls", "name": "shop.example.test", "status": status}
	} else {
		payload["run"] = map[string]any{"status": status}
	}
	if _, err := s.DB.AppendRunEvent(context.Background(), runID, cp, payload); err != nil {
		tb.Fatal(err)
	}
}

// StreamFrame is what an event stream sends for each event.
type StreamFrame struct {
	Seq int64 `json:"seq"`
	Run *struct {
		Status string `json:"status"`
	} `json:"run"`
	Checkpoint *struct {
		Position int    `json:"position"`
		Status   string `json:"status"`
	} `json:"checkpoint"`
	Type string `json:"type"`
}

// ReadFrame reads the next frame of an event stream, within 10 seconds.
func ReadFrame(tb testing.TB, c *websocket.Conn) StreamFrame {
	tb.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	kind, data, err := c.ReadMessage()
	if err != nil {
		tb.Fatalf("read frame: %v", err)
	}
	if kind != websocket.TextMessage {
		tb.Fatalf("frame of type %d, want text", kind)
	}
	var f StreamFrame
	if err := json.Unmarshal(data, &f); err != nil {
		tb.Fatalf("frame %s: %v", data, err)
	}
	return f
}
