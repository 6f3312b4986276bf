package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
)

// TestBrowserFollowsAnApplicationsLogLive opens the environment page as a
// user would, follows web's "Logs" link, and sees new lines of web's pods
// appear without a reload, masked; the page's lines before any script are
// what the server rendered.
func TestBrowserFollowsAnApplicationsLogLive(t *testing.T) {
	t.Parallel()
	// A line every 250 ms per pod: the page follows them live, and the
	// sixteen visits below are not made on a page that grows by a hundred
	// lines a second (with logsWiki's 20 ms this test took a minute alone).
	s, _, _ := logsWikiEvery(t, 250*time.Millisecond)

	// Following the log, then sixteen page visits checked by axe-core (see
	// visitInTurn), beside other tests: minutes on a busy two-core machine,
	// as the other walks allow.
	b := browsertest.NewFor(t, 5*time.Minute)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+wikiEnv), chromedp.WaitVisible(chromedp.CSS(`[data-app="web"] [data-testid="app-logs"]`)))
	b.Screenshot("environment-app-logs-link")
	b.Do(chromedp.Click(chromedp.CSS(`[data-app="web"] [data-testid="app-logs"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="runtime-log"]`)))
	if got := browsertest.Eval[string](b, `location.pathname`); got != wikiEnv+"/apps/web/logs" {
		t.Fatalf("the Logs link led to %s", got)
	}
	browsertest.Eval[any](b, `window.studioMarker = "not reloaded"`)
	first := browsertest.Eval[int](b, `document.querySelectorAll("[data-testid=runtime-log] .log-line").length`)
	last := browsertest.Eval[string](b, `(document.querySelector("[data-testid=runtime-log] .log-line:last-child time") || {}).getAttribute?.("datetime") || ""`)
	// A line written after the page was rendered appears, from each pod.
	waitLogs(t, b, `(function () {
		var ls = document.querySelectorAll("[data-testid=runtime-log] .log-line");
		var pods = {};
		for (var i = 0; i < ls.length; i++) {
			var at = ls[i].querySelector("time").getAttribute("datetime");
			if (Date.parse(at) > Date.parse(`+jsString(last)+`)) pods[ls[i].querySelector(".log-src").textContent] = true;
		}
		return pods["web-0/web"] && pods["web-1/web"];
	})()`)
	waitLogs(t, b, `!document.querySelector("[data-logs-live]").hidden && document.querySelector("[data-logs-live]").textContent.includes("Following")`)
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Fatal("the logs page reloaded itself; it should have followed the websocket")
	}
	// New lines are masked as the rendered ones are.
	waitLogs(t, b, `Array.from(document.querySelectorAll("[data-testid=runtime-log] .log-text")).some(function (e) { return e.textContent === "session loaded: ••••" })`)
	text := browsertest.Eval[string](b, `document.body.innerText`)
	assertNoSecret(t, "the followed page", text)
	if now := browsertest.Eval[int](b, `document.querySelectorAll("[data-testid=runtime-log] .log-line").length`); now <= first {
		t.Errorf("the page shows %d lines, no more than the %d it was rendered with", now, first)
	}
	for _, w := range []struct {
		width int64
		name  string
	}{{1280, "desktop"}, {390, "phone"}} {
		b.Emulate(w.width, "light")
		b.Screenshot("app-logs-" + w.name)
	}
	// Each state of the page fits a phone, keeps its controls in sight and
	// passes axe-core, light and dark.
	logs := wikiEnv + "/apps/web/logs"
	visitInTurn(t, b, s, []page{
		{name: "app-logs", path: logs},
		{name: "app-logs-search", path: logs + "?q=cookie&since=15m"},
		{name: "app-logs-previous-none", path: logs + "?previous=1"},
		{name: "app-logs-invalid", path: logs + "?since=yesterday"},
	})
}

// waitLogs waits up to 20s until expression is true on the logs page,
// saying on timeout what the page showed.
func waitLogs(t *testing.T, b *browsertest.Browser, expression string) {
	t.Helper()
	if _, err := chromedp.Run(b.Ctx, chromedp.Poll[chromedp.Void](expression, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		seen := browsertest.Eval[string](b, `(function () {
			var live = document.querySelector("[data-logs-live]");
			var ls = document.querySelectorAll("[data-testid=runtime-log] .log-line");
			return "live: " + (live ? (live.hidden ? "hidden " : "") + live.textContent.trim() : "none") + "; " + ls.length + " lines, the last: " +
				(ls.length ? ls[ls.length - 1].textContent : "none");
		})()`)
		t.Fatalf("waiting for %s: %v; the page shows %s", expression, err, seen)
	}
}
