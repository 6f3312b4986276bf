package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserCountdownWordingMatchesGo: the page's script words countdowns
// and elapsed times exactly as the server renders them (humanize.Until and
// humanize.Duration), so that a countdown does not change its wording when
// the script takes over.
func TestBrowserCountdownWordingMatchesGo(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	ms := []int64{-5000, 0, 1, 999, 1000, 1001, 12_000, 59_000, 59_001, 60_000, 61_000, 119_999, 3_000_000, 3_150_000,
		3_599_000, 3_599_001, 3_600_000, 3_660_000, 3_900_000, 7_199_000, 86_400_000, 115_200_000 + 540_000}
	list, _ := json.Marshal(ms)
	until := browsertest.Eval[[]string](b, ``+string(list)+`.map(window.studioFormat.until)`)
	elapsed := browsertest.Eval[[]string](b, ``+string(list)+`.filter(x => x >= 0).map(window.studioFormat.elapsed)`)
	i := 0
	for k, m := range ms {
		d := time.Duration(m) * time.Millisecond
		if want := humanize.Until(d); until[k] != want {
			t.Errorf("%v until: script says %q, server %q", d, until[k], want)
		}
		if m < 0 {
			continue
		}
		if want := humanize.Duration(d); elapsed[i] != want {
			t.Errorf("%v elapsed: script says %q, server %q", d, elapsed[i], want)
		}
		i++
	}
}

