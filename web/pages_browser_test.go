package web_test

import (
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// page is one page the layout and accessibility test visits: a path to
// open, or a form to fill and send first (a failed post shows the page
// with its errors).
type page struct {
	name string
	path string
	// fill sets these fields (by CSS selector) and submits the form of
	// the first one.
	fill map[string]string
	// wait is a selector to wait for, "main" when empty.
	wait string
	// main marks the pages whose screenshots the README shows.
	main bool
	// script runs on the page before it is checked (to show a state the
	// page only reaches over time).
	script string
}

// longLine is one long line of a manifest, the kind that once widened the
// report on /validate past a phone's screen.
var longLine = "name: hello-world\ndescription: " + strings.Repeat("a-very-long-description-without-spaces-", 8) + "\napplications:\n  web:\n    image: nginx\n    replicas: lots\n"

// TestBrowserEveryPageFitsAndPassesAxe opens every page of the Studio at
// 1280 and 390 CSS pixels, in light and dark, and fails when a page is
// wider than the screen or breaks a WCAG 2.1 A/AA rule of axe-core.
// STUDIO_SCREENSHOTS=DIR keeps a screenshot of each;
// STUDIO_DOCS_SCREENSHOTS=1 remakes the README's screenshots of the main
// pages in docs/screenshots.
func TestBrowserEveryPageFitsAndPassesAxe(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("visits every page four times")
	}
	// Public addresses: a DNS-pending domain shows the records to create.
	deploys := &webtest.Deploys{ReconcileInterval: time.Minute,
		PublicAddresses: []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::7")}}
	s := webtest.Start(t, webtest.WithDeploys(deploys))
	c := s.SignInLocal(t)
	// The reference's production example in two revisions, one deployed.
	v1 := exampleManifest(t, "production")
	v2 := strings.Replace(strings.Replace(v1, "max: 5", "max: 8", 1), "      SESSION_SECRET: \"${SESSION_SECRET}\"\n", "", 1)
	for _, step := range []struct{ path, field, value string }{
		{"/projects", "manifest", v1},
		{"/projects/team-wiki/revisions", "manifest", v2},
		{"/projects/team-wiki/environments", "name", "production"},
		{"/projects/team-wiki/environments", "name", "staging"},
		{"/projects/team-wiki/environments/production/values/import", "dotenv", "APP_DOMAIN=wiki.example.com\nSESSION_SECRET=s3cr3t-for-screens\nLEFT_OVER=1\n"},
	} {
		if resp, body := s.PostForm(t, c, step.path, url.Values{step.field: {step.value}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("fixture %s = %d\n%s", step.path, resp.StatusCode, body)
		}
	}
	if _, err := s.DB.Pool.Exec(t.Context(), `INSERT INTO environment_values (environment_id, name, version) SELECT id, 'OLD_TOKEN', 0 FROM environments WHERE name = 'production'`); err != nil {
		t.Fatal(err)
	}
	// A real deploy of revision 1, which needs SESSION_SECRET (revision 2
	// no longer does, so the import skipped it): its domain resolves
	// nowhere, so its route is deferred and the run ends with warnings.
	if resp, body := s.PostForm(t, c, "/projects/team-wiki/environments/production/values",
		url.Values{"name": {"SESSION_SECRET"}, "value": {"s3cr3t-for-screens"}, "confirm_orphan": {"1"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set SESSION_SECRET = %d\n%s", resp.StatusCode, body)
	}
	if resp, body := s.PostForm(t, c, "/projects/team-wiki/environments/production/deploys", url.Values{"revision": {"1"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("deploy = %d\n%s", resp.StatusCode, body)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; {
		var finished bool
		var status string
		if err := s.DB.Pool.QueryRow(t.Context(), `SELECT finished_at IS NOT NULL, status FROM runs WHERE id = 1`).Scan(&finished, &status); err != nil {
			t.Fatal(err)
		}
		if finished {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deploy did not finish within 3 minutes: it is %s", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Issue 25: a second release after SESSION_SECRET changed (so a
	// rollback to the first brings v1 back), then a value changed since
	// and a deploy that fails: the home page, the environment page and
	// the rollback plan show these states.
	waitIdle := func() {
		for deadline := time.Now().Add(3 * time.Minute); ; {
			var open string
			if err := s.DB.Pool.QueryRow(t.Context(), `SELECT coalesce(string_agg(id || ' ' || status, ', '), '') FROM runs WHERE finished_at IS NULL`).Scan(&open); err != nil {
				t.Fatal(err)
			}
			if open == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("a deploy did not finish within 3 minutes: %s", open)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, step := range []struct {
		path string
		form url.Values
	}{
		{"/values", url.Values{"name": {"SESSION_SECRET"}, "value": {"s3cr3t-for-screens-2"}, "confirm_orphan": {"1"}}},
		{"/deploys", url.Values{"revision": {"1"}, "redeploy": {"1"}}},
		{"/values", url.Values{"name": {"SESSION_SECRET"}, "value": {"s3cr3t-for-screens-3"}, "confirm_orphan": {"1"}}},
	} {
		if resp, body := s.PostForm(t, c, "/projects/team-wiki/environments/production"+step.path, step.form); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("fixture %s = %d\n%s", step.path, resp.StatusCode, body)
		}
		waitIdle()
	}
	deploys.Faults.Set(func(f *local.Faults) { f.Build = map[string]string{"web": "the image build ran out of disk space"} })
	if resp, body := s.PostForm(t, c, "/projects/team-wiki/environments/production/deploys", url.Values{"revision": {"2"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("failing deploy = %d\n%s", resp.StatusCode, body)
	}
	waitIdle()
	deploys.Faults.Set(func(f *local.Faults) { f.Build = nil })
	prod, err := s.DB.EnvironmentByName(t.Context(), "team-wiki", "production")
	if err != nil {
		t.Fatal(err)
	}
	s.AddMember(t, prod, "ada.lovelace.with.a.long.address@analytical-engines.example.com", store.RoleDeployer)
	s.AddMember(t, prod, "grace@example.com", store.RoleViewer)
	member := s.UserID(t, "grace@example.com")
	const env = "/projects/team-wiki/environments/production"

	pages := []page{
		{name: "validate", path: "/validate", main: true},
		{name: "validate-long-line", path: "/validate", fill: map[string]string{"#manifest": longLine}, wait: ".verdict"},
		{name: "validate-valid", path: "/validate", fill: map[string]string{"#manifest": v1}, wait: ".verdict"},
		{name: "home", path: "/", main: true},
		{name: "project", path: "/projects/team-wiki", main: true},
		{name: "project-new", path: "/projects/new"},
		{name: "project-new-invalid", path: "/projects/new", fill: map[string]string{"#manifest": longLine}, wait: ".verdict"},
		{name: "revision", path: "/projects/team-wiki/revisions/2", main: true},
		{name: "revision-new", path: "/projects/team-wiki/revisions/new"},
		{name: "revision-new-invalid", path: "/projects/team-wiki/revisions/new", fill: map[string]string{"#manifest": longLine}, wait: ".verdict"},
		{name: "environment", path: env, main: true},
		{name: "environment-undeployed", path: "/projects/team-wiki/environments/staging"},
		{name: "values", path: env + "/values", main: true},
		{name: "values-invalid", path: env + "/values", fill: map[string]string{"#value-name": "lower_case"}},
		{name: "value-delete", path: env + "/values/APP_DOMAIN/delete"},
		{name: "values-prune", path: env + "/values/prune"},
		{name: "members", path: env + "/members", main: true},
		{name: "member-remove", path: env + "/members/" + strconv.FormatInt(member, 10) + "/remove"},
		{name: "environment-settings", path: env + "/settings"},
		{name: "project-settings", path: "/projects/team-wiki/settings"},
		{name: "environment-delete", path: env + "/delete", fill: map[string]string{"#delete-confirm": "not-it"}},
		{name: "project-delete", path: "/projects/team-wiki/delete"},
		{name: "deploy-plan", path: env + "/deploys/new?revision=2", main: true},
		{name: "deploy-plan-rollback", path: env + "/deploys/new?release=1", main: true},
		{name: "runs", path: env + "/runs"},
		{name: "run", path: env + "/runs/1", main: true},
		// Its log filtered on the server, and the failed deploy whose
		// heading links to its build's last log line.
		{name: "run-log-filtered", path: env + "/runs/1?q=DNS"},
		{name: "run-failed", path: env + "/runs/3"},
		// The connection banner and the stale state, as live.js shows them
		// while the stream is down (TestBrowserShowsTheConnectionState cuts
		// a real stream).
		{name: "run-live-paused", path: env + "/runs/1", script: `(() => {
			const b = document.querySelector("#live-banner"); b.dataset.state = "paused";
			b.textContent = "Live updates paused \u2014 reconnecting in 4 s\u2026"; b.hidden = false;
			const st = document.querySelector("#run-status"); st.setAttribute("data-stale", "");
			const n = document.createElement("span"); n.className = "stale-note"; n.setAttribute("data-stale-note", "");
			n.textContent = "\u00b7 last known 12s ago"; st.after(n); })()`},
		{name: "backups", path: env + "/backups", main: true},
		{name: "admin", path: "/admin"},
		{name: "webhooks", path: env + "/webhooks"},
		{name: "webhooks-admin", path: "/admin/webhooks"},
		{name: "audit", path: "/audit", main: true},
		{name: "not-found", path: "/projects/no-such-project"},
	}

	// About a hundred page visits, each checked by axe-core: a few minutes
	// on a busy two-core machine.
	b := browsertest.NewFor(t, 10*time.Minute)
	// The sign-in page first, before signing in.
	visitAll(t, b, s, []page{{name: "login", path: "/login"}})
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	visitAll(t, b, s, pages)
}

// TestBrowserAxeFindsWhatAPageBreaks: the accessibility check the walks
// rely on reports a broken page, in the first document of a tab (where
// axe-core is evaluated) and in the ones after it (where the tab loads it
// with every new document), and passes the same page mended.
func TestBrowserAxeFindsWhatAPageBreaks(t *testing.T) {
	t.Parallel()
	b := browsertest.New(t)
	const head = `<!doctype html><html lang="en"><head><title>t</title></head><body><main><h1>t</h1>`
	for i, doc := range []struct{ body, want string }{
		{`<img src="data:,">`, "image-alt"},
		{`<input type="text">`, "label"},
		{`<img src="data:," alt="a dot"><label>Name <input type="text"></label>`, ""},
		{`<a href="#"></a>`, "link-name"},
	} {
		b.Do(chromedp.Navigate("data:text/html," + url.PathEscape(head+doc.body+`</main></body></html>`)))
		var ids []string
		for _, v := range b.Axe(browsertest.WCAG21AA) {
			ids = append(ids, v.ID)
		}
		if doc.want == "" && len(ids) > 0 || doc.want != "" && !slices.Contains(ids, doc.want) {
			t.Errorf("document %d (%s): axe reports %v, want %q", i+1, doc.body, ids, doc.want)
		}
	}
}

// TestBrowserALookChangedUnderALoadedPageIsSeen: the walks load a page
// once and change the width and colour scheme under it (visitAt), so a
// page that breaks only on a phone or only in dark must show it after the
// change, and mend after the change back, as it does when loaded so.
func TestBrowserALookChangedUnderALoadedPageIsSeen(t *testing.T) {
	t.Parallel()
	b := browsertest.New(t)
	const doc = `<!doctype html><html lang="en"><head><title>t</title><meta name="viewport" content="width=device-width">
		<style>body { margin: 0; color: #000; background: #fff } .box { width: 500px }
		@media (max-width: 600px) { .box { width: 900px } }
		@media (prefers-color-scheme: dark) { .note { color: #333; background: #000 } }</style></head>
		<body><main><h1>t</h1><div class="box">a box</div><p class="note">a note</p></main></body></html>`
	b.Do(chromedp.Navigate("data:text/html," + url.PathEscape(doc)))
	contrast := func() bool {
		return slices.ContainsFunc(b.Axe(browsertest.WCAG21AA), func(v browsertest.Violation) bool { return v.ID == "color-contrast" })
	}
	for _, l := range []struct {
		width          int64
		scheme         string
		wide, contrast bool
	}{{1280, "light", false, false}, {390, "light", true, false}, {390, "dark", true, true}, {1280, "dark", false, true}, {1280, "light", false, false}} {
		b.Emulate(l.width, l.scheme)
		if extra, _ := b.Overflow(); (extra > 0) != l.wide {
			t.Errorf("at %d px, %s: %d px wider than the screen, want wider: %v", l.width, l.scheme, extra, l.wide)
		}
		if got := contrast(); got != l.contrast {
			t.Errorf("at %d px, %s: axe reports color-contrast %v, want %v", l.width, l.scheme, got, l.contrast)
		}
	}
}

// looks are the widths and colour schemes every page is checked in: a
// desktop and a phone, light and dark.
var looks = []struct {
	width  int64
	scheme string
}{{1280, "light"}, {1280, "dark"}, {390, "light"}, {390, "dark"}}

// visitAll checks pages in every look, signed in as b is. The pages are
// dealt to four windows (browser contexts with b's cookies) that walk at
// once: a walk only reads (the forms it fills are refused), so they share
// the Studio. Each page is loaded once and checked in the four looks
// (visitAt). The windows walk inside the caller's test (not as parallel
// subtests, which would queue behind other tests while b's time limit
// runs), and visitAll returns when all of them are done, so the caller may
// then change what the pages show.
func visitAll(t *testing.T, b *browsertest.Browser, s *webtest.Server, pages []page) {
	t.Helper()
	session := b.Session()
	const windows = 4
	var walks sync.WaitGroup
	for w := range min(windows, len(pages)) {
		var dealt []page
		for i := w; i < len(pages); i += windows {
			dealt = append(dealt, pages[i])
		}
		walks.Go(func() {
			t.Run("window-"+strconv.Itoa(w+1), func(t *testing.T) {
				visitAt(t, session.Open(t), s, dealt)
			})
		})
	}
	walks.Wait()
}

// visitInTurn is visitAll in b alone, for a page that follows a live
// stream: four windows following at once slow each other down more than
// they gain (the live app-logs page took 40 s instead of 3 in each of four
// parallel windows).
func visitInTurn(t *testing.T, b *browsertest.Browser, s *webtest.Server, pages []page) {
	t.Helper()
	visitAt(t, b, s, pages)
}

// visitAt loads each page once, at 1280 px in light, and checks it in
// every look: the viewport and the colour scheme change under the loaded
// document, as when a window is resized or the system turns dark. The
// pages are rendered on the server and none lays itself out by script at
// load, so a page resized to a width is the page loaded at that width; one
// load instead of four spares the browser three loads and three
// evaluations of axe-core per page, most of a walk's time.
func visitAt(t *testing.T, b *browsertest.Browser, s *webtest.Server, pages []page) {
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			b.Emulate(looks[0].width, looks[0].scheme)
			wait := p.wait
			if wait == "" {
				wait = "main"
			}
			b.Do(chromedp.Navigate(s.URL+p.path), chromedp.WaitVisible(chromedp.CSS("main")))
			if len(p.fill) > 0 {
				var first string
				for sel, v := range p.fill {
					b.Do(chromedp.SetValue(chromedp.CSS(sel), v))
					first = sel
				}
				// A form the browser finds invalid is not sent (the
				// page shows its fields invalid); a valid one loads
				// the answer's page, a new document to wait for.
				sent := browsertest.Eval[bool](b, `(() => { const f = document.querySelector(`+strconv.Quote(first)+`).form;
					if (!f.checkValidity()) { f.reportValidity(); return false; }
					window.__before = 1; f.requestSubmit(); return true; })()`)
				if sent {
					b.WaitNewPage(wait)
				} else {
					b.Do(chromedp.WaitVisible(chromedp.CSS(wait)))
				}
			}
			if p.script != "" {
				b.Do(chromedp.WaitReady(chromedp.CSS("#live-banner")), chromedp.Evaluate[chromedp.Void](p.script))
			}
			for _, l := range looks {
				checkLook(t, b, p, l.width, l.scheme)
			}
		})
	}
}

// checkLook checks the loaded page p in one look: it fits the width, its
// tables break no word at a phone's width, its controls are in sight, and
// it passes every WCAG 2.1 A/AA rule of axe-core. STUDIO_DOCS_SCREENSHOTS=1
// remakes the README's screenshots of the main pages.
func checkLook(t *testing.T, b *browsertest.Browser, p page, width int64, scheme string) {
	look := strconv.FormatInt(width, 10) + "-" + scheme
	t.Run(look, func(t *testing.T) {
		b.Emulate(width, scheme)
		if extra, culprits := b.Overflow(); extra > 0 {
			t.Errorf("%s at %d px is %d px wider than the screen: %s", p.path, width, extra, culprits)
		}
		if broken := b.BrokenTokens(24); width < 640 && len(broken) > 0 {
			t.Errorf("%s at %d px breaks words inside tables: %s", p.path, width, strings.Join(broken, ", "))
		}
		if hidden := b.ControlsOutOfSight(); len(hidden) > 0 {
			t.Errorf("%s at %d px has controls out of sight: %s", p.path, width, strings.Join(hidden, "; "))
		}
		// No rule is disabled: every page must pass all of them.
		for _, v := range b.Axe(browsertest.WCAG21AA) {
			t.Errorf("%s at %d px, %s: %s", p.path, width, scheme, v)
		}
		name := p.name + "-" + look
		b.Screenshot(name)
		if p.main && (scheme == "light" || p.name == "environment") && os.Getenv("STUDIO_DOCS_SCREENSHOTS") == "1" {
			if err := os.WriteFile(filepath.Join("..", "docs", "screenshots", name+".png"), b.FullScreenshot(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
}
