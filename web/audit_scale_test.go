package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestAuditEnvironmentFilterIsTypedPastAHundredEnvironments: with more
// environments than a list can offer, the audit log asks for the
// environment as project/environment text instead of listing them all,
// and filters by what is typed, an environment past the first hundred too
// (an admin's page reads only as many as a list could offer).
func TestAuditEnvironmentFilterIsTypedPastAHundredEnvironments(t *testing.T) {
	t.Parallel()
	s := withEnvironments(t, 103)
	admin := s.SignInLocal(t)
	_, page := s.Get(t, admin, "/audit")
	if !strings.Contains(page, `type="search" id="audit-environment" name="environment"`) || strings.Contains(page, `<option value="hello-world/env-050"`) {
		t.Fatalf("the audit log of 103 environments does not ask for the environment as text, or lists them all")
	}
	status, page := s.Get(t, admin, "/audit?environment=hello-world%2Fenv-050")
	if status != http.StatusOK || !strings.Contains(page, "env-050") || strings.Contains(page, "env-051") {
		t.Errorf("filtering by hello-world/env-050: %d, or it shows other environments' records", status)
	}
	status, page = s.Get(t, admin, "/audit?environment=hello-world%2Fenv-102")
	if status != http.StatusOK || !strings.Contains(page, "env-102") || strings.Contains(page, "env-101") {
		t.Errorf("filtering by hello-world/env-102, the last environment: %d, or it shows other environments' records", status)
	}
	if status, _ := s.Get(t, admin, "/audit?environment=hello-world%2Fnone"); status < 400 || status >= 500 {
		t.Errorf("filtering by an environment that does not exist: %d, want a 4xx", status)
	}
}

// TestProjectPageListsItsEnvironmentsAPageAtATime: a project of 55
// environments lists them 50 to a page, by name, with links between the
// pages; a page past the last is not found.
func TestProjectPageListsItsEnvironmentsAPageAtATime(t *testing.T) {
	t.Parallel()
	s := withEnvironments(t, 55)
	admin := s.SignInLocal(t)
	link := func(env string) string { return `href="/projects/hello-world/environments/` + env + `"` }
	status, page := s.Get(t, admin, "/projects/hello-world")
	if status != http.StatusOK || !strings.Contains(page, link("env-000")) || !strings.Contains(page, link("env-049")) || strings.Contains(page, link("env-050")) {
		t.Fatalf("the first page (%d) does not list exactly the first 50 environments by name", status)
	}
	if !strings.Contains(page, "Environments 1–50") || !strings.Contains(page, `href="/projects/hello-world?page=2#environments" rel="next"`) || strings.Contains(page, `rel="prev"`) {
		t.Errorf("the first page does not say which environments it lists or link the next page:\n%s", pageMain(page))
	}
	status, page = s.Get(t, admin, "/projects/hello-world?page=2")
	if status != http.StatusOK || !strings.Contains(page, link("env-050")) || !strings.Contains(page, link("env-054")) || strings.Contains(page, link("env-049")) {
		t.Fatalf("the second page (%d) does not list exactly environments 51 to 55", status)
	}
	if !strings.Contains(page, "Environments 51–55") || !strings.Contains(page, `href="/projects/hello-world#environments" rel="prev"`) || strings.Contains(page, `rel="next"`) {
		t.Errorf("the last page does not say which environments it lists or link the previous page:\n%s", pageMain(page))
	}
	if status, _ := s.Get(t, admin, "/projects/hello-world?page=3"); status != http.StatusNotFound {
		t.Errorf("a page past the last: %d, want 404", status)
	}
}

// TestBrowserProjectPageOfManyEnvironments: a person pages through the
// environments of a project of 55 with the pager's links.
func TestBrowserProjectPageOfManyEnvironments(t *testing.T) {
	t.Parallel()
	s := withEnvironments(t, 55)
	b := browsertest.New(t)
	b.Do(
		chromedp.Navigate(s.LocalLoginURL(t)),
		chromedp.WaitVisible(chromedp.CSS("h1")),
		chromedp.Navigate(s.URL+"/projects/hello-world"),
		chromedp.WaitVisible(chromedp.CSS(`#environments nav.pager a[rel="next"]`)),
	)
	b.Screenshot("project-environments-page-1")
	b.Do(
		chromedp.Click(chromedp.CSS(`#environments nav.pager a[rel="next"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#environments nav.pager a[rel="prev"]`)),
	)
	if got := b.Text("#environments tbody tr:first-child td:first-child"); got != "env-050" {
		t.Errorf("the second page starts with %q, want env-050", got)
	}
	// The link lands on the list, its heading in sight below the top bar.
	if below := browsertest.Eval[bool](b, `document.querySelector("#environments h2").getBoundingClientRect().top >= document.querySelector(".topbar").getBoundingClientRect().bottom`); !below {
		t.Errorf("the second page's Environments heading is hidden under the top bar")
	}
	b.Screenshot("project-environments-page-2")
	// On a phone the pager fits the screen.
	b.Do(chromedp.EmulateViewport(390, 844))
	if extra, culprits := b.Overflow(); extra > 0 {
		t.Errorf("at 390 px the page is %d px wider than the screen: %s", extra, culprits)
	}
	b.Screenshot("project-environments-page-2-390")
}

// withEnvironments starts a Studio whose project hello-world has n
// environments, env-000 onwards.
func withEnvironments(t *testing.T, n int) *webtest.Server {
	t.Helper()
	s := webtest.Start(t)
	for i := range n {
		s.CreateEnvironment(t, "", fmt.Sprintf("env-%03d", i))
	}
	return s
}

// TestHomeListsProjectsAPageAtATime: 31 projects are two pages of the
// home page, linked both ways, each saying which page it is.
func TestHomeListsProjectsAPageAtATime(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	for i := range 31 {
		s.CreateEnvironment(t, strings.Replace(webtest.MinimalManifest, "name: hello-world", fmt.Sprintf("name: p-%02d", i), 1), "production")
	}
	admin := s.SignInLocal(t)
	_, first := s.Get(t, admin, "/")
	if !strings.Contains(first, `href="/projects/p-29"`) || strings.Contains(first, `href="/projects/p-30"`) ||
		!strings.Contains(first, "Page 1") || !strings.Contains(first, `href="/?page=2" rel="next"`) || strings.Contains(first, `rel="prev"`) {
		t.Errorf("the first page of 31 projects does not list the first 30 with a link to the next:\n%s", pageMain(first))
	}
	_, second := s.Get(t, admin, "/?page=2")
	if !strings.Contains(second, `href="/projects/p-30"`) || strings.Contains(second, `href="/projects/p-29"`) ||
		!strings.Contains(second, "Page 2") || !strings.Contains(second, `href="/" rel="prev"`) || strings.Contains(second, `rel="next"`) {
		t.Errorf("the second page does not list the 31st project with a link back:\n%s", pageMain(second))
	}
}
