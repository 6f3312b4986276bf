package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/web/webtest"
)

func freezeForm(cron, duration, action string) url.Values {
	return url.Values{"section": {"freeze"}, "freeze_cron": {cron}, "freeze_duration": {duration}, "freeze_from": {""}, "freeze_to": {""}, "freeze_action": {action}}
}

// A bad cron is refused beside its field and nothing stored changes; a
// window open now shows its countdown on the environment and protection
// pages, and a deploy in a refusing window is refused in words.
func TestFreezeWindowFormRefusesABadCronAndAFrozenEnvironmentCountsDown(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	admin := s.SignInLocal(t)
	env := s.CreateEnvironment(t, plainManifestForFreeze, "production")
	const envPath = "/projects/shop/environments/production"

	resp, body := s.PostForm(t, admin, envPath+"/protection", freezeForm("0 25 * * *", "2h", "refuse"))
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="freeze-row-error" data-field="cron"`) ||
		!strings.Contains(body, "Freeze window 1: &#34;0 25 * * *&#34; is not a cron expression: 25 is above 23") || !strings.Contains(body, `value="0 25 * * *"`) {
		t.Fatalf("bad cron: %d\n%s", resp.StatusCode, pageMain(body))
	}
	resp, body = s.PostForm(t, admin, envPath+"/protection", freezeForm("0 6 * * 1", "forever", "wait"))
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-field="duration"`) {
		t.Fatalf("bad duration: %d\n%s", resp.StatusCode, pageMain(body))
	}
	var n int
	if err := s.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM freeze_windows WHERE environment_id = $1`, env.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d windows stored after refusals (%v), want none", n, err)
	}

	// A fixed window, open now, ending in about two and a half hours.
	now := time.Now().UTC()
	fixed := url.Values{"section": {"freeze"}, "freeze_cron": {""}, "freeze_duration": {""}, "freeze_from": {now.Add(-time.Hour).Format("2006-01-02T15:04")},
		"freeze_to": {now.Add(150 * time.Minute).Format("2006-01-02T15:04")}, "freeze_action": {"refuse"}}
	if resp, body := s.PostForm(t, admin, envPath+"/protection", fixed); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save window: %d\n%s", resp.StatusCode, pageMain(body))
	}
	_, page := s.Get(t, admin, envPath)
	if !strings.Contains(page, `data-testid="frozen"`) || !strings.Contains(page, "<strong>Frozen</strong> until ") || !strings.Contains(page, " UTC,") ||
		!strings.Contains(page, ">in 2 h ") {
		t.Fatalf("environment page does not count the freeze down:\n%s", frozenPart(page))
	}
	if _, page := s.Get(t, admin, envPath+"/protection"); !strings.Contains(page, `value="`+fixed.Get("freeze_to")+`"`) || !strings.Contains(page, `data-testid="frozen"`) {
		t.Fatalf("protection page after saving:\n%s", pageMain(page))
	}
	resp, body = s.PostForm(t, admin, envPath+"/deploys", url.Values{})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "production is frozen until ") || !strings.Contains(body, `id="freeze-override"`) {
		t.Fatalf("deploy in a refusing window: %d\n%s", resp.StatusCode, pageMain(body))
	}
	// The admin overrides with a reason: the deploy starts, audited.
	resp, body = s.PostForm(t, admin, envPath+"/deploys", url.Values{"freeze_override": {"security fix"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("override: %d\n%s", resp.StatusCode, pageMain(body))
	}
	runPath := resp.Header.Get("Location")
	assertAudit(t, s, "deploy.started", "run "+runPath[strings.LastIndex(runPath, "/")+1:], "security fix")

	// A window that delays: the deploy waits, the runs list says until when.
	s.CreateEnvironment(t, plainManifestForFreeze, "staging")
	const stagingPath = "/projects/shop/environments/staging"
	fixed.Set("freeze_action", "wait")
	if resp, body := s.PostForm(t, admin, stagingPath+"/protection", fixed); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save staging window: %d\n%s", resp.StatusCode, pageMain(body))
	}
	if resp, body := s.PostForm(t, admin, stagingPath+"/deploys", url.Values{}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("deploy in a waiting window: %d\n%s", resp.StatusCode, pageMain(body))
	}
	if _, list := s.Get(t, admin, stagingPath+"/runs"); !strings.Contains(list, `data-run-status="waiting"`) || !strings.Contains(list, "frozen until ") {
		t.Fatalf("runs list does not say the run is frozen:\n%s", pageMain(list))
	}
}

const plainManifestForFreeze = `name: shop
applications:
  api:
    image: ghcr.io/acme/api:1
`

func frozenPart(page string) string {
	if i := strings.Index(page, `data-testid="frozen"`); i >= 0 {
		return page[i:min(len(page), i+600)]
	}
	return pageMain(page)
}
