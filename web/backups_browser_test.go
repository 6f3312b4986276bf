package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// backupsReady starts a Studio with backupWebManifest's environment
// production deployed (revision 1 active) and a backup target, and signs
// in its admin. The stop of a restore waits until the test opens the
// returned gate (restoreFailingAfterTheStop).
func backupsReady(t *testing.T) (*webtest.Server, *store.Environment, *http.Client, string, *webtest.Gate) {
	t.Helper()
	stop := webtest.NewGate()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{HoldStop: stop}))
	t.Cleanup(stop.Open) // before the Studio stops
	env := s.CreateEnvironment(t, backupWebManifest, "production")
	admin := s.SignInLocal(t)
	target := t.TempDir()
	if resp, _ := s.PostForm(t, admin, "/admin/backup-target", url.Values{"target": {target}}); resp.StatusCode != 303 {
		t.Fatalf("target: %d", resp.StatusCode)
	}
	s.ActivateRevision(t, "vault", "production", 1)
	return s, env, admin, target, stop
}

// restoreFailingAfterTheStop restores snapshot b of vault/production and
// corrupts its database file while the environment's stop is held (stop,
// backupsReady's gate, which it then opens): past the verification, which
// a corrupted file would not pass, so the restore fails with the
// environment down.
func restoreFailingAfterTheStop(t *testing.T, s *webtest.Server, admin *http.Client, target string, b store.Backup, stop *webtest.Gate) *http.Response {
	t.Helper()
	resp, _ := s.PostForm(t, admin, "/projects/vault/environments/production/backups/"+strconv.FormatInt(b.ID, 10)+"/restore", url.Values{"confirm": {"production"}})
	if resp.StatusCode != 303 {
		t.Fatalf("restore: %d", resp.StatusCode)
	}
	runID, _ := strconv.ParseInt(resp.Header.Get("Location")[strings.LastIndex(resp.Header.Get("Location"), "/")+1:], 10, 64)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var status string
		err := s.DB.Pool.QueryRow(t.Context(), `SELECT status FROM run_checkpoints WHERE run_id = $1 AND kind = 'stop'`, runID).Scan(&status)
		if err == nil && status == "running" {
			break
		}
		if err != nil || status != "pending" || time.Now().After(deadline) {
			t.Fatalf("restore run %d: the stop checkpoint is %q (%v), want it running (held)", runID, status, err)
		}
	}
	if err := os.WriteFile(filepath.Join(target, "vault", "production", b.Name, "database-main.snapshot"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	stop.Open()
	return resp
}

// TestBrowserBackupsScheduleAndManualSnapshot sets a schedule as a person
// would, sees the preview follow the typing, takes a snapshot by hand and
// watches it complete; no page is wider than a phone's screen.
func TestBrowserBackupsScheduleAndManualSnapshot(t *testing.T) {
	t.Parallel()
	s, env, admin, target, stop := backupsReady(t)
	const page = "/projects/vault/environments/production/backups"

	b := browsertest.NewFor(t, 4*time.Minute) // a schedule, a refusal and a snapshot: slow on a busy machine
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+page), chromedp.WaitVisible(chromedp.CSS("#cron")))
	// Typing updates the preview (the script asks the server).
	b.Do(chromedp.SendKeys(chromedp.CSS("#cron"), "0 3 29 2 *"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="preview"] li:nth-child(5)`)))
	if got := b.Text(`[data-testid="preview"]`); !strings.Contains(got, "-02-29 03:00") {
		t.Fatalf("preview = %q", got)
	}
	b.Do(chromedp.SendKeys(chromedp.CSS("#cron"), " *"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="preview-error"]`)))
	// Posted as it is, it is refused next to the field; once what is typed
	// is valid again, that error goes.
	b.Do(chromedp.Click(chromedp.CSS(`[data-testid="save-schedule"]`)), chromedp.WaitVisible(chromedp.CSS(`.field-error #cron`)))
	b.Do(chromedp.SetValue(chromedp.CSS("#cron"), "0 3 * * "), chromedp.SendKeys(chromedp.CSS("#cron"), "*"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="preview"] li:nth-child(5)`)))
	if browsertest.Eval[bool](b, `!!(document.getElementById("cron").closest(".field-error") || document.querySelector("#cron[aria-invalid]"))`) {
		t.Error("the cron field still shows the refused expression's error once what is typed is valid")
	}
	b.Do(chromedp.SetValue(chromedp.CSS("#cron"), "0 3 * * "), chromedp.SendKeys(chromedp.CSS("#cron"), "*"),
		chromedp.SendKeys(chromedp.CSS("#keep"), "7d"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="preview"] li:nth-child(5)`)))
	// The flash is the layout's, so wait for the page the post leads to.
	b.Submit(`[data-testid="save-schedule"]`, ".flash")
	if got := b.Text("#backup-status"); !strings.Contains(got, "0 3 * * *") || !strings.Contains(got, "keep 7d") {
		t.Fatalf("status card = %q", got)
	}
	// A snapshot by hand: its run page, then completion.
	b.Do(chromedp.Click(chromedp.CSS(`[data-testid="take-snapshot"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status[data-run-kind="backup"][data-run-status="succeeded"]`)))
	b.Screenshot("backup-run")
	b.Do(chromedp.Navigate(s.URL+page), chromedp.WaitVisible(chromedp.CSS(`tr[data-origin="manual"]`)))
	// The next fire counts down, and the last good snapshot's age counts
	// on, without a reload or an event (by the second, or by the minute
	// once past one: 65 s covers both).
	if got := b.Text(`#backup-status time[data-countdown]`); !strings.HasPrefix(got, "in ") {
		t.Errorf("next fire = %q, want how far off it is", got)
	}
	age := b.Text(`#backup-status time[data-elapsed]`)
	for deadline := time.Now().Add(65 * time.Second); b.Text(`#backup-status time[data-elapsed]`) == age; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the last good snapshot's age stayed %q for 65 s", age)
		}
	}
	b.Screenshot("backups")
	checkWidth := func(name string) {
		t.Helper()
		if w := browsertest.Eval[int](b, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s is %dpx wide on a 390px phone", name, w)
		}
	}
	b.Do(chromedp.EmulateViewport(390, 844))
	b.Screenshot("backups-phone")
	checkWidth("the backups page")
	b.Do(chromedp.Navigate(s.URL+"/admin"), chromedp.WaitVisible(chromedp.CSS("#target")))
	b.Screenshot("admin-phone")
	checkWidth("the admin page")
	b.Do(chromedp.Navigate(s.URL+"/projects/vault/environments/production"), chromedp.WaitVisible(chromedp.CSS("#backup-status")))
	b.Screenshot("environment-backups-phone")
	checkWidth("the environment page")
	b.Do(chromedp.EmulateViewport(1280, 900))
	b.Screenshot("environment-backups")
	b.Do(chromedp.Navigate(s.URL+"/admin"), chromedp.WaitVisible(chromedp.CSS("#target")))
	b.Screenshot("admin")

	// A restore of a corrupted snapshot: the pages say it is down, at the top.
	list, err := s.DB.Backups(t.Context(), env.ID, 1)
	if err != nil || len(list) != 1 {
		t.Fatalf("backups: %v %v", list, err)
	}
	resp := restoreFailingAfterTheStop(t, s, admin, target, list[0], stop)
	waitForRun(t, s, admin, resp.Header.Get("Location"))
	b.Do(chromedp.Navigate(s.URL+"/projects/vault/environments/production"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="restore-failed"]`)))
	b.Screenshot("environment-restore-failed")
	b.Do(chromedp.Navigate(s.URL+page), chromedp.WaitVisible(chromedp.CSS("#accept-confirm")))
	b.Screenshot("backups-restore-failed")
	b.Do(chromedp.EmulateViewport(390, 844))
	b.Screenshot("backups-restore-failed-phone")
	checkWidth("the backups page of a failed restore")
	b.Do(chromedp.EmulateViewport(1280, 900))
}

// TestBrowserBackupsPageFollowsSnapshotsAndRestores keeps the backups page
// open while someone else takes a snapshot and then restores a corrupted
// one: the snapshot appears and completes, then the page says the
// environment is down and stops offering snapshots, all without a reload
// and without losing what the admin was typing in the schedule form.
func TestBrowserBackupsPageFollowsSnapshotsAndRestores(t *testing.T) {
	t.Parallel()
	s, env, admin, target, stop := backupsReady(t)
	const page = "/projects/vault/environments/production/backups"

	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+page), chromedp.WaitVisible(chromedp.CSS("#cron")),
		chromedp.WaitReady(chromedp.CSS(`[data-stream][data-stream-status="live"]`)))
	if got := b.Text("#snapshots"); !strings.Contains(got, "No snapshots yet") {
		t.Fatalf("snapshots of a new environment = %q", got)
	}
	b.Do(chromedp.SendKeys(chromedp.CSS("#cron"), "15 4 * * 1"))
	browsertest.Eval[any](b, `window.studioMarker = "not reloaded"`)

	// Someone else takes a snapshot.
	resp, _ := s.PostForm(t, admin, page, url.Values{})
	if resp.StatusCode != 303 {
		t.Fatalf("take a snapshot: %d", resp.StatusCode)
	}
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#snapshots tr[data-origin="manual"] [data-run-status="succeeded"]`)))
	// The status card follows within moments (the page reads itself again
	// when the run's end reaches it).
	for deadline := time.Now().Add(time.Minute); strings.Contains(b.Text("#backup-status"), "None yet"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the status card still says no good snapshot a minute after one completed: %q", b.Text("#backup-status"))
			break
		}
	}

	// A restore of a corrupted copy of it fails: the page says so.
	list, err := s.DB.Backups(t.Context(), env.ID, 1)
	if err != nil || len(list) != 1 {
		t.Fatalf("backups: %v %v", list, err)
	}
	restoreFailingAfterTheStop(t, s, admin, target, list[0], stop)
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#backup-alerts [data-testid="restore-failed"]`)))
	if n := browsertest.Eval[int](b, `document.querySelectorAll('[data-testid="take-snapshot"]').length`); n != 0 {
		t.Error("the page still offers a snapshot while the environment is down")
	}
	// What the admin types into the accept form survives a later update.
	b.Do(chromedp.SendKeys(chromedp.CSS("#accept-confirm"), "prod"))
	refreshed := browsertest.Eval[string](b, `document.querySelector("[data-stream]").dataset.refreshed || "0"`)
	var seq int64
	if err := s.DB.Pool.QueryRow(t.Context(), `
		WITH s AS (UPDATE environments SET last_event_seq = last_event_seq + 1 WHERE id = $1 RETURNING id, last_event_seq, state),
		     i AS (INSERT INTO environment_events (environment_id, seq, payload)
		           SELECT id, last_event_seq, jsonb_build_object('type', 'environment.state', 'state', state) FROM s RETURNING environment_id, seq)
		SELECT i.seq FROM i, LATERAL (SELECT pg_notify('environment_events.' || i.environment_id::text, i.environment_id::text || ':' || i.seq::text)) n`,
		env.ID).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	// The page has applied that event and refreshed since (a focus move or
	// a late event of the restore may refresh it once more).
	n, _ := strconv.Atoi(refreshed)
	waitTrue(t, b, fmt.Sprintf(`(d => d && d.dataset.lastSeq == "%d" && +(d.dataset.refreshed || 0) > %d)(document.querySelector("[data-stream]"))`, seq, n))
	if got := browsertest.Eval[string](b, `document.getElementById("accept-confirm").value`); got != "prod" {
		t.Errorf("the accept form holds %q after a live update, want what was typed", got)
	}
	if got := browsertest.Eval[string](b, `document.getElementById("cron").value`); got != "15 4 * * 1" {
		t.Errorf("the schedule form holds %q after the live updates, want what was typed", got)
	}
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Error("the backups page reloaded itself; it should have followed the environment's stream")
	}
	b.Screenshot("backups-live-restore-failed")
}

