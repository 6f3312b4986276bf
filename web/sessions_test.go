package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/webtest"
)

func sessionCookie(t *testing.T, s *webtest.Server, c *http.Client) *http.Cookie {
	t.Helper()
	u, _ := url.Parse(s.URL)
	for _, ck := range c.Jar.Cookies(u) {
		if strings.HasSuffix(ck.Name, "studio_session") {
			return ck
		}
	}
	return nil
}

func TestSignInRenewsTheSessionToken(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"local link", "OIDC"} {
		t.Run(method, func(t *testing.T) {
			s := webtest.Start(t)
			c := s.NewClient()
			// Starting an OIDC sign-in creates a session (an anonymous
			// visit to a page does not); the local link is then used in
			// the same browser.
			if resp, err := c.Get(s.URL + "/login/oidc"); err != nil || resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("start OIDC sign-in: %v %v", resp, err)
			}
			before := sessionCookie(t, s, c)
			if before == nil {
				t.Fatal("no session cookie before sign-in")
			}
			if method == "OIDC" {
				if resp, _ := s.SignInWith(t, c, webtest.Identity("ada@example.test", "Ada")); resp.StatusCode != http.StatusSeeOther {
					t.Fatalf("sign-in = %d, want 303", resp.StatusCode)
				}
			} else {
				s.Follow(t, c, s.LocalLoginURL(t))
			}
			after := sessionCookie(t, s, c)
			if after == nil || after.Value == before.Value {
				t.Fatal("the session token did not change at sign-in")
			}
			if status, _ := s.Get(t, c, "/"); status != http.StatusOK {
				t.Fatalf("signed-in GET / = %d, want 200", status)
			}
			// Someone who planted or saw the pre-sign-in token gets nothing.
			planted := s.NewClient()
			u, _ := url.Parse(s.URL)
			planted.Jar.SetCookies(u, []*http.Cookie{before})
			if status, _ := s.Get(t, planted, "/"); status != http.StatusSeeOther {
				t.Errorf("GET / with the pre-sign-in token = %d, want 303 to sign-in", status)
			}
		})
	}
}

// The session code reads the real clock (time.Now in the Studio, now() in
// PostgreSQL), so the two tests below bracket each request with the test's
// own clock: a request is asserted alive only when it ended before the
// soonest its session could have ended, and ended only when it was sent
// after the latest. A request whose timing decides nothing (a busy
// machine stalled it) ends the attempt, and the scenario runs again with a
// longer timeout; only the last attempt's verdict is a failure.

// sessionTimeouts are the timeouts each attempt of a session scenario
// tries, each twice the one before.
var sessionTimeouts = []time.Duration{3 * time.Second, 6 * time.Second, 12 * time.Second, 24 * time.Second}

// timedGet gets / with c and says when the request was sent and when its
// answer came.
func timedGet(t *testing.T, s *webtest.Server, c *http.Client) (status int, sent, answered time.Time) {
	t.Helper()
	sent = time.Now()
	status, _ = s.Get(t, c, "/")
	return status, sent, time.Now()
}

func TestSessionIdleTimeout(t *testing.T) {
	for _, idle := range sessionTimeouts {
		if idleTimeoutScenario(t, idle) {
			return
		}
	}
	t.Fatalf("no attempt could tell: every one had a request slower than its idle timeout allows (up to %v)", sessionTimeouts[len(sessionTimeouts)-1])
}

// idleTimeoutScenario signs in with an idle timeout of idle, keeps the
// session busy past it, then pauses longer than it; it reports false when
// a request's timing decided nothing.
func idleTimeoutScenario(t *testing.T, idle time.Duration) bool {
	s := webtest.Start(t, func(d *web.Deps) { d.SessionIdleTimeout = idle })
	// A request moves the expiry to idle after some moment while it is
	// handled (or leaves it when that moves it less than a hundredth of
	// idle): the session lives at least until alive.
	margin := idle / 20
	sent := time.Now()
	c := s.SignInLocal(t)
	signedIn := time.Now()
	alive := sent.Add(idle - margin)
	// Activity keeps the session alive past the idle timeout...
	var answered time.Time
	for i := range 4 {
		time.Sleep(idle / 3)
		var status int
		status, sent, answered = timedGet(t, s, c)
		if !answered.Before(alive) {
			t.Logf("idle timeout %v: request %d was answered %v after the one before it was sent, too late to tell (GET / = %d); again with a longer timeout",
				idle, i+1, answered.Sub(alive.Add(margin-idle)).Round(time.Millisecond), status)
			return false
		}
		if status != http.StatusOK {
			t.Fatalf("idle timeout %v: active session, request %d (%v after sign-in): GET / = %d, want 200",
				idle, i+1, sent.Sub(signedIn).Round(time.Millisecond), status)
		}
		alive = sent.Add(idle - margin)
	}
	if sent.Sub(signedIn) <= idle {
		t.Fatalf("the last request was sent %v after sign-in, not past the idle timeout %v", sent.Sub(signedIn), idle)
	}
	// ...and a pause longer than it ends the session: the last request
	// moved the expiry before its answer came.
	time.Sleep(time.Until(answered.Add(idle + margin)))
	if status, _, _ := timedGet(t, s, c); status != http.StatusSeeOther {
		t.Errorf("idle timeout %v: after an idle pause GET / = %d, want 303 to sign-in", idle, status)
	}
	return true
}

