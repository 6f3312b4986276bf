package web_test

import (
	"sort"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
)

// BenchmarkLogLineToPaint measures, in a real browser following web's
// logs page, how long after a simulated container printed a line (its
// timestamp) the line is in the page: the platform's follow, masking, the
// frame and the script. Two pods print a line every 100ms; b.N lines are
// measured (at least 200). Reported: p50 and p99 in ms (goal: p99 ≤ 500).
//
//	go test -run XXX -bench BenchmarkLogLineToPaint -benchtime 400x ./web/
func BenchmarkLogLineToPaint(b *testing.B) {
	s, _, _ := logsWikiEvery(b, 100*time.Millisecond)
	br := browsertest.NewFor(b, 5*time.Minute)
	br.Do(chromedp.Navigate(s.LocalLoginURL(b)), chromedp.WaitVisible(chromedp.CSS("h1")))
	br.Do(chromedp.Navigate(s.URL+wikiEnv+"/apps/web/logs"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="runtime-log"]`)))
	// Each line the script adds is timed as it lands in the page.
	browsertest.Eval[any](br, `(function () {
		window.lagMs = [];
		var list = document.querySelector("[data-testid=runtime-log]");
		new MutationObserver(function (records) {
			var now = Date.now();
			records.forEach(function (r) {
				r.addedNodes.forEach(function (n) {
					var t = n.querySelector && n.querySelector("time");
					if (t) window.lagMs.push(now - Date.parse(t.getAttribute("datetime")));
				});
			});
		}).observe(list, {childList: true});
	})()`)
	want := max(b.N, 200)
	b.ResetTimer()
	if _, err := chromedp.Run(br.Ctx, chromedp.Poll[chromedp.Void](`window.lagMs.length >= `+itoa(want), chromedp.WithPollingTimeout(5*time.Minute))); err != nil {
		b.Fatalf("waiting for %d lines: %v (got %d)", want, err, browsertest.Eval[int](br, `window.lagMs.length`))
	}
	b.StopTimer()
	lags := browsertest.Eval[[]float64](br, `window.lagMs`)
	sort.Float64s(lags)
	b.ReportMetric(lags[len(lags)/2], "p50-ms")
	b.ReportMetric(lags[len(lags)*99/100], "p99-ms")
	b.ReportMetric(lags[len(lags)-1], "max-ms")
}