// TestBrowserBackupsMissingSnapshot: with its backup target gone, a
// snapshot reads "missing" with the reason and offers no restore, on a
// desktop and a phone; the admin page says what is wrong with the target.
func TestBrowserBackupsMissingSnapshot(t *testing.T) {
	t.Parallel()
	s, _, admin, target, _ := backupsReady(t)
	const page = "/projects/vault/environments/production/backups"
	resp, _ := s.PostForm(t, admin, page, url.Values{})
	waitForRun(t, s, admin, resp.Header.Get("Location"))
	resp, _ = s.PostForm(t, admin, page, url.Values{})
	waitForRun(t, s, admin, resp.Header.Get("Location"))
	if err := os.Rename(target, target+".away"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(target+".away", target) })

	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+page), chromedp.WaitVisible(chromedp.CSS(`[data-testid="missing"]`)))
	if n := browsertest.Eval[int](b, `document.querySelectorAll('#snapshots tr[data-snapshot-missing]').length`); n != 2 {
		t.Errorf("%d snapshots shown missing, want 2", n)
	}
	if n := browsertest.Eval[int](b, `document.querySelectorAll('#snapshots a[href$="/restore"]').length`); n != 0 {
		t.Errorf("%d missing snapshots offered for restore", n)
	}
	if got := b.Text(`#snapshots tr[data-snapshot-missing] .snapshot-missing`); !strings.Contains(got, "does not exist") {
		t.Errorf("missing reason = %q", got)
	}
	if got := b.Text(`[data-testid="target-problem"]`); !strings.Contains(got, "Snapshots cannot be written.") {
		t.Errorf("target callout = %q", got)
	}
	if n := browsertest.Eval[int](b, `document.querySelectorAll('[data-testid="take-snapshot"]').length`); n != 0 {
		t.Error("the page offers a snapshot that its target cannot take")
	}
	b.Screenshot("backups-missing")
	b.Do(chromedp.EmulateViewport(390, 844))
	b.Screenshot("backups-missing-phone")
	if w := browsertest.Eval[int](b, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the backups page is %dpx wide on a 390px phone", w)
	}
	b.Do(chromedp.EmulateViewport(1280, 900))
	b.Do(chromedp.Navigate(s.URL+"/admin"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="target-problem"]`)))
	if got := b.Text(`[data-testid="target-problem"]`); !strings.Contains(got, "does not exist") {
		t.Errorf("admin page target problem = %q", got)
	}
	b.Screenshot("admin-target-missing")
}

// TestBrowserBackupsPreviewDropsPastFires: a backups page left open with
// a schedule that fires every minute: once the first fire of the preview
// has come, it leaves the list, which still shows five fires to come.
func TestBrowserBackupsPreviewDropsPastFires(t *testing.T) {
	t.Parallel()
	s, _, _, _, _ := backupsReady(t)
	const page = "/projects/vault/environments/production/backups"
	b := browsertest.NewFor(t, 3*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+page), chromedp.WaitVisible(chromedp.CSS("#cron")),
		chromedp.SendKeys(chromedp.CSS("#cron"), "* * * * *"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="preview"] li:nth-child(5)`)))
	first := b.Text(`[data-testid="preview"] li:first-child`)
	// Within a minute and a few seconds the first fire has passed and the
	// list has been asked for again.
	if _, err := chromedp.Run(b.Ctx, chromedp.Poll[bool](`(() => {
		const lis = [...document.querySelectorAll('[data-testid="preview"] li')];
		return lis.length === 5 && lis[0].textContent !== `+strconv.Quote(first)+`;
	})()`, chromedp.WithPollingTimeout(100*time.Second))); err != nil {
		t.Fatalf("the preview still starts with %s, a fire that has passed: %v", first, err)
	}
	if got := b.Text(`[data-testid="preview"]`); strings.Contains(got, first) {
		t.Errorf("the preview %q still lists the past fire %s", got, first)
	}
}

