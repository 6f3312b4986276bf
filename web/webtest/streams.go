package webtest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

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
