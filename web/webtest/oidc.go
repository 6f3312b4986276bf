package webtest

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/webtest/oidcprovider"
)

// The client credentials of the Studio at the test provider.
const (
	OIDCClientID     = "studio-test"
	OIDCClientSecret = "studio-test-secret"
)

// WithAdmins makes the people with these emails or subjects installation
// admins (STUDIO_ADMINS).
func WithAdmins(admins ...string) Option {
	return func(d *web.Deps) { d.Admins = append(d.Admins, admins...) }
}

// WithoutOIDC turns sign-in through the test provider off.
func WithoutOIDC() Option {
	return func(d *web.Deps) { d.OIDCIssuer = "" }
}

// Identity returns the provider identity of a test person: subject
// "sub-<email>", a verified email and the name.
func Identity(email, name string) oidcprovider.Identity {
	return oidcprovider.Identity{Subject: "sub-" + email, Email: email, Name: name, EmailVerified: true}
}

// SignInAs returns a new client signed in as the person with this email and
// name through the whole OpenID flow against the test provider. The first
// sign-in creates the user; make them an installation admin with WithAdmins
// or give them roles with AddMember.
func (s *Server) SignInAs(tb testing.TB, email, name string) *http.Client {
	tb.Helper()
	c := s.NewClient()
	resp, body := s.SignInWith(tb, c, Identity(email, name))
	if resp.StatusCode != http.StatusSeeOther {
		tb.Fatalf("sign in as %s: callback status %d, want 303; page: %s", email, resp.StatusCode, excerpt(body))
	}
	return c
}

// SignInWith runs the OpenID flow with c as who and returns the Studio's
// answer to the callback (303 on success, the sign-in page otherwise).
func (s *Server) SignInWith(tb testing.TB, c *http.Client, who oidcprovider.Identity) (*http.Response, string) {
	tb.Helper()
	callback := s.Authorize(tb, c, s.StartOIDC(tb, c), who)
	return s.Follow(tb, c, callback)
}

// StartOIDC starts a sign-in with c and returns the provider's
// authorization URL the Studio redirected to.
func (s *Server) StartOIDC(tb testing.TB, c *http.Client) string {
	tb.Helper()
	resp, body := s.Follow(tb, c, s.URL+"/login/oidc")
	if resp.StatusCode != http.StatusSeeOther {
		tb.Fatalf("GET /login/oidc: status %d, want 303; page: %s", resp.StatusCode, excerpt(body))
	}
	return resp.Header.Get("Location")
}

// Authorize visits the provider's authorization URL as who and returns the
// callback URL the provider redirects back to.
func (s *Server) Authorize(tb testing.TB, c *http.Client, authorizeURL string, who oidcprovider.Identity) string {
	tb.Helper()
	target, err := oidcprovider.AuthorizeURLFor(authorizeURL, who)
	if err != nil {
		tb.Fatalf("authorization URL: %v", err)
	}
	resp, body := s.Follow(tb, c, target)
	if resp.StatusCode != http.StatusFound {
		tb.Fatalf("provider authorize: status %d, want 302: %s", resp.StatusCode, excerpt(body))
	}
	return resp.Header.Get("Location")
}

// Follow GETs an absolute URL with c (without following redirects).
func (s *Server) Follow(tb testing.TB, c *http.Client, target string) (*http.Response, string) {
	tb.Helper()
	resp, err := c.Get(target)
	if err != nil {
		tb.Fatalf("GET %s: %v", redactQuery(target), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// redactQuery drops the query of a URL for failure messages: it may carry
// codes and state.
func redactQuery(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.RawQuery = ""
	return u.String()
}

func excerpt(body string) string {
	if i := strings.Index(body, "<main"); i >= 0 {
		body = body[i:]
	}
	if len(body) > 600 {
		body = body[:600]
	}
	return body
}