// waitText polls until the text of selector satisfies ok, and returns it.
func waitText(t *testing.T, b *browsertest.Browser, what, selector string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := browsertest.Eval[string](b, `(document.querySelector(`+jsString(selector)+`) || {}).textContent || ""`)
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			b.Screenshot("wait-" + strings.ReplaceAll(what, " ", "-"))
			t.Fatalf("timed out waiting for %s: %s reads %q", what, selector, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestBrowserDNSPendingSaysWhatToDoAndCountsDown deploys with the domain
// pointing elsewhere and opens the real run and environment pages: for the
// DNS-pending domain they show what it resolves to, the A and AAAA records
// to create from the installation's public addresses, and the next
// automatic check, whose countdown ticks and reads "checking…" once due;
// Check now on the run page checks that domain and comes back to the run.
func TestBrowserDNSPendingSaysWhatToDoAndCountsDown(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{ReconcileInterval: 20 * time.Second,
		PublicAddresses: []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::7")}}
	s, admin := deployableWiki(t, d, dns, "127.0.0.2")
	const envPath = "/projects/team-wiki/environments/production"
	resp, _ := s.PostForm(t, admin, envPath+"/deploys", url.Values{})
	runPath := resp.Header.Get("Location")
	waitForRun(t, s, admin, runPath)

	// Generous: on a busy machine each page, and each check, may come late.
	b := browsertest.NewFor(t, 6*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+runPath), chromedp.WaitVisible(chromedp.CSS(`[data-checkpoint-kind="issue-tls"] [data-dns-pending="wiki.test"]`)))
	const block = `[data-checkpoint-kind="issue-tls"] [data-dns-pending="wiki.test"]`
	got := b.Text(block)
	for _, want := range []string{"127.0.0.2", "A wiki.test → 203.0.113.7", "AAAA wiki.test → 2001:db8::7", "Next automatic check at", "Check now"} {
		if !strings.Contains(got, want) {
			t.Errorf("the run's TLS checkpoint says %q, want %q in it", got, want)
		}
	}
	countdown := block + ` [data-next-check] time[data-countdown]`
	first := b.Text(countdown)
	if first == humanize.Due {
		// A busy machine brought the page after its 20 s slot ended: it
		// reads "checking…" until the next check, which restarts it.
		first, _ = reconcileRestartsCountdown(t, s, d, b, countdown)
	}
	if !strings.HasPrefix(first, "in ") || !strings.HasSuffix(first, " s") {
		t.Errorf("next automatic check reads %q, want a countdown in seconds", first)
	}
	b.Screenshot("run-dns-pending")
	waitText(t, b, "the countdown to tick", countdown, func(s string) bool { return s != first })
	waitText(t, b, "checking…", countdown, func(s string) bool { return s == "checking…" })

	// The environment page's Certificates card says the same.
	b.Do(chromedp.Navigate(s.URL+envPath), chromedp.WaitVisible(chromedp.CSS(`#tls [data-dns-pending="wiki.test"]`)))
	got = b.Text(`#tls [data-dns-pending="wiki.test"]`)
	for _, want := range []string{"127.0.0.2", "A wiki.test → 203.0.113.7", "AAAA wiki.test → 2001:db8::7", "Next automatic check at"} {
		if !strings.Contains(got, want) {
			t.Errorf("the certificates card says %q, want %q in it", got, want)
		}
	}
	envCountdown := `#tls [data-dns-pending="wiki.test"] [data-next-check] time[data-countdown]`
	b.Screenshot("environment-dns-pending")
	// It ticks to "checking…" and stays there until the domain is checked
	// (River's reconciler is off in tests). On a busy machine the page may
	// come after its 20 s slot ended, reading "checking…" at once.
	if first = b.Text(envCountdown); first != humanize.Due {
		waitText(t, b, "the environment page's countdown to tick", envCountdown, func(s string) bool { return s != first })
	}
	waitText(t, b, "the environment page's countdown to come due", envCountdown, func(s string) bool { return s == humanize.Due })
	// The reconcile, however late it comes, restarts the countdown: live,
	// then on reload, counted from that check.
	restarted, probed := reconcileRestartsCountdown(t, s, d, b, envCountdown)
	waitText(t, b, "the restarted countdown to tick", envCountdown, func(s string) bool { return s != restarted })
	b.Do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(envCountdown)))
	if c := readCountdown(t, b, envCountdown); !c.countsFrom(probed, d.ReconcileInterval) {
		t.Errorf("after a reload the countdown reads %q until %s (%d ms left), want it counted from the check at %s",
			c.Text, c.DateTime, c.Left, probed.UTC().Format(time.RFC3339Nano))
	}

	// Check now, from the run page, comes back to the run page.
	b.Do(chromedp.Navigate(s.URL+runPath), chromedp.WaitVisible(chromedp.CSS(block+" form button")))
	b.Submit(block+" form button", ".flash")
	if got := b.Text(".flash"); !strings.Contains(got, "wiki.test does not point here yet") {
		t.Errorf("Check now says %q", got)
	}
	if got := browsertest.Eval[string](b, `location.pathname`); got != runPath {
		t.Errorf("Check now on the run page went to %s, want back to %s", got, runPath)
	}
}

// countdown is what a countdown element shows: its text, the time it
// counts to, and how many milliseconds the page had left until it.
type countdown struct {
	Text     string `json:"text"`
	DateTime string `json:"datetime"`
	Left     int64  `json:"left"`
}

// countdownJS reads el (a time[data-countdown]) as a countdown, in JSON.
const countdownJS = `JSON.stringify({text: el.textContent, datetime: el.getAttribute("datetime"), left: Date.parse(el.getAttribute("datetime")) - Date.now()})`

