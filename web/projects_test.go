package web_test

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

func exampleManifest(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("../compiler/testdata/" + name + ".skali.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestProjectsEnvironmentsAndValuesAsAdmin(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithValueKeys())
	c := s.SignInLocal(t)

	resp, body := s.PostForm(t, c, "/projects", url.Values{"manifest": {exampleManifest(t, "production")}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/projects/team-wiki" {
		t.Fatalf("create project: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	status, page := s.Get(t, c, "/projects/team-wiki")
	if status != 200 || !strings.Contains(page, "first revision") {
		t.Fatalf("project page: %d\n%s", status, page)
	}
	resp, _ = s.PostForm(t, c, "/projects/team-wiki/environments", url.Values{"name": {"production"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/projects/team-wiki/environments/production" {
		t.Fatalf("create environment: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	status, page = s.Get(t, c, "/projects/team-wiki/environments/production")
	if status != 200 || !strings.Contains(page, "APP_DOMAIN") {
		t.Fatalf("environment page: %d\n%s", status, page)
	}
	resp, body = s.PostForm(t, c, "/projects/team-wiki/environments/production/values", url.Values{"name": {"APP_DOMAIN"}, "value": {"wiki.example.com"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set value: %d\n%s", resp.StatusCode, body)
	}
	status, page = s.Get(t, c, "/projects/team-wiki/environments/production")
	if status != 200 || strings.Contains(page, "wiki.example.com") || !strings.Contains(page, "values set · shown after deploy") {
		t.Fatalf("before a deploy the environment page must show the domain's expression, not its value: %d\n%s", status, page)
	}
	s.ActivateRevision(t, "team-wiki", "production", 1)
	status, page = s.Get(t, c, "/projects/team-wiki/environments/production")
	if status != 200 || !strings.Contains(page, "wiki.example.com") {
		t.Fatalf("environment page does not resolve the domain of the deployed revision: %d\n%s", status, page)
	}
	status, page = s.Get(t, c, "/projects/team-wiki/environments/production/values")
	if status != 200 || !strings.Contains(page, "required · set") || !strings.Contains(page, "required · missing") {
		t.Fatalf("values page: %d\n%s", status, page)
	}
}
