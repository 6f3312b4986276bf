package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

// TestABadNewProjectShowsEachErrorOnce: the 422 page after a manifest with
// two errors counts them, lists each once with a link to its line, and
// marks those lines in the source without repeating the messages.
func TestABadNewProjectShowsEachErrorOnce(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	c := s.SignInLocal(t)
	resp, body := s.PostForm(t, c, "/projects", url.Values{"manifest": {"name: Bad_Name\napplications:\n  web:\n    image: nginx\n    bogus: 1\n"}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a bad manifest = %d, want 422", resp.StatusCode)
	}
	text := html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(body[strings.Index(body, "<main"):], ""))
	for _, msg := range []string{"project name Bad_Name must start with a lowercase letter", "unknown field bogus"} {
		if n := strings.Count(text, msg); n != 1 {
			t.Errorf("%q appears %d times on the page, want once", msg, n)
		}
	}
	if !strings.Contains(text, "2 errors") || !strings.Contains(body, `class="source-line has-error"`) {
		t.Errorf("the page should count the errors and mark their lines")
	}
}