// TestBrowserRunsADrillAndSeesTheLastProvenRestore: an admin takes a
// snapshot, runs a restore drill from the backups page, watches it
// succeed on its run page, and the backups page then names the last
// proven restore (and how much it proved), at desktop and phone widths.
func TestBrowserRunsADrillAndSeesTheLastProvenRestore(t *testing.T) {
	t.Parallel()
	s, _, _, _, _ := backupsReady(t)
	const page = "/projects/vault/environments/production/backups"
	b := browsertest.NewFor(t, 4*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+page), chromedp.WaitVisible(chromedp.CSS(`[data-testid="last-proven"]`)))
	if got := b.Text(`[data-testid="last-proven"]`); got != "No drill has succeeded yet" {
		t.Fatalf("before any drill the page says %q", got)
	}
	b.Do(chromedp.Click(chromedp.CSS(`[data-testid="take-snapshot"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status[data-run-kind="backup"][data-run-status="succeeded"]`)))
	b.Do(chromedp.Navigate(s.URL+page), chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-drill"]`)))
	b.Do(chromedp.Click(chromedp.CSS(`[data-testid="run-drill"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status[data-run-kind="drill"][data-run-status="succeeded"]`)))
	if got := b.Text("main"); !strings.Contains(got, "Restore database main into scratch") || !strings.Contains(got, "Remove the scratch place") {
		t.Fatalf("the drill's run page lacks its checkpoints:\n%s", got)
	}
	b.Screenshot("drill-run")
	b.Do(chromedp.Navigate(s.URL+page), chromedp.WaitVisible(chromedp.CSS(`[data-testid="last-proven"] a`)))
	if got := b.Text(`[data-testid="last-proven"]`); !strings.Contains(got, "ago · 1 object · ") || !strings.Contains(got, "no tables counted") {
		t.Fatalf("after the drill the last proven restore reads %q", got)
	}
	b.Screenshot("backups-after-drill")
	b.Do(chromedp.EmulateViewport(390, 844))
	b.Screenshot("backups-after-drill-phone")
	if w := browsertest.Eval[int](b, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the backups page is %dpx wide on a 390px phone", w)
	}
}
