package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// TestAnAdminOfOneProjectCannotTakeAnotherProjectsLiveHostname is the
// attack of issue 35: Mallory, an admin of team-shop's production, sets
// her APP_DOMAIN to the hostname team-wiki's production serves and tries
// to deploy it, on the plan page, the deploy form and the API. Each is
// refused with a sentence that names no holder; the installation admin
// reads which environment holds it, and moves the claim to Mallory's
// environment by typing the hostname, with an audit record.
func TestAnAdminOfOneProjectCannotTakeAnotherProjectsLiveHostname(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{Resolver: dns}))
	admin := s.SignInLocal(t)
	const live = "shop.example.test"
	const wikiPath = "/projects/team-wiki/environments/production"
	const shopPath = "/projects/team-shop/environments/production"
	s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	shop := s.CreateEnvironment(t, strings.Replace(exampleManifest(t, "production"), "name: team-wiki", "name: team-shop", 1), "production")
	s.AddMember(t, shop, "mallory@example.test", store.RoleAdmin)
	dns.Set(live, "127.0.0.1")

	setValues := func(c *http.Client, envPath string) {
		t.Helper()
		for name, value := range map[string]string{"APP_DOMAIN": live, "SESSION_SECRET": "plaintext-of-a-secret"} {
			if resp, _ := s.PostForm(t, c, envPath+"/values", url.Values{"name": {name}, "value": {value}}); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("set %s on %s: %d", name, envPath, resp.StatusCode)
			}
		}
	}
	setValues(admin, wikiPath)
	resp, _ := s.PostForm(t, admin, wikiPath+"/deploys", url.Values{})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("team-wiki's deploy: %d", resp.StatusCode)
	}
	waitForRun(t, s, admin, resp.Header.Get("Location"))

	mallory := s.SignInAs(t, "mallory@example.test", "Mallory")
	setValues(mallory, shopPath)
	const refused = live + " is served by another environment of this installation"
	const holder = "team-wiki / production"

	// The plan page: refused, the button off, no holder named.
	status, page := s.Get(t, mallory, shopPath+"/deploys/new")
	if status != http.StatusOK || !strings.Contains(page, refused+".") || strings.Contains(page, holder) {
		t.Fatalf("Mallory's plan: %d, want the refusal without its holder:\n%s", status, pageMain(page))
	}
	if !strings.Contains(page, `type="submit" disabled>Deploy</button>`) {
		t.Fatalf("Mallory's plan offers the deploy button:\n%s", pageMain(page))
	}
	// The deploy form.
	resp, body := s.PostForm(t, mallory, shopPath+"/deploys", url.Values{"revision": {"1"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "This deploy is refused: "+refused) || strings.Contains(body, holder) {
		t.Fatalf("Mallory's deploy: %d, want 422 with the refusal and no holder:\n%s", resp.StatusCode, pageMain(body))
	}
	// The API, with Mallory's own token.
	_, token := s.CreateToken(t, mallory, "ci", "30", "team-shop/production:admin")
	resp, body = apiCall(t, s, nil, token, "GET", "/api/v1"+shopPath+"/plan", nil)
	var plan struct {
		CanStart bool     `json:"can_start"`
		Refused  []string `json:"refused"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &plan) != nil || plan.CanStart ||
		!strings.Contains(strings.Join(plan.Refused, "\n"), refused+".") || strings.Contains(body, holder) {
		t.Fatalf("API plan: %d %s", resp.StatusCode, body)
	}
	resp, body = apiCall(t, s, nil, token, "POST", "/api/v1"+shopPath+"/deploys", map[string]any{})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("API deploy: %d %s", resp.StatusCode, body)
	}
	if d := problemDetail(t, resp, body); !strings.Contains(d, refused) || strings.Contains(d, holder) {
		t.Fatalf("API deploy's problem: %q", d)
	}
	if runs, err := s.DB.Runs(context.Background(), shop.ID, 10); err != nil || len(runs) != 0 {
		t.Fatalf("the refused deploys created %d runs (%v)", len(runs), err)
	}

	// The installation admin reads which environment holds it.
	if _, page := s.Get(t, admin, shopPath+"/deploys/new"); !strings.Contains(page, refused+" (held by "+holder+").") {
		t.Fatalf("the installation admin's plan does not name the holder:\n%s", pageMain(page))
	}
	resp, body = s.PostForm(t, admin, shopPath+"/deploys", url.Values{})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, refused+" (held by "+holder+").") {
		t.Fatalf("the installation admin's deploy: %d:\n%s", resp.StatusCode, pageMain(body))
	}

	// The claims on the installation page: the admin's only.
	status, page = s.Get(t, admin, "/admin")
	if status != http.StatusOK || !strings.Contains(page, "<code>"+live+"</code>") || !strings.Contains(page, holder) {
		t.Fatalf("admin page: %d\n%s", status, pageMain(page))
	}
	if status, _ := s.Get(t, mallory, "/admin"); status != http.StatusForbidden {
		t.Fatalf("Mallory reads the admin page: %d", status)
	}
	move := url.Values{"hostname": {live}, "environment": {strconv.FormatInt(shop.ID, 10)}, "confirm": {live}}
	if resp, _ := s.PostForm(t, mallory, "/admin/hostnames/move", move); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("Mallory moves the claim: %d", resp.StatusCode)
	}
	// A wrong confirmation moves nothing.
	wrong := url.Values{"hostname": {live}, "environment": {strconv.FormatInt(shop.ID, 10)}, "confirm": {"shop.example"}}
	resp, body = s.PostForm(t, admin, "/admin/hostnames/move", wrong)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Type the hostname, "+live+", to confirm the move.") {
		t.Fatalf("move without the typed hostname: %d\n%s", resp.StatusCode, pageMain(body))
	}
	if _, page := s.Get(t, mallory, shopPath+"/deploys/new"); !strings.Contains(page, refused) {
		t.Fatal("a refused move moved the claim")
	}
	// The environment is typed, not chosen among every environment.
	if strings.Contains(page, `<option value="`+strconv.FormatInt(shop.ID, 10)+`"`) || !strings.Contains(page, `id="move-environment" name="environment"`) {
		t.Fatal("the move form lists the environments instead of a typed field")
	}
	unknown := url.Values{"hostname": {live}, "environment": {"team-shop/nowhere"}, "confirm": {live}}
	resp, body = s.PostForm(t, admin, "/admin/hostnames/move", unknown)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "No environment is named team-shop/nowhere") ||
		!strings.Contains(body, `value="team-shop/nowhere"`) {
		t.Fatalf("move to an unknown environment: %d\n%s", resp.StatusCode, pageMain(body))
	}
	typed := url.Values{"hostname": {live}, "environment": {"team-shop / production"}, "confirm": {live}}
	resp, _ = s.PostForm(t, admin, "/admin/hostnames/move", typed)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("move: %d", resp.StatusCode)
	}
	if _, page := s.Get(t, admin, "/admin"); !strings.Contains(page, "team-shop / production") {
		t.Fatalf("after the move the admin page does not show team-shop as the holder:\n%s", pageMain(page))
	}
	recs, _, err := s.DB.AuditEvents(context.Background(), store.AuditQuery{All: true, Action: "hostname.moved", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Target != live || fmt.Sprint(recs[0].Detail["from"]) != holder || fmt.Sprint(recs[0].Detail["to"]) != "team-shop / production" {
		t.Fatalf("audit records %+v", recs)
	}

	// Now Mallory's environment holds it, and team-wiki's plan is refused.
	if status, page := s.Get(t, mallory, shopPath+"/deploys/new"); status != http.StatusOK || strings.Contains(page, refused) {
		t.Fatalf("Mallory's plan after the move: %d\n%s", status, pageMain(page))
	}
	if _, page := s.Get(t, admin, wikiPath+"/deploys/new"); !strings.Contains(page, refused+" (held by team-shop / production).") {
		t.Fatalf("team-wiki's plan after the move:\n%s", pageMain(page))
	}
}
