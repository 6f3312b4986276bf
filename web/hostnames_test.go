package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
)

// TestAValueCannotBeReadThroughAHostname reproduces the attack of an admin
// of staging who puts production's SESSION_SECRET into an alias of a new
// revision, hoping that a viewer of production (or they themselves, through
// any page) reads it expanded. Hostnames are resolved only for the revision
// active in an environment, which that environment's own deployers chose:
// before a deploy, and for a newer revision not yet deployed, pages show
// the expression and whether its values are set.
func TestAValueCannotBeReadThroughAHostname(t *testing.T) {
	t.Parallel()
	for _, deployed := range []bool{false, true} {
		name := "never deployed"
		if deployed {
			name = "revision 1 deployed"
		}
		t.Run(name, func(t *testing.T) {
			s, prod := wikiServer(t)
			staging := s.CreateEnvironment(t, exampleManifest(t, "production"), "staging")
			s.AddMember(t, prod, "vera@example.com", store.RoleViewer)
			s.AddMember(t, staging, "mallory@example.com", store.RoleAdmin)
			admin := s.SignInLocal(t)
			const secret, domain = "9f86d081884c7d659a2feaa0c55ad015", "wiki.example.com"
			for n, v := range map[string]string{"SESSION_SECRET": secret, "APP_DOMAIN": domain} {
				if resp, _ := s.PostForm(t, admin, envPath+"/values", url.Values{"name": {n}, "value": {v}}); resp.StatusCode != http.StatusSeeOther {
					t.Fatalf("set %s = %d, want 303", n, resp.StatusCode)
				}
			}
			if deployed {
				s.ActivateRevision(t, "team-wiki", "production", 1)
			}
			mallory := s.SignInAs(t, "mallory@example.com", "Mallory")
			attack := strings.Replace(exampleManifest(t, "production"), `domain: "${APP_DOMAIN}"`,
				`domain: "${APP_DOMAIN}"`+"\n        aliases: [\"${SESSION_SECRET}.x.example\"]", 1)
			if resp, body := s.PostForm(t, mallory, "/projects/team-wiki/revisions", url.Values{"manifest": {attack}}); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("staging admin adds a revision = %d, want 303:\n%s", resp.StatusCode, body)
			}
			vera := s.SignInAs(t, "vera@example.com", "Vera")
			pages := []string{envPath, envPath + "/values", "/projects/team-wiki", "/projects/team-wiki/environments/staging", "/audit", "/"}
			for who, c := range map[string]*http.Client{"viewer of production": vera, "admin of staging": mallory, "installation admin": admin} {
				for _, p := range pages {
					_, body := s.Get(t, c, p)
					if strings.Contains(body, secret) {
						t.Errorf("%s reads SESSION_SECRET on %s", who, p)
					}
				}
			}
			_, page := s.Get(t, vera, envPath)
			if deployed {
				if !strings.Contains(page, domain) {
					t.Errorf("the deployed revision's hostname %s is not shown to a viewer", domain)
				}
				if strings.Contains(page, "x.example") {
					t.Errorf("the environment page shows the alias of revision 2, which is not deployed here")
				}
			} else {
				if strings.Contains(page, domain) {
					t.Errorf("before the first deploy the page resolves ${APP_DOMAIN} to %s; want the expression", domain)
				}
				if !strings.Contains(page, "${SESSION_SECRET}.x.example") || !strings.Contains(page, "values set · shown after deploy") {
					t.Errorf("before the first deploy the page should show the expression and that its values are set")
				}
			}
		})
	}
}
