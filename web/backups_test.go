package web_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/webtest"
)

const backupWebManifest = `name: vault
applications:
  api:
    image: ghcr.io/acme/api:1
databases:
  main:
    engine: postgres
    version: 17
`

func TestBackupsTargetScheduleSnapshotAndAlarm(t *testing.T) {
	t.Parallel()
	d := &webtest.Deploys{}
	var metrics *web.Metrics
	s := webtest.Start(t, webtest.WithDeploys(d), func(deps *web.Deps) { metrics = web.NewMetrics(deps.DB) })
	root := s.SignInLocal(t)
	env := s.CreateEnvironment(t, backupWebManifest, "production")
	staging := s.CreateEnvironment(t, "", "staging")
	s.AddMember(t, env, "deployer@example.test", store.RoleDeployer)
	deployer := s.SignInAs(t, "deployer@example.test", "Deployer")
	const page = "/projects/vault/environments/production/backups"

	// No target: the page says who must set one, and links admins there.
	if status, body := s.Get(t, root, page); status != 200 || !strings.Contains(body, `data-testid="no-target"`) || !strings.Contains(body, `href="/admin"`) {
		t.Fatalf("backups page without a target: %d\n%s", status, pageMain(body))
	}
	if _, body := s.Get(t, deployer, page); strings.Contains(body, `href="/admin"`) {
		t.Fatal("a deployer is sent to the admin page")
	}
	if resp, body := s.PostForm(t, root, page+"/schedule", url.Values{"cron": {"0 3 * * *"}, "keep": {"7d"}}); resp.StatusCode != 422 || !strings.Contains(body, "installation admin must set one") {
		t.Fatalf("schedule without a target: %d", resp.StatusCode)
	}

	// The target is checked on save, its reason next to the field.
	missing := filepath.Join(t.TempDir(), "nope")
	for target, want := range map[string]string{"s3://backups/studio": "Write the endpoint", "gs://backups/studio": "cannot write to gs:// URLs", missing: "does not exist", "backups": "absolute directory path"} {
		resp, body := s.PostForm(t, root, "/admin/backup-target", url.Values{"target": {target}})
		if resp.StatusCode != 422 || !strings.Contains(body, `data-testid="target-error">`) || !strings.Contains(body, want) {
			t.Fatalf("target %q: %d, want 422 with %q\n%s", target, resp.StatusCode, want, pageMain(body))
		}
	}
	if _, body := s.PostForm(t, root, "/admin/backup-target", url.Values{"target": {"s3://AKIAEXAMPLE:hunter2secret@backups"}}); strings.Contains(body, "hunter2secret") {
		t.Fatal("a refused target URL with credentials is shown again")
	}
	dir := t.TempDir()
	if resp, _ := s.PostForm(t, root, "/admin/backup-target", url.Values{"target": {dir}}); resp.StatusCode != 303 || resp.Header.Get("Location") != "/admin" {
		t.Fatalf("set target: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}

	// Bad expressions and durations: an error next to the field, nothing stored.
	for _, c := range []struct{ cron, keep, field, want string }{
		{"61 * * * *", "7d", "cron", "61 is above 59, the largest value of its field"},
		{"0 3 * * *", "7", "keep", "such as 7d, 2w or 36h"},
		{"0 3 * * * *", "7d", "cron", "6 fields"},
		{"0 3 * * *", "7", "keep", "not a duration"},
		{"0 3 * * *", "0s", "keep", "keeps nothing"},
	} {
		resp, body := s.PostForm(t, root, page+"/schedule", url.Values{"cron": {c.cron}, "keep": {c.keep}})
		field := regexp.MustCompile(`id="` + c.field + `"[^>]*aria-invalid="true"`)
		if resp.StatusCode != 422 || !field.MatchString(body) || !strings.Contains(body, c.want) {
			t.Fatalf("schedule %q %q: %d, want 422 with %q at %s\n%s", c.cron, c.keep, resp.StatusCode, c.want, c.field, pageMain(body))
		}
	}
	// Two mistakes show at once.
	both, bothBody := s.PostForm(t, root, page+"/schedule", url.Values{"cron": {"0 25 * * *"}, "keep": {"soon"}})
	for _, field := range []string{"cron", "keep"} {
		if !regexp.MustCompile(`id="` + field + `"[^>]*aria-invalid="true"`).MatchString(bothBody) {
			t.Errorf("schedule with a bad cron and a bad retention: %d, the %s field is not marked\n%s", both.StatusCode, field, pageMain(bothBody))
		}
	}
	if _, err := s.DB.BackupSchedule(t.Context(), env.ID); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("a refused schedule was stored: %v", err)
	}
	// The preview endpoint the script calls.
	status, js := s.Get(t, root, page+"/schedule/preview?cron="+url.QueryEscape("0 0 29 2 *"))
	var preview struct {
		Fires []string `json:"fires"`
		Error string   `json:"error"`
	}
	if err := json.Unmarshal([]byte(js), &preview); status != 200 || err != nil || len(preview.Fires) != 5 || !strings.Contains(preview.Fires[0], "-02-29 00:00") {
		t.Fatalf("preview: %d %s", status, js)
	}
	if _, js := s.Get(t, root, page+"/schedule/preview?cron=61+*+*+*+*"); !strings.Contains(js, `"error"`) {
		t.Fatalf("preview of a bad expression: %s", js)
	}

	// A good schedule: 303, then the page shows it and the next five fires.
	if resp, _ := s.PostForm(t, root, page+"/schedule", url.Values{"cron": {"0 3 * * *"}, "keep": {"7d"}}); resp.StatusCode != 303 || resp.Header.Get("Location") != page {
		t.Fatalf("schedule: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The page's script reads its live parts, not the page: they carry the
	// new schedule and leave the one-time message for the page the person
	// opens next.
	if status, parts := s.Get(t, root, page+"/live"); status != 200 ||
		strings.Contains(parts, `class="flash`) || !strings.Contains(parts, `<code data-testid="schedule-cron">0 3 * * *</code>`) {
		t.Errorf("the page's live parts: %d, with a flash message: %v:\n%s", status, strings.Contains(parts, `class="flash`), parts)
	}
	_, body := s.Get(t, root, page)
	if !strings.Contains(body, `<code data-testid="schedule-cron">0 3 * * *</code>`) || strings.Count(body, " 03:00</li>") != 5 {
		t.Fatalf("backups page after the schedule:\n%s", pageMain(body))
	}
	if !strings.Contains(body, `class="flash`) {
		t.Error("the page opened after saving the schedule has no flash message: a refresh spent it")
	}
	// The schedule reads in words beside its cron.
	if !strings.Contains(body, `<span data-testid="schedule-words">(every day at 03:00 UTC)</span>`) {
		t.Errorf("the schedule does not read in words:\n%s", pageMain(body))
	}

	// A manual backup before the first deploy is refused; after it, it runs.
	if resp, body := s.PostForm(t, deployer, page, nil); resp.StatusCode != 422 || !strings.Contains(body, "never been deployed") {
		t.Fatalf("manual backup before a deploy: %d", resp.StatusCode)
	}
	s.ActivateRevision(t, "vault", "production", 1)
	resp, _ := s.PostForm(t, deployer, page, nil)
	runPath := resp.Header.Get("Location")
	if resp.StatusCode != 303 || !strings.Contains(runPath, "/runs/") {
		t.Fatalf("manual backup: %d %s", resp.StatusCode, runPath)
	}
	run := waitForRun(t, s, deployer, runPath)
	if m := runStatus.FindStringSubmatch(run); m[1] != "succeeded" || m[2] != "backup" {
		t.Fatalf("backup run %v", m[1:])
	}
	_, body = s.Get(t, root, page)
	if !strings.Contains(body, `data-origin="manual"`) || !strings.Contains(body, `data-run-status="succeeded" data-run-kind="backup"`) || !strings.Contains(body, " kB") {
		t.Fatalf("the snapshot is not listed:\n%s", pageMain(body))
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "vault", "production")); len(entries) != 1 {
		t.Fatalf("%d snapshot directories", len(entries))
	}

	// Staging was never deployed: its fires are skipped, which raises the
	// alarm on its pages and on the home page.
	if resp, body := s.PostForm(t, root, "/projects/hello-world/environments/staging/backups/schedule", url.Values{"cron": {"* * * * *"}, "keep": {"1d"}}); resp.StatusCode != 422 || !strings.Contains(body, "nothing to snapshot") {
		t.Fatalf("a schedule of an environment with nothing to snapshot: %d", resp.StatusCode)
	}
	if err := s.DB.SetBackupSchedule(t.Context(), store.Actor{}, env, "* * * * *", "1d", 24*3600e9, 60e9); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.Pool.Exec(t.Context(), `UPDATE backup_schedules SET considered_until = now() - interval '90 seconds'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.Pool.Exec(t.Context(), `UPDATE environments SET active_revision_id = NULL WHERE id = $1`, env.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.Service.FireDueBackups(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, body = s.Get(t, root, "/")
	if !strings.Contains(body, `data-testid="backup-alarms"`) || !strings.Contains(body, "nothing deployed yet") {
		t.Fatalf("home page without the alarm:\n%s", pageMain(body))
	}
	_, body = s.Get(t, root, "/projects/vault/environments/production")
	if !strings.Contains(body, `data-testid="backup-alarm"`) {
		t.Fatalf("environment page without the alarm:\n%s", pageMain(body))
	}
	// The same state is a Prometheus gauge.
	rec := httptest.NewRecorder()
	metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if got := rec.Body.String(); !strings.Contains(got, `studio_backup_alarm{environment="production",project="vault",reason=`) {
		t.Errorf("metrics lack the backup alarm of vault/production:\n%s", got)
	}
	_ = staging
	// Removing the schedule turns it off; the snapshot stays.
	if resp, _ := s.PostForm(t, root, page+"/schedule/remove", nil); resp.StatusCode != 303 || resp.Header.Get("Location") != page {
		t.Fatalf("remove schedule: %d", resp.StatusCode)
	}
	if _, err := s.DB.BackupSchedule(t.Context(), env.ID); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("schedule after remove: %v", err)
	}
	if _, body := s.Get(t, root, page); !strings.Contains(body, "No schedule: only manual snapshots.") || !strings.Contains(body, `data-origin="manual"`) {
		t.Fatalf("backups page after removing the schedule:\n%s", pageMain(body))
	}
}

// TestRestoreOfACorruptedSnapshotIsRefusedBeforeTheStop: a file whose
// bytes changed is found by the restore's first checkpoint, before the
// environment stops; one of another size is refused on the confirmation
// page. An environment that a restore left down refuses deploys until its
// data is accepted.
func TestRestoreOfACorruptedSnapshotIsRefusedBeforeTheStop(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	root := s.SignInLocal(t)
	env := s.CreateEnvironment(t, backupWebManifest, "production")
	dir := t.TempDir()
	s.PostForm(t, root, "/admin/backup-target", url.Values{"target": {dir}})
	s.ActivateRevision(t, "vault", "production", 1)
	const envPage = "/projects/vault/environments/production"
	resp, _ := s.PostForm(t, root, envPage+"/backups", nil)
	waitForRun(t, s, root, resp.Header.Get("Location"))
	list, err := s.DB.Backups(t.Context(), env.ID, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("backups %v %v", list, err)
	}
	b := list[0]
	backupPage := envPage + "/backups/" + strconv.FormatInt(b.ID, 10)
	if status, body := s.Get(t, root, backupPage+"/restore"); status != 200 || !strings.Contains(body, "Type the environment's name") {
		t.Fatalf("restore page: %d", status)
	}
	if resp, body := s.PostForm(t, root, backupPage+"/restore", url.Values{"confirm": {"prod"}}); resp.StatusCode != 422 || !strings.Contains(body, "to confirm") ||
		!strings.Contains(body, `aria-describedby="confirm-error" autofocus`) || !strings.Contains(body, `<span class="error-text" id="confirm-error" role="alert">`) {
		t.Fatalf("restore without the name: %d", resp.StatusCode)
	}
	file := filepath.Join(dir, "vault", "production", b.Name, "database-main.snapshot")
	good, _ := os.ReadFile(file)
	os.WriteFile(file, []byte("not what was written"), 0o600)
	if resp, body := s.PostForm(t, root, backupPage+"/restore", url.Values{"confirm": {"production"}}); resp.StatusCode != 422 || !strings.Contains(body, "database-main.snapshot is not the size recorded when it was written. Nothing was stopped.") {
		t.Fatalf("restore of a file of another size: %d\n%s", resp.StatusCode, pageMain(body))
	}
	// Same size, other bytes: the run's verification fails it, naming the
	// file and no checksum, and the environment never stops.
	bad := make([]byte, len(good))
	for i := range good {
		bad[i] = good[i] ^ 0xff
	}
	os.WriteFile(file, bad, 0o600)
	resp, _ = s.PostForm(t, root, backupPage+"/restore", url.Values{"confirm": {"production"}})
	if resp.StatusCode != 303 {
		t.Fatalf("restore: %d", resp.StatusCode)
	}
	run := waitForRun(t, s, root, resp.Header.Get("Location"))
	if m := runStatus.FindStringSubmatch(run); m[1] != "failed" || m[2] != "restore" || !strings.Contains(run, "database-main.snapshot does not match its recorded checksum") {
		t.Fatalf("restore run %v\n%s", m[1:], pageMain(run))
	}
	if sum := sha256.Sum256(bad); strings.Contains(run, hex.EncodeToString(sum[:])[:8]) {
		t.Fatal("the run page shows a checksum of the file found")
	}
	if e, _ := s.DB.EnvironmentByID(t.Context(), env.ID); e.State != store.EnvironmentActive {
		t.Fatalf("state %q after a restore refused before the stop", e.State)
	}
	_, body := s.Get(t, root, envPage)
	if strings.Contains(body, `data-testid="restore-failed"`) {
		t.Fatal("the environment page says it is down after a restore that never stopped it")
	}
	// A restore that failed after the stop leaves the environment down
	// (runs/backup_test.go makes one fail there; here the state is set).
	if _, err := s.DB.Pool.Exec(t.Context(), `UPDATE environments SET state = $2 WHERE id = $1`, env.ID, store.EnvironmentRestoreFailed); err != nil {
		t.Fatal(err)
	}
	_, body = s.Get(t, root, envPage)
	if !strings.Contains(body, `data-testid="restore-failed"`) || strings.Index(body, "restore-failed") > strings.Index(body, "<h1") {
		t.Fatalf("the environment page does not say it is down at the top:\n%s", pageMain(body))
	}
	if resp, body := s.PostForm(t, root, envPage+"/deploys", url.Values{"redeploy": {"1"}}); resp.StatusCode < 400 || !strings.Contains(body, "restore failed") {
		t.Fatalf("deploy while down: %d", resp.StatusCode)
	}
	if resp, _ := s.PostForm(t, root, envPage+"/backups/accept", url.Values{"confirm": {"nope"}}); resp.StatusCode != 422 {
		t.Fatalf("accept without the name: %d", resp.StatusCode)
	}
	if resp, _ := s.PostForm(t, root, envPage+"/backups/accept", url.Values{"confirm": {"production"}}); resp.StatusCode != 303 {
		t.Fatalf("accept: %d", resp.StatusCode)
	}
	if e, _ := s.DB.EnvironmentByID(t.Context(), env.ID); e.State != store.EnvironmentActive {
		t.Fatalf("state after accept %q", e.State)
	}
	var actions []string
	rows, _ := s.DB.Pool.Query(t.Context(), `SELECT action FROM audit_events WHERE action LIKE 'backup.%' ORDER BY id`)
	for rows.Next() {
		var a string
		rows.Scan(&a)
		actions = append(actions, a)
	}
	if got := strings.Join(actions, " "); got != "backup.target-set backup.created backup.restore-started backup.accepted" {
		t.Fatalf("audit: %s", got)
	}
	// Removing the snapshot takes its name and deletes its files.
	if resp, _ := s.PostForm(t, root, backupPage+"/remove", url.Values{"confirm": {b.Name}}); resp.StatusCode != 303 {
		t.Fatalf("remove: %d", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(dir, "vault", "production", b.Name)); !os.IsNotExist(err) {
		t.Fatalf("files left after remove: %v", err)
	}
}

// TestBackupsPageShowsMissingSnapshots: when the backup target is gone,
// its snapshots read "missing" with the reason and offer no restore; a
// restore asked for anyway is refused; the admin page says what is wrong
// with the target; nothing is written anywhere.
func TestBackupsPageShowsMissingSnapshots(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	root := s.SignInLocal(t)
	env := s.CreateEnvironment(t, backupWebManifest, "production")
	s.AddMember(t, env, "viewer@example.test", store.RoleViewer)
	viewer := s.SignInAs(t, "viewer@example.test", "Viewer")
	dir := filepath.Join(t.TempDir(), "backups")
	os.Mkdir(dir, 0o755)
	if resp, _ := s.PostForm(t, root, "/admin/backup-target", url.Values{"target": {dir}}); resp.StatusCode != 303 {
		t.Fatalf("set target: %d", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(dir, ".skali-backup-target")); err != nil {
		t.Fatalf("the target has no marker: %v", err)
	}
	s.ActivateRevision(t, "vault", "production", 1)
	const page = "/projects/vault/environments/production/backups"
	resp, _ := s.PostForm(t, root, page, nil)
	waitForRun(t, s, root, resp.Header.Get("Location"))
	list, err := s.DB.Backups(t.Context(), env.ID, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("backups %v %v", list, err)
	}
	restoreLink := page + "/" + strconv.FormatInt(list[0].ID, 10) + "/restore"
	if _, body := s.Get(t, root, page); !strings.Contains(body, `href="`+restoreLink+`"`) || strings.Contains(body, "data-snapshot-missing") {
		t.Fatalf("a good snapshot is not offered for restore:\n%s", pageMain(body))
	}

	// The disk goes away.
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*http.Client{root, viewer} {
		_, body := s.Get(t, c, page)
		if !strings.Contains(body, "data-snapshot-missing") || !strings.Contains(body, `data-testid="missing">missing</span>`) || !strings.Contains(body, "does not exist (deleted, or its disk is not mounted)") {
			t.Fatalf("the lost snapshot is not shown missing:\n%s", pageMain(body))
		}
		if strings.Contains(body, `href="`+restoreLink+`"`) {
			t.Fatal("a missing snapshot is offered for restore")
		}
	}
	if resp, body := s.PostForm(t, root, restoreLink, url.Values{"confirm": {"production"}}); resp.StatusCode != 422 || !strings.Contains(body, "This snapshot cannot be restored. The backup target "+dir+" does not exist") {
		t.Fatalf("restore of a missing snapshot: %d\n%s", resp.StatusCode, pageMain(body))
	}
	if resp, body := s.PostForm(t, root, page, nil); resp.StatusCode != 422 || !strings.Contains(body, "No snapshot: The backup target "+dir+" does not exist") {
		t.Fatalf("manual snapshot into a deleted target: %d\n%s", resp.StatusCode, pageMain(body))
	}
	if _, body := s.Get(t, root, "/admin"); !strings.Contains(body, `data-testid="target-problem"`) || !strings.Contains(body, "does not exist") {
		t.Fatalf("the admin page does not say the target is gone:\n%s", pageMain(body))
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("the target was created again: %v", err)
	}
	var restores int
	s.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM runs WHERE kind = 'restore'`).Scan(&restores)
	if e, _ := s.DB.EnvironmentByID(t.Context(), env.ID); restores != 0 || e.State != store.EnvironmentActive {
		t.Fatalf("%d restore runs, state %q", restores, e.State)
	}
	if shot := os.Getenv("STUDIO_SCREENSHOT_URL_FILE"); shot != "" {
		// For a person looking at the page: the server stays up a while.
		os.WriteFile(shot, []byte(s.URL+"\n"), 0o600)
		time.Sleep(60 * time.Second)
	}
}

// TestBackupsPageShowsALeftoverSnapshot: a snapshot whose target turned
// read-only between its two files is listed as failed, not as a good
// snapshot, with the folder it left over and its path; once a later
// snapshot has removed the folder, the page no longer says so.
func TestBackupsPageShowsALeftoverSnapshot(t *testing.T) {
	t.Parallel()
	faults := &local.Faults{}
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{Faults: faults}))
	root := s.SignInLocal(t)
	env := s.CreateEnvironment(t, backupWebManifest+`buckets:
  files:
    quotas:
      storage: 1GB
`, "production")
	dir := filepath.Join(t.TempDir(), "backups")
	os.Mkdir(dir, 0o755)
	if resp, _ := s.PostForm(t, root, "/admin/backup-target", url.Values{"target": {dir}}); resp.StatusCode != 303 {
		t.Fatalf("set target: %d", resp.StatusCode)
	}
	s.ActivateRevision(t, "vault", "production", 1)
	const page = "/projects/vault/environments/production/backups"
	// The files are written database first, then the bucket; the disk
	// turns read-only after the first.
	faults.Set(func(f *local.Faults) { f.Target = &local.TargetFault{AfterFiles: 1, ReadOnly: true} })
	resp, _ := s.PostForm(t, root, page, nil)
	waitForRun(t, s, root, resp.Header.Get("Location"))
	list, err := s.DB.Backups(t.Context(), env.ID, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("backups %v %v", list, err)
	}
	left := filepath.Join(dir, "vault", "production", list[0].Name)
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("the folder left over is not there: %v", err)
	}
	_, body := s.Get(t, root, page)
	if !strings.Contains(body, `data-testid="leftover">left over at <code>`+left+`</code>`) {
		t.Fatalf("the page does not show the folder left over at %s:\n%s", left, pageMain(body))
	}
	if strings.Contains(body, "/restore\"") || !strings.Contains(body, `data-run-status="failed" data-run-kind="backup"`) || strings.Contains(body, `data-run-status="succeeded" data-run-kind="backup"`) {
		t.Fatalf("the failed snapshot is offered as a good one:\n%s", pageMain(body))
	}

	faults.Set(func(f *local.Faults) { f.Target = nil })
	resp, _ = s.PostForm(t, root, page, nil)
	waitForRun(t, s, root, resp.Header.Get("Location"))
	if _, err := os.Lstat(left); !os.IsNotExist(err) {
		t.Fatalf("the folder left over is still there: %v", err)
	}
	if _, body := s.Get(t, root, page); strings.Contains(body, "left over at") {
		t.Fatalf("the page still shows a folder left over:\n%s", pageMain(body))
	}
}
