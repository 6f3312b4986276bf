package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/web/webtest"
)

// TestTopLevelPathsAreServed: every top-level address the pages link to
// through paths opens a page, and the top bar of a signed-in admin links
// to exactly those pages.
func TestTopLevelPathsAreServed(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)

	anonymous := s.NewClient()
	for _, p := range []string{paths.Login, paths.Validate} {
		if status, _ := s.Get(t, anonymous, p); status != http.StatusOK {
			t.Errorf("GET %s signed out = %d, want 200", p, status)
		}
	}

	admin := s.SignInLocal(t)
	for _, p := range []string{paths.Home, paths.Validate, paths.Audit, paths.Approvals, paths.AuditFiltered(url.Values{"action": {"sign-in"}}.Encode()), paths.Admin, paths.Tokens, paths.NewProject} {
		if status, _ := s.Get(t, admin, p); status != http.StatusOK {
			t.Errorf("GET %s as admin = %d, want 200", p, status)
		}
	}

	_, home := s.Get(t, admin, paths.Home)
	nav := regexp.MustCompile(`(?s)<nav class="nav" aria-label="Main">(.*?)</nav>`).FindStringSubmatch(home)
	if nav == nil {
		t.Fatal("the home page has no main navigation")
	}
	var got []string
	for _, m := range regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(nav[1], -1) {
		got = append(got, m[1])
	}
	want := []string{paths.Home, paths.Validate, paths.Audit, paths.Approvals, paths.Tokens, paths.Admin}
	if len(got) != len(want) {
		t.Fatalf("top bar links %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("top bar link %d = %q, want %q", i, got[i], want[i])
		}
	}

	resp, _ := s.PostForm(t, admin, paths.Logout, url.Values{})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != paths.Login {
		t.Errorf("POST %s = %d to %q, want 303 to %s", paths.Logout, resp.StatusCode, resp.Header.Get("Location"), paths.Login)
	}
}