func readCountdown(t *testing.T, b *browsertest.Browser, selector string) countdown {
	t.Helper()
	var c countdown
	if err := json.Unmarshal([]byte(browsertest.Eval[string](b, `(function () { var el = document.querySelector(`+jsString(selector)+`); return `+countdownJS+`; })()`)), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// countsFrom reports whether c counts to an automatic check after the
// one at probed, and reads so: "in …" while that time is ahead, "checking…"
// only once it has passed (a busy machine may read the page that late).
func (c countdown) countsFrom(probed time.Time, every time.Duration) bool {
	at, err := time.Parse(time.RFC3339, c.DateTime)
	if err != nil || at.Before(probed.Add(every).Truncate(time.Second)) {
		return false
	}
	return strings.HasPrefix(c.Text, "in ") && c.Left > 0 || c.Text == humanize.Due && c.Left <= 0
}

// reconcileRestartsCountdown queues the reconcile River's periodic job
// queues (the job is off in tests), waits in the database until it has
// checked wiki.test again, and then for the page's countdown (selector,
// at "checking…") to restart from that check, live. It returns what the
// countdown read once restarted, and when the check was. A frame that
// comes after its own next check (a busy machine) is not a restart the
// test can see: the reconcile is queued again, within a generous limit.
func reconcileRestartsCountdown(t *testing.T, s *webtest.Server, d *webtest.Deploys, b *browsertest.Browser, selector string) (string, time.Time) {
	t.Helper()
	ctx := t.Context()
	env, err := s.DB.EnvironmentByName(ctx, "team-wiki", "production")
	if err != nil {
		t.Fatal(err)
	}
	probedAt := func() time.Time {
		certs, err := s.DB.Certificates(ctx, env.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range certs {
			if c.Domain == "wiki.test" && c.ProbedAt != nil {
				return *c.ProbedAt
			}
		}
		return time.Time{}
	}
	// What the countdown reads right after each service.checked frame.
	browsertest.Eval[bool](b, `(function () {
		window.__checked = [];
		document.addEventListener("studio:event", function (e) {
			if (!e.detail || e.detail.type !== "service.checked") return;
			var el = document.querySelector(`+jsString(selector)+`);
			if (el) window.__checked.push(`+countdownJS+`);
		});
		return true;
	})()`)
	deadline := time.Now().Add(2 * time.Minute)
	for seen := 0; ; seen++ {
		before := probedAt()
		if err := d.Service.QueueReconciles(ctx); err != nil {
			t.Fatal(err)
		}
		probed := before
		for !probed.After(before) {
			if time.Now().After(deadline) {
				t.Fatalf("the reconcile did not check wiki.test again (last checked %v)", before)
			}
			time.Sleep(100 * time.Millisecond)
			probed = probedAt()
		}
		var c countdown
		for {
			if got := browsertest.Eval[string](b, `window.__checked.length > `+strconv.Itoa(seen)+` ? window.__checked[`+strconv.Itoa(seen)+`] : ""`); got != "" {
				if err := json.Unmarshal([]byte(got), &c); err != nil {
					t.Fatal(err)
				}
				break
			}
			if time.Now().After(deadline) {
				b.Screenshot("wait-countdown-restart")
				t.Fatalf("wiki.test was checked again at %s, but the page's countdown reads %q", probed.UTC().Format(time.RFC3339Nano), b.Text(selector))
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !c.countsFrom(probed, d.ReconcileInterval) {
			t.Fatalf("after the check at %s the countdown reads %q until %s (%d ms left), want it counted from that check",
				probed.UTC().Format(time.RFC3339Nano), c.Text, c.DateTime, c.Left)
		}
		if c.Text != humanize.Due {
			t.Logf("checked again at %s: the countdown restarted at %q", probed.UTC().Format(time.RFC3339Nano), c.Text)
			return c.Text, probed
		}
		t.Logf("checked again at %s: the page heard of it only after the next check was due; again", probed.UTC().Format(time.RFC3339Nano))
	}
}

// TestBrowserCertificateRetryCountsDownOnTheRunPage: a deploy whose
// certificate fails shows on its real run page the retry of the backoff,
// counting down, then "checking…". (The Studio's clock runs an hour
// behind the browser's, so the hour of backoff ends within the test.)
func TestBrowserCertificateRetryCountsDownOnTheRunPage(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{Resolver: dns}
	behind := func() time.Time { return time.Now().Add(-runs.Backoff(1) + 45*time.Second) }
	s := webtest.Start(t, webtest.WithDeploys(d), func(*web.Deps) { d.Service.Now, d.Service.Runner.Now = behind, behind })
	s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	admin := s.SignInLocal(t)
	for name, value := range map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": "x"} {
		if resp, _ := s.PostForm(t, admin, "/projects/team-wiki/environments/production/values", url.Values{"name": {name}, "value": {value}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("set %s: %d", name, resp.StatusCode)
		}
	}
	dns.Set("wiki.test", "127.0.0.1")
	d.Faults.Set(func(f *local.Faults) {
		f.Issuance = map[string]string{"wiki.test": "403 urn:ietf:params:acme:error:unauthorized"}
	})
	const envPath = "/projects/team-wiki/environments/production"
	resp, _ := s.PostForm(t, admin, envPath+"/deploys", url.Values{})
	runPath := resp.Header.Get("Location")
	waitForRun(t, s, admin, runPath)
	b := browsertest.NewFor(t, 3*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+runPath), chromedp.WaitVisible(chromedp.CSS(`[data-checkpoint-kind="issue-tls"] .tls-wait time[data-countdown]`)))
	const countdown = `[data-checkpoint-kind="issue-tls"] .tls-wait time[data-countdown]`
	if got := b.Text(`[data-checkpoint-kind="issue-tls"] .tls-wait`); !strings.HasPrefix(got, "next retry at ") {
		t.Errorf("the TLS checkpoint's wait reads %q", got)
	}
	first := b.Text(countdown)
	if !strings.HasPrefix(first, "in ") {
		t.Errorf("the retry countdown reads %q", first)
	}
	b.Screenshot("run-cert-retry-countdown")
	waitText(t, b, "the retry countdown to tick", countdown, func(s string) bool { return s != first })
	waitText(t, b, "checking…", countdown, func(s string) bool { return s == "checking…" })
}

// TestBrowserShowsTheConnectionState: when the stream of a real run page is
// cut at the server, a banner at the top of the viewport says live updates
// paused and when it reconnects, and the run's state is marked as the last
// known one; when the stream is back, the banner says "Reconnected", then
// goes, and the state is no longer stale.
func TestBrowserShowsTheConnectionState(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	s, admin := deployableWiki(t, &webtest.Deploys{}, dns, "127.0.0.2")
	const envPath = "/projects/team-wiki/environments/production"
	resp, _ := s.PostForm(t, admin, envPath+"/deploys", url.Values{})
	runPath := resp.Header.Get("Location")
	waitForRun(t, s, admin, runPath)

	// A front server passes everything to the Studio; a flag makes it
	// refuse event streams, and cutting its connections drops the stream.
	target, _ := url.Parse(s.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var down atomic.Bool
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/events") && down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	tl := &trackingListener{Listener: front.Listener}
	front.Listener = tl
	front.Start()
	t.Cleanup(front.Close)

	b := browsertest.New(t)
	b.Do(chromedp.Navigate(front.URL+strings.TrimPrefix(s.LocalLoginURL(t), s.URL)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(front.URL+runPath), chromedp.WaitReady(chromedp.CSS(`[data-stream][data-stream-status="live"]`)))
	if browsertest.Eval[bool](b, `!document.querySelector("#live-banner") || !document.querySelector("#live-banner").hidden`) {
		t.Errorf("a connected page shows the connection banner: %q", b.Text("#live-banner"))
	}

	down.Store(true)
	tl.cut()
	got := waitText(t, b, "the paused banner", "#live-banner", func(s string) bool { return strings.HasPrefix(s, "Live updates paused — reconnecting") })
	if role := browsertest.Eval[string](b, `document.querySelector("#live-banner").getAttribute("role")`); role != "status" {
		t.Errorf("the banner's role = %q, want status", role)
	}
	// At the top of the viewport, just below the sticky top bar.
	if top := browsertest.Eval[float64](b, `document.querySelector("#live-banner").getBoundingClientRect().top`); top < 0 || top > 100 {
		t.Errorf("the banner (%q) is %.0f px from the top of the viewport, want at the top", got, top)
	}
	waitText(t, b, "the stale state", "[data-stale-note]", func(s string) bool { return strings.HasPrefix(s, "· last known ") })
	if !browsertest.Eval[bool](b, `document.querySelector("#run-status").hasAttribute("data-stale")`) {
		t.Error("the run's state is not marked stale while disconnected")
	}
	b.Screenshot("run-live-paused")
	if v := b.Axe(browsertest.WCAG21AA); len(v) > 0 {
		for _, x := range v {
			t.Errorf("accessibility with the banner: %s", x)
		}
	}

	// "Reconnected" shows for 3 s: every text the banner takes is
	// recorded, so a slow poll cannot miss it.
	browsertest.Eval[any](b, `(() => { const el = document.querySelector("#live-banner"); window.__bannerTexts = [];
		new MutationObserver(() => window.__bannerTexts.push(el.textContent.trim())).observe(el, {childList: true, subtree: true, characterData: true}); })()`)
	down.Store(false)
	for deadline := time.Now().Add(time.Minute); !browsertest.Eval[bool](b, `window.__bannerTexts.includes("Reconnected")`); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the banner never said Reconnected; it said %v", browsertest.Eval[[]string](b, `window.__bannerTexts`))
		}
	}
	if browsertest.Eval[bool](b, `document.querySelector("[data-stale], [data-stale-note]") !== null`) {
		t.Error("the run's state is still marked stale once reconnected")
	}
	deadline := time.Now().Add(30 * time.Second)
	for !browsertest.Eval[bool](b, `document.querySelector("#live-banner").hidden`) {
		if time.Now().After(deadline) {
			t.Fatalf("the banner stays after reconnecting: %q", b.Text("#live-banner"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBrowserDNSPendingAppearsLiveUnderTheCheckpoint: an admin watching a
// deploy whose domain does not point here sees, once the TLS checkpoint
// defers, what to do about it under that checkpoint, without a reload (the
// stream swaps the row; the page keeps what it says per viewer).
func TestBrowserDNSPendingAppearsLiveUnderTheCheckpoint(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{ReconcileInterval: time.Minute, StepDelay: 700 * time.Millisecond,
		PublicAddresses: []netip.Addr{netip.MustParseAddr("203.0.113.7")}}
	s, admin := deployableWiki(t, d, dns, "127.0.0.2")
	const envPath = "/projects/team-wiki/environments/production"
	b := browsertest.NewFor(t, 3*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	resp, _ := s.PostForm(t, admin, envPath+"/deploys", url.Values{})
	runPath := resp.Header.Get("Location")
	b.Do(chromedp.Navigate(s.URL+runPath), chromedp.WaitVisible(chromedp.CSS(`[data-checkpoint-kind="issue-tls"]`)))
	if n := browsertest.Eval[int](b, `document.querySelectorAll("[data-dns-pending]").length`); n != 0 {
		t.Skipf("the deploy deferred before the page was open (%d blocks): nothing to see live", n)
	}
	browsertest.Eval[bool](b, `(window.__notReloaded = true)`)
	const block = `[data-checkpoint-kind="issue-tls"][data-tls-deferred="wiki.test"] [data-dns-pending="wiki.test"]`
	b.Do(chromedp.WaitVisible(chromedp.CSS(block)))
	if got := b.Text(block); !strings.Contains(got, "A wiki.test → 203.0.113.7") || !strings.Contains(got, "Check now") {
		t.Errorf("the deferred checkpoint says %q, want the record to create and Check now", got)
	}
	if !browsertest.Eval[bool](b, `window.__notReloaded === true`) {
		t.Error("the page reloaded to show what to do")
	}
	waitForRun(t, s, admin, runPath)
	// Events after the deferral (the run ending) swap the row again: the
	// block stays.
	waitText(t, b, "the run to end on the page", "#run-status", func(s string) bool { return !strings.Contains(s, "running") })
	if n := browsertest.Eval[int](b, `document.querySelectorAll('`+block+`').length`); n != 1 {
		t.Errorf("after the run ended the checkpoint shows %d DNS-pending blocks, want 1", n)
	}
}
