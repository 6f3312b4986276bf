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

func TestSessionIdleTimeout(t *testing.T) {
	s := webtest.Start(t, func(d *web.Deps) { d.SessionIdleTimeout = 3 * time.Second })
	c := s.SignInLocal(t)
	// Activity keeps the session alive past the idle timeout...
	for range 4 {
		time.Sleep(time.Second)
		if status, _ := s.Get(t, c, "/"); status != http.StatusOK {
			t.Fatalf("active session: GET / = %d, want 200", status)
		}
	}
	// ...and a pause longer than it ends the session.
	time.Sleep(4 * time.Second)
	if status, _ := s.Get(t, c, "/"); status != http.StatusSeeOther {
		t.Errorf("after an idle pause GET / = %d, want 303 to sign-in", status)
	}
}

func TestSessionAbsoluteLifetime(t *testing.T) {
	s := webtest.Start(t, func(d *web.Deps) {
		d.SessionLifetime = 3 * time.Second
		d.SessionIdleTimeout = time.Hour
	})
	c := s.SignInLocal(t)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline.Add(-time.Second)) {
		if status, _ := s.Get(t, c, "/"); status != http.StatusOK {
			t.Fatalf("within the lifetime GET / = %d, want 200", status)
		}
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(time.Until(deadline) + 500*time.Millisecond)
	// However active, the session ends at its lifetime.
	if status, _ := s.Get(t, c, "/"); status != http.StatusSeeOther {
		t.Errorf("past the lifetime GET / = %d, want 303 to sign-in", status)
	}
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
