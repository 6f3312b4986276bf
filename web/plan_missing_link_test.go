package web_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

// TestThePlansMissingValueLinkLandsOnItsRow: each missing value of a plan
// links to the values page at that value's row.
func TestThePlansMissingValueLinkLandsOnItsRow(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	admin := s.SignInLocal(t)
	_, plan := s.Get(t, admin, wikiEnv+"/deploys/new")
	links := regexp.MustCompile(`<li><a href="(`+regexp.QuoteMeta(wikiEnv)+`/values#value-([A-Z_]+))">`).FindAllStringSubmatch(plan, -1)
	if len(links) != 2 {
		t.Fatalf("the plan links %d missing values, want 2 (APP_DOMAIN, SESSION_SECRET)", len(links))
	}
	_, values := s.Get(t, admin, wikiEnv+"/values")
	for _, l := range links {
		if !strings.Contains(values, `<tr id="value-`+l[2]+`" data-name="`+l[2]+`"`) {
			t.Errorf("the values page has no row for %s to land on", l[1])
		}
	}
}

// TestTheRoutedApplicationIsListedFirst: orders' worker sorts before its
// api by name, but the api, which has the route, is listed first.
func TestTheRoutedApplicationIsListedFirst(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	manifest := strings.ReplaceAll(exampleManifest(t, "two-applications"), "  api:\n", "  web:\n")
	manifest = strings.ReplaceAll(manifest, "  worker:\n", "  billing:\n")
	s.CreateEnvironment(t, manifest, "production")
	admin := s.SignInLocal(t)
	_, page := s.Get(t, admin, "/projects/orders/environments/production")
	web, billing := strings.Index(page, "<h3>web</h3>"), strings.Index(page, "<h3>billing</h3>")
	if web < 0 || billing < 0 || web > billing {
		t.Errorf("applications listed web at %d, billing at %d: want web (routed) first", web, billing)
	}
}