func TestSessionAbsoluteLifetime(t *testing.T) {
	for _, lifetime := range sessionTimeouts {
		if absoluteLifetimeScenario(t, lifetime) {
			return
		}
	}
	t.Fatalf("no attempt could tell: in every one the sign-in or the requests took most of the lifetime (up to %v)", sessionTimeouts[len(sessionTimeouts)-1])
}

// absoluteLifetimeScenario signs in with a session lifetime of lifetime,
// keeps the session busy through it, and gets a page once it has passed;
// it reports false when no request late in the lifetime could be told
// alive.
func absoluteLifetimeScenario(t *testing.T, lifetime time.Duration) bool {
	s := webtest.Start(t, func(d *web.Deps) {
		d.SessionLifetime = lifetime
		d.SessionIdleTimeout = time.Hour
	})
	margin := lifetime / 20
	start := time.Now()
	c := s.SignInLocal(t)
	signedIn := time.Now()
	// The session (and its sign-in) began during SignInLocal: it lives at
	// least until alive, and at most until ended.
	alive, ended := start.Add(lifetime-margin), signedIn.Add(lifetime)
	var late time.Time // the last request told alive
	for {
		time.Sleep(lifetime / 10)
		status, sent, answered := timedGet(t, s, c)
		if !answered.Before(alive) {
			break
		}
		if status != http.StatusOK {
			t.Fatalf("lifetime %v: %v after sign-in, within the lifetime, GET / = %d, want 200", lifetime, sent.Sub(signedIn).Round(time.Millisecond), status)
		}
		late = sent
	}
	if late.Sub(start) < lifetime/2 {
		t.Logf("lifetime %v: no request in its second half was answered in time to tell; again with a longer lifetime", lifetime)
		return false
	}
	// However active, the session ends at its lifetime.
	time.Sleep(time.Until(ended.Add(margin)))
	if status, _, _ := timedGet(t, s, c); status != http.StatusSeeOther {
		t.Errorf("lifetime %v: past the lifetime GET / = %d, want 303 to sign-in", lifetime, status)
	}
	return true
}

func TestSessionCookieFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		publicURL, name string
		secure          bool
	}{
		{"https://studio.example", "__Host-studio_session", true},
		{"", "studio_session", false}, // the test server's own http URL
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := webtest.Start(t, func(d *web.Deps) {
				if tc.publicURL != "" {
					d.PublicURL = tc.publicURL
				}
			})
			resp, _ := s.Follow(t, s.NewClient(), s.LocalLoginURL(t))
			var ck *http.Cookie
			for _, c := range resp.Cookies() {
				if strings.HasSuffix(c.Name, "studio_session") {
					ck = c
				}
			}
			if ck == nil {
				t.Fatalf("no session cookie in %d answer", resp.StatusCode)
			}
			if ck.Name != tc.name || ck.Secure != tc.secure || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Domain != "" {
				t.Errorf("cookie = %s (Secure %v, HttpOnly %v, SameSite %v, Path %q, Domain %q); want %s, Secure %v, HttpOnly, Lax, Path /, no Domain",
					ck.Name, ck.Secure, ck.HttpOnly, ck.SameSite, ck.Path, ck.Domain, tc.name, tc.secure)
			}
			if tc.secure && !strings.Contains(resp.Header.Get("Strict-Transport-Security"), "max-age=") {
				t.Error("no Strict-Transport-Security on https")
			}
		})
	}
}
