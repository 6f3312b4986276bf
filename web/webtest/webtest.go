// Package webtest starts the whole Studio for tests: a fresh database of its
// own, the real web application on an httptest.Server, and clients that
// keep cookies and see redirects as they are.
package webtest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
	"github.com/skali-dev/studio/views"
	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/webtest/oidcprovider"
)

// Server is a running Studio.
type Server struct {
	*httptestServer
	URL string
	DB  *store.DB
	// Logs holds every log line the Studio wrote, for tests that check what
	// reaches the logs (and what must not).
	Logs *SyncBuffer
	// OIDC is the in-process OpenID provider the Studio signs people in
	// with (see SignInAs).
	OIDC *oidcprovider.Provider
	// Hub is the Studio's event hub (closing it is a server shutdown for
	// the event streams).
	Hub *events.Hub
}

// Option changes the Deps a test server is built with.
type Option func(*web.Deps)

// Start runs the Studio on a fresh database; it stops when the test ends.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	db := storetest.NewDB(tb)
	logs := &SyncBuffer{}
	idp := oidcprovider.Start(OIDCClientID, OIDCClientSecret)
	tb.Cleanup(idp.Close)
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	hub := events.NewHub(db, events.HubOptions{Logger: logger, LatestRuns: views.LatestRunsShown})
	tb.Cleanup(hub.Close)
	deps := web.Deps{
		DB:               db,
		Hub:              hub,
		Logger:           logger,
		LocalLogin:       true,
		OIDCIssuer:       idp.URL,
		OIDCClientID:     OIDCClientID,
		OIDCClientSecret: OIDCClientSecret,
		// Every test client comes from 127.0.0.1: tests that are not about
		// rate limits must not run into them (WithSignInLimit sets them).
		SignInFailures: web.RateLimit{Burst: 100000, Every: time.Millisecond},
		SignInStarts:   web.RateLimit{Burst: 100000, Every: time.Millisecond},
	}
	srv := newServer(func(base string) http.Handler {
		deps.PublicURL = base
		for _, o := range opts {
			o(&deps)
		}
		return web.New(deps)
	})
	tb.Cleanup(srv.Close)
	if deps.Runs != nil {
		// River's own poll (once a second, as in production): jobs are
		// announced by LISTEN/NOTIFY, so polling only finds what a lost
		// notification left. A 50 ms poll cost each idle test server about
		// 4 % of a core more under the race detector, a fifth of it
		// PostgreSQL's (docs/testing.md).
		if err := deps.Runs.StartRiver(context.Background(), runs.RiverOptions{ReconcileInterval: -1,
			// Test receivers listen on 127.0.0.1 (and only there: a test
			// of refusals uses another loopback address, 127.0.0.2).
			Webhooks: runs.WebhookOptions{PublicURL: srv.URL, AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}); err != nil {
			tb.Fatalf("webtest: river: %v", err)
		}
		tb.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = deps.Runs.StopRiver(ctx)
		})
	}
	return &Server{httptestServer: srv, URL: srv.URL, DB: db, Logs: logs, OIDC: idp, Hub: hub}
}

// WithSignInLimit limits failed sign-ins per client address to burst, then
// one per every.
func WithSignInLimit(burst int, every time.Duration) Option {
	return func(d *web.Deps) { d.SignInFailures = web.RateLimit{Burst: burst, Every: every} }
}

// NewClient returns a client with its own cookie jar that does not follow
// redirects, so a test sees each 303 and its Location.
func (s *Server) NewClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{
		Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// LocalLoginURL returns a fresh one-time sign-in link of the local administrator.
func (s *Server) LocalLoginURL(tb testing.TB) string {
	tb.Helper()
	token, err := s.DB.CreateLoginToken(context.Background())
	if err != nil {
		tb.Fatalf("create login token: %v", err)
	}
	return s.URL + "/login/local?token=" + url.QueryEscape(token)
}

// SignInLocal returns a client signed in as the local administrator through
// the one-time link, as a person would.
func (s *Server) SignInLocal(tb testing.TB) *http.Client {
	tb.Helper()
	c := s.NewClient()
	resp, err := c.Get(s.LocalLoginURL(tb))
	if err != nil {
		tb.Fatalf("sign in: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		tb.Fatalf("sign in: status %d, want 303", resp.StatusCode)
	}
	return c
}

// Get fetches path with c and returns the status and body.
func (s *Server) Get(tb testing.TB, c *http.Client, path string) (int, string) {
	tb.Helper()
	resp, err := c.Get(s.URL + path)
	if err != nil {
		tb.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// PostForm posts form fields to path as a same-origin browser form would and
// returns the response (body read into the returned string).
func (s *Server) PostForm(tb testing.TB, c *http.Client, path string, form url.Values) (*http.Response, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
