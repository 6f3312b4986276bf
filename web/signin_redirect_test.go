package web_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

// TestSignInReturnsOnlyToPagesOfThisStudio runs the page to return to
// (next) through both sign-ins over real HTTP — the OIDC flow against the
// test provider, and the local link after a sign-in that was started with
// next — with the cases on which browsers' URL parsers differ from a naive
// check. A next that leads anywhere but a page of this Studio, as a browser
// would read the redirect, must land on the home page.
func TestSignInReturnsOnlyToPagesOfThisStudio(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	self, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	host := self.Host                  // 127.0.0.1:PORT
	evil := "127.0.0.2:" + self.Port() // another site
	cases := []struct{ name, next, want string }{
		{"the home page", "/", "/"},
		{"a page", "/projects/hello-world", "/projects/hello-world"},
		{"a page with a query", "/projects/hello-world?tab=runs&x=1", "/projects/hello-world?tab=runs&x=1"},
		{"unicode path", "/projects/café", "/projects/caf%C3%A9"},
		{"query with spaces and quotes", `/x?a=b c"<>`, "/x?a=b%20c%22%3C%3E"},
		{"dot segment", "/./projects", "/projects"},
		{"dot-dot segment", "/a/../projects", "/projects"},
		{"encoded tab stays a path", "/%09/" + evil + "/x", "/%09/" + evil + "/x"},
		{"encoded backslash stays a path", "/%5C" + evil + "/x", "/%5C" + evil + "/x"},
		{"encoded slash stays a path", "/%2F/" + evil + "/x", "/%2F/" + evil + "/x"},
		{"userinfo-looking path", "/@" + evil + "/x", "/@" + evil + "/x"},
		{"fullwidth solidus stays a path", "/／" + evil, "/%EF%BC%8F" + evil},
		{"dot-dot then // stays on this Studio", "/a/..//" + evil + "/x", "/" + evil + "/x"},
		{"this Studio's own absolute URL", "http://" + host + "/projects?x=1", "/projects?x=1"},

		{"tab between slashes (measured)", "/\t/" + evil + "/x", "/"},
		{"leading //", "//" + evil + "/x", "/"},
		{"/\\", "/\\" + evil + "/x", "/"},
		{"\\\\", "\\\\" + evil + "/x", "/"},
		{"\\/", "\\/" + evil + "/x", "/"},
		{"newline between slashes", "/\n/" + evil + "/x", "/"},
		{"CR LF between slashes", "/\r\n/" + evil + "/x", "/"},
		{"leading newline", "\n//" + evil + "/x", "/"},
		{"leading space", " //" + evil + "/x", "/"},
		{"leading C0 control", "\x01//" + evil + "/x", "/"},
		{"trailing tab", "//" + evil + "/x\t", "/"},
		{"dot segment then //", "/.//" + evil + "/x", "/"},
		{"percent-encoded //", "%2F%2F" + evil + "/x", "/"},
		{"https:host", "https:" + evil + "/x", "/"},
		{"http:host", "http:" + evil + "/x", "/"},
		{"http:///host", "http:///" + evil + "/x", "/"},
		{"https:foo", "https:foo", "/"},
		{"javascript:", "javascript:alert(1)", "/"},
		{"javascript: mixed case, leading space", " JavaScript:alert(1)", "/"},
		{"javascript: with a tab inside", "java\tscript:alert(1)", "/"},
		{"data:", "data:text/html,<script>alert(1)</script>", "/"},
		{"another site", "http://" + evil + "/x", "/"},
		{"this Studio over another scheme", "https://" + host + "/projects", "/"},
		{"userinfo of this host", "http://" + host + "@" + evil + "/x", "/"},
		{"scheme-relative userinfo", "//" + host + "@" + evil + "/x", "/"},
		{"backslash before @", "http://" + evil + "\\@" + host + "/x", "/"},
		{"fullwidth host", "//ｅvil.example/x", "/"},
		{"ideographic space first", "\u3000//" + evil + "/x", "/"},
		{"relative path", "projects", "/"},
		{"query only", "?x=1", "/"},
		{"fragment only", "#x", "/"},
		{"too long", strings.Repeat("/a", 1100), "/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := s.URL + "/login/oidc?" + url.Values{"next": {tc.next}}.Encode()

			// The sign-in page carries next into its OIDC button only when
			// it is a page of this Studio.
			_, page := s.Get(t, s.NewClient(), "/login?"+url.Values{"next": {tc.next}}.Encode())
			link := html.EscapeString("/login/oidc?" + url.Values{"next": {tc.want}}.Encode())
			if tc.want == "/" && strings.Contains(page, "/login/oidc?next=") {
				t.Errorf("sign-in page carries next %q into its OIDC link, want the plain link", tc.next)
			} else if tc.want != "/" && !strings.Contains(page, link) {
				t.Errorf("sign-in page lacks the OIDC link %s", link)
			}

			// OIDC: next is remembered when the sign-in starts.
			c := s.NewClient()
			resp, body := s.Follow(t, c, start)
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("start = %d, want 303: %s", resp.StatusCode, body)
			}
			callback := s.Authorize(t, c, resp.Header.Get("Location"), webtest.Identity("ada@example.test", "Ada Lovelace"))
			resp, _ = s.Follow(t, c, callback)
			checkLanding(t, "OIDC callback", resp, tc.want, host)

			// Local link: a sign-in started with next and finished with the
			// one-time link instead.
			c = s.NewClient()
			if resp, _ := s.Follow(t, c, start); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("start = %d, want 303", resp.StatusCode)
			}
			resp, _ = s.Follow(t, c, s.LocalLoginURL(t))
			checkLanding(t, "local link", resp, tc.want, host)
		})
	}
}

// checkLanding checks a sign-in's answer: 303 to want, and a Location that
// a browser, cleaning it the way the WHATWG URL parser does, resolves to
// this Studio.
func checkLanding(t *testing.T, what string, resp *http.Response, want, host string) {
	t.Helper()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || loc != want {
		t.Errorf("%s = %d to %q, want 303 to %q", what, resp.StatusCode, loc, want)
	}
	cleaned := strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\r':
			return -1
		case '\\':
			return '/'
		}
		return r
	}, strings.TrimFunc(loc, func(r rune) bool { return r <= 0x20 }))
	base, _ := url.Parse("http://" + host + "/login/oidc/callback")
	ref, err := url.Parse(cleaned)
	if err != nil || !strings.HasPrefix(cleaned, "/") || strings.HasPrefix(cleaned, "//") || base.ResolveReference(ref).Host != host {
		t.Errorf("%s sends the browser to %q, which it reads as another site", what, loc)
	}
}
