package web_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserWatchesADeployLive starts a deploy whose steps take a while
// and watches its run page: the checkpoints change and the run ends, with
// the deferred route, without the page ever reloading (a marker set after
// load survives), and every checkpoint row is there exactly once. The
// environment page lists the run live too.
func TestBrowserWatchesADeployLive(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{StepDelay: 250 * time.Millisecond}
	s, admin := deployableWiki(t, d, dns, "127.0.0.2") // elsewhere: the route is deferred
	const envPath = "/projects/team-wiki/environments/production"
	// web's rollout waits until the page was seen running.
	d.Faults.Set(func(f *local.Faults) { f.Hold = map[string]bool{"web": true} })

	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+envPath+"/deploys/new"), chromedp.WaitVisible(chromedp.CSS("#deploy-form button[type=submit]")))
	b.Do(chromedp.Click(chromedp.CSS("#deploy-form button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("#run-status")))
	browsertest.Eval[any](b, `window.studioMarker = "not reloaded"`)
	if status := browsertest.Eval[string](b, `document.getElementById("run-status").dataset.runStatus`); status == "succeeded-with-warnings" {
		t.Fatal("the run had finished before the page could watch it; the steps need to be slower")
	}
	// While it runs, the header says for how long, and keeps counting.
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#run-header time[data-elapsed]`)))
	running := func(got string) bool { return strings.Contains(got, "running for") && !strings.Contains(got, "took") }
	if got := b.TextWithin("#run-header", 10*time.Second, running); !running(got) {
		t.Errorf("the header of a running run = %q, want how long it has been running", got)
	}
	d.Faults.Set(func(f *local.Faults) { f.Hold = nil })
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#run-status[data-run-status="succeeded-with-warnings"]`)))
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Fatal("the run page reloaded itself; it should have followed the run's stream")
	}
	if got := b.Text("#run-header"); !strings.Contains(got, "took") || strings.Contains(got, "running for") {
		t.Errorf("the header of the finished run = %q, want how long it took", got)
	}
	page := b.Text("main")
	for _, want := range []string{"succeeded · with warnings", "1 route deferred", "cert deferred · domain not pointing here yet", "warning: TLS deferred: wiki.test"} {
		if !strings.Contains(page, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
	rows := browsertest.Eval[[]string](b, `[...document.querySelectorAll("[id^=checkpoint-]")].map(e => e.id + ":" + e.className)`)
	seen := map[string]bool{}
	for _, r := range rows {
		id, _, _ := strings.Cut(r, ":")
		if seen[id] {
			t.Errorf("checkpoint row %s appears twice", id)
		}
		seen[id] = true
		if strings.Contains(r, "checkpoint-pending") || strings.Contains(r, "checkpoint-running") {
			t.Errorf("checkpoint row %s still shows an unfinished step after the run ended", r)
		}
	}
	if len(rows) < 8 {
		t.Errorf("%d checkpoint rows, want every step of the production example", len(rows))
	}
	if n := browsertest.Eval[int](b, `document.querySelectorAll("[data-while-running]").length`); n != 0 {
		t.Errorf("the cancel button is still offered after the run ended")
	}
	if got := b.Text("#run-summary"); !strings.Contains(got, "Summary") {
		t.Errorf("the run's summary did not appear when it ended: %q", got)
	}
	b.Screenshot("run-live-finished")

	// The environment page lists a second deploy as it starts and ends.
	b.Do(chromedp.Navigate(s.URL+envPath), chromedp.WaitVisible(chromedp.CSS("#latest-runs")))
	browsertest.Eval[any](b, `window.studioMarker = "not reloaded"`)
	if resp, _ := s.PostForm(t, admin, envPath+"/deploys", url.Values{"revision": {"1"}, "redeploy": {"1"}}); resp.StatusCode != 303 {
		t.Fatalf("redeploy = %d, want 303", resp.StatusCode)
	}
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#latest-runs li:nth-child(2)`)))
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#latest-runs li:first-child [data-run-status="succeeded-with-warnings"]`)))
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Error("the environment page reloaded itself; it should have followed the environment's stream")
	}

	// The domain arrives and someone else asks for a check: the reconcile
	// run issues the certificate, and the open page shows the run and the
	// issued certificate without a reload.
	const badge = `[data-live="service-state-wiki.test"]`
	if got := browsertest.Eval[[]string](b, `[...document.querySelectorAll('`+badge+`')].map(e => e.textContent)`); len(got) != 2 || got[0] != "DNS pending" || got[1] != "DNS pending" {
		t.Fatalf("TLS states of wiki.test (by its route and in the certificates card) = %q before the domain arrives, want DNS pending twice", got)
	}
	// Check now for every pending domain, and one beside what to do about
	// wiki.test.
	if n := browsertest.Eval[int](b, `document.querySelectorAll("#tls form[data-while-pending]").length`); n != 1 {
		t.Fatalf("%d Check now buttons for every domain while the certificate is pending, want 1", n)
	}
	if n := browsertest.Eval[int](b, `document.querySelectorAll('#tls [data-dns-pending="wiki.test"] form').length`); n != 1 {
		t.Fatalf("%d Check now buttons beside wiki.test's DNS instructions, want 1", n)
	}
	dns.Set("wiki.test", "127.0.0.1")
	if resp, _ := s.PostForm(t, admin, envPath+"/probe", nil); resp.StatusCode != 303 {
		t.Fatalf("check now = %d, want 303", resp.StatusCode)
	}
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#tls ` + badge + `[data-service-state="issued"]`)))
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#latest-runs li:first-child [data-run-kind="reconcile"]`)))
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Error("the environment page reloaded itself; it should have followed the environment's stream")
	}
	if got := browsertest.Eval[[]string](b, `[...document.querySelectorAll('`+badge+`')].map(e => e.textContent)`); len(got) != 2 || got[0] != "issued" || got[1] != "issued" {
		t.Errorf("TLS states of wiki.test after the reconcile = %q, want issued by its route and in the certificates card", got)
	}
	if n := browsertest.Eval[int](b, `document.querySelectorAll("#tls form").length`); n != 0 {
		t.Errorf("Check now is still offered once every certificate is issued")
	}
	b.Screenshot("environment-live-issued")

	// A deploy of another revision while the page is open: the page says
	// that it shows what ran before, and offers a reload.
	// On screen, not only in the markup: the element must not be rendered.
	if browsertest.Eval[bool](b, `document.getElementById("env-outdated").getClientRects().length > 0`) {
		t.Fatal("the page shows that it is outdated before any revision changed")
	}
	manifest := strings.Replace(exampleManifest(t, "production"), "max: 5", "max: 8", 1)
	if resp, body := s.PostForm(t, admin, "/projects/team-wiki/revisions", url.Values{"manifest": {manifest}}); resp.StatusCode != 303 {
		t.Fatalf("new revision = %d: %.300s", resp.StatusCode, body)
	}
	if resp, body := s.PostForm(t, admin, envPath+"/deploys", url.Values{"revision": {"2"}}); resp.StatusCode != 303 {
		t.Fatalf("deploy of revision 2 = %d: %.300s", resp.StatusCode, body)
	}
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#env-outdated`)))
	if got := b.Text("#env-outdated"); !strings.Contains(got, "Reload") {
		t.Errorf("outdated notice = %q, want a reload link", got)
	}
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Error("the environment page reloaded itself; it should have said it is outdated")
	}
	b.Screenshot("environment-live-outdated")
}

