package web_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// pageSecret is SESSION_SECRET in the log tests: characters that each
// encoding writes differently. No failure message prints it.
const pageSecret = "p@ss w0rd/+Sess10n=ü-never-in-a-page"

// secretIn names the encodings of pageSecret found in text.
func secretIn(text string) []string {
	var found []string
	for name, form := range map[string]string{"raw": pageSecret, "base64": base64.StdEncoding.EncodeToString([]byte(pageSecret)),
		"url": url.QueryEscape(pageSecret)} {
		if strings.Contains(text, form) {
			found = append(found, name)
		}
	}
	slices.Sort(found)
	return found
}

// TestBrowserShowsLogLinesLiveMaskedAndFiltered deploys with a release
// command that prints SESSION_SECRET as it is, in base64 and URL-encoded,
// and watches the real run page: the lines appear under the release
// command's checkpoint while it runs (the page never reloads), masked; the
// filter box hides the lines that do not match, those that arrive later
// too; the log survives the row's live updates; no encoding of the value
// is anywhere in the page; the download has every line, masked; ?q=
// filters without the script; and a failed run's heading links to the
// failed step's last line.
func TestBrowserShowsLogLinesLiveMaskedAndFiltered(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	faults := &local.Faults{Output: map[string]map[string][]string{
		"release": {"web": {
			"SESSION_SECRET=${SESSION_SECRET}",
			"header: Basic ${SESSION_SECRET|base64}",
			"connecting to https://db/?password=${SESSION_SECRET|url}&ssl=1",
			"Applying 0001_initial... OK",
			"Applying 0002_attachments... OK",
		}},
	}}
	// The release command and the rollout wait for the test: the page is
	// there before either runs.
	holdRelease, holdRollout := webtest.NewGate(), webtest.NewGate()
	s, admin := deployableWiki(t, &webtest.Deploys{Faults: faults, HoldRelease: holdRelease, HoldRollout: holdRollout}, dns, "127.0.0.2")
	const envPath = "/projects/team-wiki/environments/production"
	if resp, _ := s.PostForm(t, admin, envPath+"/values", url.Values{"name": {"SESSION_SECRET"}, "value": {pageSecret}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set SESSION_SECRET: %d", resp.StatusCode)
	}

	b := browsertest.New(t)
	b.Do(chromedp.Navigate(s.LocalLoginURL(t)), chromedp.WaitVisible(chromedp.CSS("h1")))
	b.Do(chromedp.Navigate(s.URL+envPath+"/deploys/new"), chromedp.WaitVisible(chromedp.CSS("#deploy-form button[type=submit]")))
	b.Do(chromedp.Click(chromedp.CSS("#deploy-form button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("#run-status")))
	browsertest.Eval[any](b, `window.studioMarker = "not reloaded"`)
	release := browsertest.Eval[string](b, `document.querySelector('[data-checkpoint-kind="release"]').id`)
	rollout := browsertest.Eval[string](b, `document.querySelector('[data-checkpoint-kind="rollout"]').id`)
	if n := browsertest.Eval[int](b, `document.querySelectorAll("#`+release+` .log-line").length`); n != 0 {
		t.Fatalf("%d lines under the release command before it ran", n)
	}
	runPath := browsertest.Eval[string](b, `location.pathname`)

	// The release command's lines arrive under its checkpoint, masked (the
	// rollout waits: the run stays live).
	holdRelease.Open()
	waitTrue(t, b, `document.getElementById("`+release+`").dataset.checkpointStatus === "succeeded" && [...document.querySelectorAll("#`+release+` .log-line .log-text")].some(e => e.textContent === "exit status 0")`)
	lines := browsertest.Eval[[]string](b, `[...document.querySelectorAll("#`+release+` .log-line .log-text")].map(e => e.textContent)`)
	for _, want := range []string{"$ /app/wiki migrate up", "SESSION_SECRET=••••", "header: Basic ••••", "connecting to https://db/?password=••••&ssl=1", "Applying 0001_initial... OK"} {
		if !slices.Contains(lines, want) {
			t.Errorf("the release command's live lines lack %q", want)
		}
	}
	if found := secretIn(strings.Join(lines, "\n")); len(found) > 0 {
		t.Errorf("the live lines hold the value (%s)", strings.Join(found, ", "))
	}
	if n := browsertest.Eval[int](b, `[...document.querySelectorAll(".log-line")].filter(l => !l.closest(".checkpoint")).length`); n != 0 {
		t.Errorf("%d log lines outside a checkpoint", n)
	}
	// Each line is a link to itself.
	if got := browsertest.Eval[string](b, `(() => { const l = document.querySelector("#`+release+` .log-line"); return l.id + " " + l.querySelector("a").getAttribute("href"); })()`); !strings.HasPrefix(got, "L") || !strings.HasSuffix(got, " #"+strings.Fields(got)[0]) {
		t.Errorf("a line's id and link = %q, want L<n> and #L<n>", got)
	}

	// The filter hides what does not match, as you type.
	b.Do(chromedp.SendKeys(`#log-filter`, "applying"))
	waitTrue(t, b, `[...document.querySelectorAll(".log-line")].every(l => l.hidden === !l.textContent.toLowerCase().includes("applying"))`)
	visible := browsertest.Eval[[]string](b, `[...document.querySelectorAll(".log-line:not([hidden]) .log-text")].map(e => e.textContent)`)
	if len(visible) != 2 {
		t.Errorf("%d lines shown for the filter 'applying', want the 2 that match: %q", len(visible), visible)
	}
	// Lines that arrive later are filtered too: the rollout's are hidden.
	holdRollout.Open()
	waitTrue(t, b, `document.querySelectorAll("#`+rollout+` .log-line").length > 0`)
	if n := browsertest.Eval[int](b, `document.querySelectorAll("#`+rollout+` .log-line:not([hidden])").length`); n != 0 {
		t.Errorf("%d of the rollout's lines are shown although none matches the filter", n)
	}
	b.Do(chromedp.WaitVisible(chromedp.CSS(`#run-status[data-run-status="succeeded-with-warnings"]`)))
	if got := browsertest.Eval[string](b, `window.studioMarker || "reloaded"`); got != "not reloaded" {
		t.Fatal("the run page reloaded itself; it should have followed the run's stream")
	}
	// The release command's row changed since (succeeded): its log stayed.
	if got := browsertest.Eval[string](b, `document.getElementById("`+release+`").dataset.checkpointStatus`); got != "succeeded" {
		t.Errorf("release checkpoint is %s, want succeeded", got)
	}
	if n := browsertest.Eval[int](b, `document.querySelectorAll("#`+release+` .log-line").length`); n != len(lines) {
		t.Errorf("%d lines under the release command once the run ended, want the %d seen live", n, len(lines))
	}
	if found := secretIn(browsertest.Eval[string](b, `document.documentElement.outerHTML`)); len(found) > 0 {
		t.Errorf("the page holds the value (%s)", strings.Join(found, ", "))
	}
	// Emptying the filter shows every line again.
	browsertest.Eval[any](b, `(() => { const f = document.getElementById("log-filter"); f.value = ""; f.dispatchEvent(new Event("input")); })()`)
	if n := browsertest.Eval[int](b, `document.querySelectorAll(".log-line[hidden]").length`); n != 0 {
		t.Errorf("%d lines stay hidden once the filter is empty", n)
	}
	b.Screenshot("run-logs-live")

	// The download: every line, masked, with its time and checkpoint.
	resp, err := admin.Get(s.URL + runPath + "/log")
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	body := string(data)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment;") {
		t.Errorf("download = %d %q %q, want a text/plain attachment", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"))
	}
	if found := secretIn(body); len(found) > 0 {
		t.Errorf("the downloaded log holds the value (%s)", strings.Join(found, ", "))
	}
	for _, want := range []string{"Release command web  SESSION_SECRET=••••", "Release command web  exit status 0", "replicas ready"} {
		if !strings.Contains(body, want) {
			t.Errorf("the downloaded log lacks %q", want)
		}
	}
	total := browsertest.Eval[int](b, `document.querySelectorAll(".log-line").length`)
	if n := strings.Count(body, "\n"); n != total {
		t.Errorf("the download has %d lines, the page %d", n, total)
	}

	// Without the script, ?q= filters on the server: every line is in the
	// page, those that do not match hidden, so that emptying the box shows
	// them all and their links work.
	b.Do(chromedp.Navigate(s.URL+runPath+"?q=Applying"), chromedp.WaitVisible(chromedp.CSS("#log-filter")))
	shown := browsertest.Eval[[]string](b, `[...document.querySelectorAll(".log-line:not([hidden]) .log-text")].map(e => e.textContent)`)
	if len(shown) != 2 || !strings.HasPrefix(shown[0], "Applying") || !strings.HasPrefix(shown[1], "Applying") {
		t.Errorf("?q=Applying shows %q, want the 2 lines that match", shown)
	}
	if n := browsertest.Eval[int](b, `document.querySelectorAll(".log-line").length`); n != total {
		t.Errorf("?q=Applying puts %d lines in the page, want all %d", n, total)
	}
	b.Screenshot("run-logs-filtered")
	count := `document.querySelector("#` + release + ` [data-log-count]").textContent`
	if got, want := browsertest.Eval[string](b, count), fmt.Sprintf("2 of %d lines match", len(lines)); got != want {
		t.Errorf("the release command's log count reads %q under ?q=Applying, want %q", got, want)
	}
	browsertest.Eval[any](b, `(() => { const f = document.getElementById("log-filter"); f.value = ""; f.dispatchEvent(new Event("input")); })()`)
	if got, want := browsertest.Eval[string](b, count), fmt.Sprintf("%d lines", len(lines)); got != want {
		t.Errorf("the release command's log count reads %q once the filter is emptied, want %q", got, want)
	}
	b.Do(chromedp.Navigate(s.URL+runPath+"?q=Applying#L1"), chromedp.WaitVisible(chromedp.CSS("#L1")))

	// A failed run's heading links to the failed step's last line.
	faults.Set(func(f *local.Faults) { f.Release = map[string]string{"web": "exit status 3"} })
	resp2, _ := s.PostForm(t, admin, envPath+"/deploys", url.Values{"revision": {"1"}, "redeploy": {"1"}})
	if resp2.StatusCode != http.StatusSeeOther {
		t.Fatalf("redeploy = %d", resp2.StatusCode)
	}
	b.Do(chromedp.Navigate(s.URL+resp2.Header.Get("Location")), chromedp.WaitVisible(chromedp.CSS(`#run-status[data-run-status="failed"]`)))
	href := browsertest.Eval[string](b, `document.querySelector("#run-header .run-stopped-at").getAttribute("href")`)
	last := browsertest.Eval[string](b, `(() => { const l = [...document.querySelectorAll('[data-checkpoint-kind="release"] .log-line')].pop(); return l ? l.id + " " + l.textContent : ""; })()`)
	if !strings.HasPrefix(href, "#L") || !strings.HasPrefix(last, href[1:]+" ") || !strings.HasSuffix(last, "failed: exit status 3") {
		t.Errorf("the failed run's heading links to %q; the release command's last line is %q", href, last)
	}
	if _, err := strconv.Atoi(strings.TrimPrefix(href, "#L")); err != nil {
		t.Errorf("heading link %q is not a line", href)
	}
	b.Do(chromedp.Click(`#run-header .run-stopped-at`))
	waitTrue(t, b, `location.hash === "`+href+`" && document.querySelector("`+href+`").getClientRects().length > 0`)
	b.Screenshot("run-logs-failed")
}

// waitTrue waits until expression is true in the page, for as long as the
// browser's give-up allows.
func waitTrue(t *testing.T, b *browsertest.Browser, expression string) {
	t.Helper()
	if _, err := chromedp.Run(b.Ctx, chromedp.Poll[chromedp.Void](expression, chromedp.WithPollingTimeout(0))); err != nil {
		t.Fatalf("waiting for %s: %v", expression, err)
	}
}
