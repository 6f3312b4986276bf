package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store/storetest"
	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// parallelTests is how many of the package's parallel tests run at once
// unless -parallel says otherwise. Go's default is GOMAXPROCS (2 on a
// two-core CI machine), but most of a browser test's time is spent waiting
// for a page, a live update or a countdown, not computing, so more of them
// fit on two cores (see docs/testing.md).
const parallelTests = 4

func TestMain(m *testing.M) {
	storetest.DefaultParallel(parallelTests)
	storetest.Main(m, browsertest.Shutdown)
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	c := s.NewClient()
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, _ := s.Get(t, c, path); status != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, status)
		}
	}
	// While the database refuses new connections (as one shutting down
	// does), readiness fails and liveness holds, even though the pool's
	// open connections still work; once it accepts them again, ready.
	ctx := context.Background()
	var name string
	if err := s.DB.Pool.QueryRow(ctx, `SELECT quote_ident(current_database())`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	storetest.Exec(t, `ALTER DATABASE `+name+` WITH ALLOW_CONNECTIONS false`)
	if status, _ := s.Get(t, c, "/readyz"); status != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz while the database refuses connections = %d, want 503", status)
	}
	if status, _ := s.Get(t, c, "/healthz"); status != http.StatusOK {
		t.Errorf("GET /healthz while the database refuses connections = %d, want 200", status)
	}
	storetest.Exec(t, `ALTER DATABASE `+name+` WITH ALLOW_CONNECTIONS true`)
	if status, _ := s.Get(t, c, "/readyz"); status != http.StatusOK {
		t.Errorf("GET /readyz once the database accepts connections again = %d, want 200", status)
	}
	// With the pool closed (the Studio shutting down), not ready either.
	s.DB.Pool.Close()
	if status, _ := s.Get(t, c, "/readyz"); status != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz with the pool closed = %d, want 503", status)
	}
}

func TestSecurityHeadersOnEveryPage(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	resp, err := s.NewClient().Get(s.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "default-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy allows inline code: %q", csp)
	}
	for header, want := range map[string]string{
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "same-origin",
		"X-Frame-Options":        "DENY",
	} {
		if got := resp.Header.Get(header); got != want {
			t.Errorf("%s = %q, want %q", header, got, want)
		}
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id in the response")
	}
}

func TestAnonymousVisitorIsSentToSignIn(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	resp, err := s.NewClient().Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("GET / anonymous = %d to %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestUnknownPageIsA404Page(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	c := s.SignInLocal(t)
	status, body := s.Get(t, c, "/no/such/page")
	if status != http.StatusNotFound {
		t.Fatalf("status = %d, want 404", status)
	}
	if !strings.Contains(body, "Page not found") || !strings.Contains(body, "Local administrator") {
		t.Errorf("404 page lacks its heading or the signed-in user's chrome")
	}
}

func TestCrossOriginPostIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	c := s.SignInLocal(t)
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/logout", strings.NewReader(url.Values{}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://attacker.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin POST /logout = %d, want 403", resp.StatusCode)
	}
	// Still signed in: the refused sign-out did nothing.
	if status, body := s.Get(t, c, "/"); status != http.StatusOK || !strings.Contains(body, "Local administrator") {
		t.Errorf("after a refused cross-origin sign-out, GET / = %d; want the signed-in home page", status)
	}
}

func TestOversizedBodyIsRefused(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, func(d *web.Deps) { d.MaxBodyBytes = 1 << 10 })
	c := s.SignInLocal(t)
	resp, _ := s.PostForm(t, c, "/logout", url.Values{"padding": {strings.Repeat("x", 4<<10)}})
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("POST with a 4 KiB body over a 1 KiB limit = %d, want 413", resp.StatusCode)
	}
}

func TestLocalSignInLinkWorksOnce(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	link := s.LocalLoginURL(t)
	c := s.NewClient()
	resp, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first use = %d, want 303", resp.StatusCode)
	}
	other := s.NewClient()
	status, body := s.Get(t, other, strings.TrimPrefix(link, s.URL))
	if status != http.StatusUnauthorized || !strings.Contains(body, "already been used") {
		t.Errorf("second use = %d, want 401 saying the link was already used", status)
	}
	// The token never reaches the logs.
	token := link[strings.Index(link, "token=")+len("token="):]
	if strings.Contains(s.Logs.String(), token) {
		t.Error("the sign-in token appears in the logs")
	}
	_ = context.Background()
}

func TestSignOutEndsTheSessionServerSide(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	c := s.SignInLocal(t)
	u, _ := url.Parse(s.URL)
	cookies := c.Jar.Cookies(u)
	if len(cookies) == 0 {
		t.Fatal("no session cookie after sign-in")
	}
	resp, _ := s.PostForm(t, c, "/logout", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("POST /logout = %d to %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Replaying the old cookie does not sign anyone in.
	replay := s.NewClient()
	replay.Jar.SetCookies(u, cookies)
	resp, err := replay.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET / with the signed-out cookie = %d, want 303 to sign-in", resp.StatusCode)
	}
}

func TestAuditLinkShowsOnlyForAdmins(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	s.AddMember(t, env, "viewer@example.test", "viewer")
	s.AddMember(t, env, "admin@example.test", "admin")
	for _, tc := range []struct {
		email string
		want  bool
	}{
		{"viewer@example.test", false},
		{"admin@example.test", true},
	} {
		c := s.SignInAs(t, tc.email, "Someone")
		_, body := s.Get(t, c, "/")
		if got := strings.Contains(body, `href="/audit"`); got != tc.want {
			t.Errorf("%s: audit link shown = %v, want %v", tc.email, got, tc.want)
		}
	}
}
