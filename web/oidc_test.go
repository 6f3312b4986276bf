package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/webtest"
	"github.com/skali-dev/studio/web/webtest/oidcprovider"
)

func TestOIDCSignInCreatesTheUserAndShowsTheirName(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	c := s.NewClient()
	// An anonymous visit remembers where the person wanted to go.
	if resp, _ := s.Follow(t, c, s.URL+"/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("anonymous GET = %d, want 303 to sign-in", resp.StatusCode)
	}
	authorize := s.StartOIDC(t, c)
	u, err := url.Parse(authorize)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for _, p := range []string{"state", "nonce", "code_challenge"} {
		if q.Get(p) == "" {
			t.Errorf("authorization URL lacks %s", p)
		}
	}
	if q.Get("code_challenge_method") != "S256" {
		t.Errorf("code_challenge_method = %q, want S256", q.Get("code_challenge_method"))
	}
	if got, want := q.Get("redirect_uri"), s.URL+"/login/oidc/callback"; got != want {
		t.Errorf("redirect_uri = %q, want %q", got, want)
	}
	if !strings.Contains(q.Get("scope"), "openid") {
		t.Errorf("scope = %q, want openid among them", q.Get("scope"))
	}
	resp, _ := s.Follow(t, c, s.Authorize(t, c, authorize, webtest.Identity("ada@example.test", "Ada Lovelace")))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("callback = %d to %q, want 303 to the page asked for", resp.StatusCode, resp.Header.Get("Location"))
	}
	status, body := s.Get(t, c, "/")
	if status != http.StatusOK || !strings.Contains(body, "Ada Lovelace") {
		t.Errorf("home after OIDC sign-in = %d, want 200 showing the user's name", status)
	}
	var issuer, subject, email string
	var admin bool
	err = s.DB.Pool.QueryRow(context.Background(),
		`SELECT issuer, subject, email, is_admin FROM users WHERE email = 'ada@example.test'`).Scan(&issuer, &subject, &email, &admin)
	if err != nil {
		t.Fatal(err)
	}
	if issuer != s.OIDC.URL || subject != "sub-ada@example.test" || admin {
		t.Errorf("user = (%q, %q, admin %v), want (%q, %q, admin false)", issuer, subject, admin, s.OIDC.URL, "sub-ada@example.test")
	}
	if n := countAudit(t, s, "sign-in"); n != 1 {
		t.Errorf("sign-in audit records = %d, want 1", n)
	}
}

func TestOIDCAdminsComeFromTheAdminsSetting(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithAdmins("root@example.test", "sub-grace"))
	for _, tc := range []struct {
		who  oidcprovider.Identity
		want bool
	}{
		{webtest.Identity("root@example.test", "Root"), true},
		{webtest.Identity("ROOT2@example.test", "Not root"), false},
		{oidcprovider.Identity{Subject: "sub-grace", Email: "grace@example.test", Name: "Grace", EmailVerified: true}, true},
		// An unverified email does not make anybody an admin.
		{oidcprovider.Identity{Subject: "sub-mallory", Email: "root@example.test", Name: "Mallory", EmailVerified: false}, false},
	} {
		c := s.NewClient()
		if resp, _ := s.SignInWith(t, c, tc.who); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in as %s = %d, want 303", tc.who.Subject, resp.StatusCode)
		}
		var admin bool
		if err := s.DB.Pool.QueryRow(context.Background(), `SELECT is_admin FROM users WHERE subject = $1`, tc.who.Subject).Scan(&admin); err != nil {
			t.Fatal(err)
		}
		if admin != tc.want {
			t.Errorf("%s (%s): is_admin = %v, want %v", tc.who.Subject, tc.who.Email, admin, tc.want)
		}
	}
}