// TestBrowserRunsListFollowsTheEnvironment opens an environment's runs
// list before it has any run: a deploy appears at the top as it starts
// and its row turns to its outcome when it ends, a second one appears
// above it, each run is listed once, and the page never reloads.
func TestBrowserRunsListFollowsTheEnvironment(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{StepDelay: 150 * time.Millisecond}
	s, admin := deployableWiki(t, d, dns, "127.0.0.2") // elsewhere: the route is deferred
	const envPath = "/projects/team-wiki/environments/production"
	// The first deploy's web rollout waits until the list was seen showing
	// the run running.
	d.Faults.Set(func(f *local.Faults) { f.Hold = map[string]bool{"web": true} })
	release := func() { d.Faults.Set(func(f *local.Faults) { f.Hold = nil }) }
	t.Cleanup(release)

	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+envPath+"/runs"), chromedp.WaitVisible(chromedp.CSS("h1")))
	if got := b.Text("main"); !strings.Contains(got, "No runs yet.") {
		t.Fatalf("runs list of a new environment = %q, want it to say there are no runs", got)
	}
	browsertest.Eval[any](b, `window.studioMarker = "not reloaded"`)

	if resp, body := s.PostForm(t, admin, envPath+"/deploys", url.Values{"revision": {"1"}}); resp.StatusCode != 303 {
		t.Fatalf("deploy = %d: %.300s", resp.StatusCode, body)
	}
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#runs-rows tr:first-child [data-run-status="running"]`)))
	if got := b.Text("main"); strings.Contains(got, "No runs yet.") {
		t.Error("the runs list still says there are no runs once one started")
	}
	release()
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#runs-rows tr:first-child [data-run-status="succeeded-with-warnings"]`)))
	if got := b.Text("#runs-rows tr:first-child"); !strings.Contains(got, "1 route deferred") {
		t.Errorf("the finished run's row = %q, want its deferred route", got)
	}

	if resp, body := s.PostForm(t, admin, envPath+"/deploys", url.Values{"revision": {"1"}, "redeploy": {"1"}}); resp.StatusCode != 303 {
		t.Fatalf("redeploy = %d: %.300s", resp.StatusCode, body)
	}
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#runs-rows tr:nth-child(2) [data-run-status="succeeded-with-warnings"]`)))
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#runs-rows tr:first-child [data-run-status="succeeded-with-warnings"]`)))
	ids := browsertest.Eval[[]int](b, `[...document.querySelectorAll("#runs-rows tr")].map(e => Number(e.dataset.runId))`)
	if len(ids) != 2 || ids[0] <= ids[1] {
		t.Errorf("runs listed = %v, want the two runs once each, newest first", ids)
	}
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Error("the runs list reloaded itself; it should have followed the environment's stream")
	}
	b.Screenshot("runs-list-live")
}

