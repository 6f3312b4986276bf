package web_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

// TestRunPagesNameRunsByTheirNumberInTheirEnvironment: runs of two
// environments, interleaved, are named "#N of ENV" on the run page (its
// title, heading line and breadcrumb) and "#N" in the environment's lists,
// each environment counting on its own, while URLs keep the global id.
func TestRunPagesNameRunsByTheirNumberInTheirEnvironment(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	prod := s.CreateEnvironment(t, "", "production")
	staging := s.CreateEnvironment(t, "", "staging")
	c := s.SignInLocal(t)
	s.CreateRun(t, staging, "reconcile")
	s.CreateRun(t, prod, "reconcile")
	second := s.CreateRun(t, staging, "reconcile")
	const base = "/projects/hello-world/environments/"
	runURL := base + "staging/runs/" + strconv.FormatInt(second, 10)

	status, page := s.Get(t, c, runURL)
	if status != http.StatusOK {
		t.Fatalf("GET %s = %d", runURL, status)
	}
	for _, want := range []string{"<title>Run #2 of staging · hello-world", "Run #2 of staging</span>", `<span aria-current="page">#2</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page of staging's second run lacks %q", want)
		}
	}
	_, list := s.Get(t, c, base+"staging/runs")
	if !strings.Contains(list, `href="`+runURL+`">#2</a>`) {
		t.Errorf("staging's runs list does not name its second run #2 (linking its id)")
	}
	_, env := s.Get(t, c, base+"production")
	if !strings.Contains(env, `<span class="run-number">#1</span>`) || strings.Contains(env, `<span class="run-number">#2</span>`) {
		t.Errorf("production's page does not name its only run #1")
	}
}
