package webtest

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var tokenSecret = regexp.MustCompile(`<code data-token-secret="(\d+)">(skst_[A-Za-z0-9_-]+)</code>`)

// CreateToken creates a token on the tokens page as c, as a person would,
// and returns its id and the secret the page shows once.
func (s *Server) CreateToken(tb testing.TB, c *http.Client, name, days string, scope ...string) (int64, string) {
	tb.Helper()
	resp, body := s.PostForm(tb, c, "/tokens", url.Values{"name": {name}, "scope": scope, "expires": {days}})
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/tokens?created=") {
		tb.Fatalf("create token %s = %d (Location %q):\n%s", name, resp.StatusCode, resp.Header.Get("Location"), excerpt(body))
	}
	status, page := s.Get(tb, c, resp.Header.Get("Location"))
	m := tokenSecret.FindStringSubmatch(page)
	if status != http.StatusOK || m == nil {
		tb.Fatalf("the page after creating %s = %d and shows no secret:\n%s", name, status, excerpt(page))
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	if "/tokens?created="+m[1] != resp.Header.Get("Location") {
		tb.Fatalf("the page shows token %s, want %s", m[1], resp.Header.Get("Location"))
	}
	// Shown once: the same address no longer shows it.
	if _, again := s.Get(tb, c, resp.Header.Get("Location")); strings.Contains(again, m[2]) {
		tb.Fatalf("the secret of %s is shown a second time", name)
	}
	return id, m[2]
}