// TestBrowserRunsPagesShowOnlyTheirOwnRuns: with more runs than a page
// holds, the first page inserts a run that starts, but not an old run that
// finishes (it belongs on a later page); a page of older runs updates its
// own rows in place and inserts neither a new run nor one of another page.
func TestBrowserRunsPagesShowOnlyTheirOwnRuns(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	var ids []int64 // oldest first
	for range 150 {
		ids = append(ids, s.CreateRun(t, env, "deploy"))
	}
	// event appends an environment event about run id (whose status it
	// sets first), as the runner does when a run starts or ends, and
	// returns its sequence number.
	event := func(id int64, typ, status string) int64 {
		t.Helper()
		var seq int64
		err := s.DB.Pool.QueryRow(t.Context(), `
			WITH r AS (UPDATE runs SET status = $3, started_at = COALESCE(started_at, now()),
			                          finished_at = CASE WHEN $4::text = 'run.finished' THEN now() END WHERE id = $2),
			     s AS (UPDATE environments SET last_event_seq = last_event_seq + 1 WHERE id = $1 RETURNING id, last_event_seq),
			     i AS (INSERT INTO environment_events (environment_id, seq, run_id, payload)
			           SELECT id, last_event_seq, $2, jsonb_build_object('type', $4::text, 'run', jsonb_build_object('id', $2::bigint, 'kind', 'deploy', 'status', $3::text)) FROM s
			           RETURNING environment_id, seq)
			SELECT i.seq FROM i, LATERAL (SELECT pg_notify('environment_events.' || i.environment_id::text, i.environment_id::text || ':' || i.seq::text)) n`,
			env.ID, id, status, typ).Scan(&seq)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	rows := func(b *browsertest.Browser) []int64 {
		return browsertest.Eval[[]int64](b, `[...document.querySelectorAll("#runs-rows tr")].map(e => Number(e.dataset.runId))`)
	}
	const list = "/projects/hello-world/environments/production/runs"

	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+list), chromedp.WaitVisible(chromedp.CSS("#runs-rows")))
	if got := rows(b); len(got) != 100 || got[0] != ids[149] || got[99] != ids[50] {
		t.Fatalf("first page lists %d runs (%v…), want the newest 100, %d to %d", len(got), got[:min(3, len(got))], ids[149], ids[50])
	}
	old := ids[9] // on the second page
	seq := event(old, "run.finished", "succeeded")
	b.Do(chromedp.WaitReady(chromedp.CSS(fmt.Sprintf(`[data-stream][data-last-seq="%d"]`, seq))))
	if got := rows(b); len(got) != 100 || slices.Contains(got, old) {
		t.Errorf("after run %d (of the second page) finished, the first page lists %d runs, with it: %v", old, len(got), slices.Contains(got, old))
	}
	fresh := s.CreateRun(t, env, "deploy")
	seq = event(fresh, "run.started", "running")
	b.Do(chromedp.WaitReady(chromedp.CSS(fmt.Sprintf(`[data-stream][data-last-seq="%d"]`, seq))))
	if got := rows(b); len(got) != 101 || got[0] != fresh {
		t.Errorf("after run %d started, the first page lists %d runs, starting with %d; want it at the top", fresh, len(got), got[0])
	}
	if got, want := b.Text(".pager [data-range-of]"), fmt.Sprintf("Runs %d to %d", fresh, ids[50]); got != want {
		t.Errorf("after run %d started, the pager says %q, want %q", fresh, got, want)
	}
	// No event follows, yet its duration keeps counting (by the second,
	// or by the minute once past one: 65 s covers both).
	elapsed := fmt.Sprintf(`#run-row-%d time[data-elapsed]`, fresh)
	first := b.Text(elapsed)
	deadline := time.Now().Add(65 * time.Second)
	for b.Text(elapsed) == first {
		if time.Now().After(deadline) {
			t.Fatalf("the running run's duration stayed %q for 65 s", first)
		}
		time.Sleep(100 * time.Millisecond)
	}

	older := browsertest.Eval[string](b, `document.querySelector('a[href*="?before="]').href`)
	b.Do(chromedp.Navigate(older), chromedp.WaitVisible(chromedp.CSS("#runs-rows")))
	if got := rows(b); len(got) != 50 || got[0] != ids[49] || got[49] != ids[0] {
		t.Fatalf("second page lists %d runs, want the oldest 50", len(got))
	}
	event(old, "run.finished", "failed")
	b.Do(chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#run-row-%d [data-run-status="failed"]`, old))))
	newer := s.CreateRun(t, env, "deploy")
	seq = event(newer, "run.started", "running")
	b.Do(chromedp.WaitReady(chromedp.CSS(fmt.Sprintf(`[data-stream][data-last-seq="%d"]`, seq))))
	if got := rows(b); len(got) != 50 || slices.Contains(got, newer) || slices.Contains(got, fresh) {
		t.Errorf("after run %d started, the second page lists %d runs (with it: %v); a page of older runs takes no new one", newer, len(got), slices.Contains(got, newer))
	}
	b.Screenshot("runs-list-older-page")
	b.Do(chromedp.EmulateViewport(390, 844))
	if w := browsertest.Eval[int](b, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("a page of older runs is %dpx wide on a 390px phone", w)
	}
	b.Screenshot("runs-list-older-page-phone")
}