// TestOIDCFailures runs sign-ins that must be refused. Each must show the
// sign-in page with a sentence, never sign anybody in, log the reason with
// the request id and leave a sign-in.failed audit record.
func TestOIDCFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		run    func(t *testing.T, s *webtest.Server, c *http.Client) (*http.Response, string)
		status int
		says   string
		reason string
	}{
		{
			name: "state mismatch",
			run: func(t *testing.T, s *webtest.Server, c *http.Client) (*http.Response, string) {
				cb := s.Authorize(t, c, s.StartOIDC(t, c), webtest.Identity("eve@example.test", "Eve"))
				return s.Follow(t, c, replaceParam(t, cb, "state", "forged-state"))
			},
			status: http.StatusBadRequest, says: "does not belong to the sign-in this browser started", reason: "state_mismatch",
		},
		{
			name: "callback without a flow in this browser",
			run: func(t *testing.T, s *webtest.Server, c *http.Client) (*http.Response, string) {
				cb := s.Authorize(t, c, s.StartOIDC(t, c), webtest.Identity("eve@example.test", "Eve"))
				// Another browser (a victim lured to the link) has no flow.
				return s.Follow(t, s.NewClient(), cb)
			},
			status: http.StatusBadRequest, says: "not started in this browser", reason: "no_flow",
		},
		{
			name: "wrong audience",
			run: func(t *testing.T, s *webtest.Server, c *http.Client) (*http.Response, string) {
				s.OIDC.Tweak(func(claims map[string]any) { claims["aud"] = "another-app" })
				return s.SignInWith(t, c, webtest.Identity("eve@example.test", "Eve"))
			},
			status: http.StatusUnauthorized, says: "wrong audience", reason: "wrong_audience",
		},
		{
			name: "expired ID token",
			run: func(t *testing.T, s *webtest.Server, c *http.Client) (*http.Response, string) {
				s.OIDC.Tweak(func(claims map[string]any) {
					claims["iat"] = time.Now().Add(-2 * time.Hour).Unix()
					claims["exp"] = time.Now().Add(-time.Hour).Unix()
				})
				return s.SignInWith(t, c, webtest.Identity("eve@example.test", "Eve"))
			},
			status: http.StatusUnauthorized, says: "has already expired", reason: "token_expired",
		},
		{
			name: "wrong issuer",
			run: func(t *testing.T, s *webtest.Server, c *http.Client) (*http.Response, string) {
				s.OIDC.Tweak(func(claims map[string]any) { claims["iss"] = "https://elsewhere.example" })
				return s.SignInWith(t, c, webtest.Identity("eve@example.test", "Eve"))
			},
			status: http.StatusUnauthorized, says: "another provider", reason: "wrong_issuer",
		},
		{
			name: "nonce mismatch",
			run: func(t *testing.T, s *webtest.Server, c *http.Client) (*http.Response, string) {
				s.OIDC.Tweak(func(claims map[string]any) { claims["nonce"] = "replayed-nonce" })
				return s.SignInWith(t, c, webtest.Identity("eve@example.test", "Eve"))
			},
			status: http.StatusUnauthorized, says: "nonce does not match", reason: "nonce_mismatch",
		},
		{
			name: "code reused",
			run: func(t *testing.T, s *webtest.Server, c *http.Client) (*http.Response, string) {
				cb := s.Authorize(t, c, s.StartOIDC(t, c), webtest.Identity("eve@example.test", "Eve"))
				if resp, _ := s.Follow(t, c, cb); resp.StatusCode != http.StatusSeeOther {
					t.Fatalf("first use of the code = %d, want 303", resp.StatusCode)
				}
				// A second browser starts its own flow and presents the used
				// code with its own, valid state.
				other := s.NewClient()
				fresh, _ := url.Parse(s.StartOIDC(t, other))
				return s.Follow(t, other, replaceParam(t, cb, "state", fresh.Query().Get("state")))
			},
			status: http.StatusBadRequest, says: "expired or was already used", reason: "code_rejected",
		},
		{
			name: "provider refuses",
			run: func(t *testing.T, s *webtest.Server, c *http.Client) (*http.Response, string) {
				s.OIDC.FailAuthorization("access_denied")
				return s.SignInWith(t, c, webtest.Identity("eve@example.test", "Eve"))
			},
			status: http.StatusUnauthorized, says: "refused the sign-in", reason: "provider_error",
		},
		{
			name: "provider down before the sign-in",
			run: func(t *testing.T, s *webtest.Server, c *http.Client) (*http.Response, string) {
				s.OIDC.SetDown(true)
				return s.Follow(t, c, s.URL+"/login/oidc")
			},
			status: http.StatusServiceUnavailable, says: "could not be reached", reason: "provider_unreachable",
		},
		{
			name: "provider down during the code exchange",
			run: func(t *testing.T, s *webtest.Server, c *http.Client) (*http.Response, string) {
				cb := s.Authorize(t, c, s.StartOIDC(t, c), webtest.Identity("eve@example.test", "Eve"))
				s.OIDC.SetDown(true)
				return s.Follow(t, c, cb)
			},
			status: http.StatusServiceUnavailable, says: "could not be reached", reason: "provider_unreachable",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := webtest.Start(t)
			c := s.NewClient()
			resp, body := tc.run(t, s, c)
			if resp.StatusCode != tc.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tc.status)
			}
			if !strings.Contains(body, tc.says) || !strings.Contains(body, "Sign in to Skali Studio") {
				t.Errorf("page does not say %q on the sign-in page:\n%s", tc.says, pageMain(body))
			}
			for _, leak := range []string{"goroutine", ".go:", "panic"} {
				if strings.Contains(body, leak) {
					t.Errorf("page shows %q (a stack trace or internals)", leak)
				}
			}
			id := resp.Header.Get("X-Request-Id")
			logs := s.Logs.String()
			if !strings.Contains(logs, "sign-in failed") || !strings.Contains(logs, "request_id="+id) || !strings.Contains(logs, "reason="+tc.reason) {
				t.Errorf("logs lack the failure with request id %s and reason %s", id, tc.reason)
			}
			if n := countAuditReason(t, s, tc.reason); n < 1 {
				t.Errorf("no sign-in.failed audit record with reason %s", tc.reason)
			}
			if status, _ := s.Get(t, s.NewClient(), "/"); status != http.StatusSeeOther {
				t.Errorf("a fresh client is signed in?")
			}
			if tc.reason != "code_rejected" {
				if status, _ := s.Get(t, c, "/"); status != http.StatusSeeOther {
					t.Errorf("after a failed sign-in GET / = %d, want 303 to sign-in", status)
				}
			}
			assertNoSecretsInLogs(t, s)
		})
	}
}

