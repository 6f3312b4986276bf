package web_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// TestDrillScheduleFormAndLastProvenRestore: over real HTTP, the
// backups page says what a snapshot takes and where; an admin sets the
// drill schedule (a bad cron line is refused beside its field, nothing
// stored; a deployer may not), runs a drill, and the page then reads the
// last proven restore.
func TestDrillScheduleFormAndLastProvenRestore(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	root := s.SignInLocal(t)
	env := s.CreateEnvironment(t, backupWebManifest, "production")
	s.AddMember(t, env, "deployer@example.test", store.RoleDeployer)
	deployer := s.SignInAs(t, "deployer@example.test", "Deployer")
	const page = "/projects/vault/environments/production/backups"
	dir := t.TempDir()
	if resp, _ := s.PostForm(t, root, "/admin/backup-target", url.Values{"target": {dir}}); resp.StatusCode != 303 {
		t.Fatalf("set target: %d", resp.StatusCode)
	}
	s.ActivateRevision(t, "vault", "production", 1)
	resp, _ := s.PostForm(t, deployer, page, nil)
	if run := waitForRun(t, s, deployer, resp.Header.Get("Location")); runStatus.FindStringSubmatch(run)[1] != "succeeded" {
		t.Fatal("the snapshot did not succeed")
	}
	_, body := s.Get(t, root, page)
	for _, want := range []string{
		`<dd data-testid="backup-covers">database main</dd>`,
		`<code data-testid="backup-where">` + dir + `</code>`,
		`every Sunday at 04:00 UTC`, `<code>0 4 * * 0</code>`,
		`No drill has succeeded yet`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("the backups page lacks %q:\n%s", want, pageMain(body))
		}
	}
	// A deployer may neither change the schedule nor start a drill.
	if resp, _ := s.PostForm(t, deployer, page+"/drills", url.Values{"cron": {""}}); resp.StatusCode != 403 {
		t.Fatalf("a deployer's drill schedule: %d, want 403", resp.StatusCode)
	}
	if resp, _ := s.PostForm(t, deployer, page+"/drills/run", nil); resp.StatusCode != 403 {
		t.Fatalf("a deployer's drill: %d, want 403", resp.StatusCode)
	}
	// A bad cron line: 422, the error beside the field, nothing stored.
	resp, body = s.PostForm(t, root, page+"/drills", url.Values{"cron": {"0 25 * * *"}})
	if resp.StatusCode != 422 || !regexp.MustCompile(`id="drill-cron"[^>]*aria-invalid="true"`).MatchString(body) ||
		!strings.Contains(body, `data-testid="drill-cron-error"`) || !strings.Contains(body, "25 is above 23") {
		t.Fatalf("bad drill cron: %d\n%s", resp.StatusCode, pageMain(body))
	}
	if sc, _ := s.DB.DrillScheduleOf(t.Context(), env.ID); sc == nil || sc.Cron != store.DefaultDrillCron {
		t.Fatalf("a refused drill schedule was stored: %+v", sc)
	}
	if resp, _ := s.PostForm(t, root, page+"/drills", url.Values{"cron": {"0 3 * * *"}}); resp.StatusCode != 303 || resp.Header.Get("Location") != page+"#drills" {
		t.Fatalf("drill schedule: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, body = s.Get(t, root, page); !strings.Contains(body, "every day at 03:00 UTC") || !strings.Contains(body, `<code>0 3 * * *</code>`) {
		t.Fatalf("the page does not show the new drill schedule:\n%s", pageMain(body))
	}
	resp, _ = s.PostForm(t, root, page+"/drills/run", nil)
	run := waitForRun(t, s, root, resp.Header.Get("Location"))
	if m := runStatus.FindStringSubmatch(run); m[1] != "succeeded" || m[2] != "drill" {
		t.Fatalf("drill run %v", m[1:])
	}
	_, body = s.Get(t, root, page)
	if !regexp.MustCompile(`data-testid="last-proven"><a href="[^"]+">[^<]* ago · 1 object · `).MatchString(body) {
		t.Fatalf("the page does not read the last proven restore:\n%s", pageMain(body))
	}
	// Empty turns drills off.
	if resp, _ := s.PostForm(t, root, page+"/drills", url.Values{"cron": {""}}); resp.StatusCode != 303 {
		t.Fatalf("drills off: %d", resp.StatusCode)
	}
	if sc, _ := s.DB.DrillScheduleOf(t.Context(), env.ID); sc == nil || sc.Cron != "" {
		t.Fatalf("drills after turning them off: %+v", sc)
	}
}