func TestOIDCFlowIsSingleUse(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	c := s.NewClient()
	cb := s.Authorize(t, c, s.StartOIDC(t, c), webtest.Identity("ada@example.test", "Ada"))
	if resp, _ := s.Follow(t, c, cb); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first callback = %d, want 303", resp.StatusCode)
	}
	// The same callback again, in the same browser: the flow is gone.
	resp, body := s.Follow(t, c, cb)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "already completed") {
		t.Errorf("replayed callback = %d, want 400 saying the sign-in was already completed", resp.StatusCode)
	}
}

func TestOIDCProviderDownAtStartRecovers(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	s.OIDC.SetDown(true)
	c := s.NewClient()
	if resp, _ := s.Follow(t, c, s.URL+"/login/oidc"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("sign-in while the provider is down = %d, want 503", resp.StatusCode)
	}
	s.OIDC.SetDown(false)
	s.SignInAs(t, "ada@example.test", "Ada")
}

func TestOIDCOffWithoutIssuer(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithoutOIDC())
	status, body := s.Get(t, s.NewClient(), "/login")
	if status != http.StatusOK || strings.Contains(body, "/login/oidc") {
		t.Errorf("sign-in page without an issuer = %d and offers OIDC: %v", status, strings.Contains(body, "/login/oidc"))
	}
	if status, _ := s.Get(t, s.NewClient(), "/login/oidc"); status != http.StatusNotFound {
		t.Errorf("GET /login/oidc without an issuer = %d, want 404", status)
	}
}

func TestOIDCDiscoveryFailureDoesNotStopTheStudio(t *testing.T) {
	t.Parallel()
	// An issuer nobody answers at: the Studio still serves, and the sign-in
	// page explains.
	s := webtest.Start(t, func(d *web.Deps) { d.OIDCIssuer = "http://127.0.0.1:1" })
	status, body := s.Get(t, s.NewClient(), "/login/oidc")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "could not be reached") {
		t.Errorf("GET /login/oidc with an unreachable issuer = %d, want 503 saying so", status)
	}
	if status, _ := s.Get(t, s.NewClient(), "/healthz"); status != http.StatusOK {
		t.Errorf("healthz = %d", status)
	}
}

func replaceParam(t *testing.T, raw, key, value string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func countAudit(t *testing.T, s *webtest.Server, action string) int {
	t.Helper()
	var n int
	if err := s.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE action = $1`, action).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func countAuditReason(t *testing.T, s *webtest.Server, reason string) int {
	t.Helper()
	var n int
	if err := s.DB.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM audit_events WHERE action = 'sign-in.failed' AND detail->>'reason' = $1`, reason).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// assertNoSecretsInLogs checks that the client secret and anything shaped
// like a JWT never reach the logs.
func assertNoSecretsInLogs(t *testing.T, s *webtest.Server) {
	t.Helper()
	logs := s.Logs.String()
	if strings.Contains(logs, webtest.OIDCClientSecret) {
		t.Error("the client secret appears in the logs")
	}
	if strings.Contains(logs, "eyJ") {
		t.Error("something shaped like a JWT appears in the logs")
	}
	if strings.Contains(logs, "code=") {
		t.Error("an authorization code appears in the logs")
	}
}

func pageMain(body string) string {
	if i := strings.Index(body, "<main"); i >= 0 {
		body = body[i:]
	}
	if len(body) > 800 {
		body = body[:800]
	}
	return body
}
