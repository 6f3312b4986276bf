package web_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserDiagnosticsAsYouType follows issue 26 as a new user would:
// the production example in the /validate editor, a mistake typed into it
// (a marker appears on its line, its range is underlined, the message shows
// while the caret is in it and in the list under the editor, the caret
// stays where it was), then fixed (the marker goes away).
func TestBrowserDiagnosticsAsYouType(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	b := browsertest.New(t)
	prod := readExample(t, "production")
	lines := strings.Split(prod, "\n")
	tlsLine := 0
	for i, l := range lines {
		if strings.TrimSpace(l) == "tls: automatic" {
			tlsLine = i + 1
			break
		}
	}
	if tlsLine == 0 {
		t.Fatal("the production example has no `tls: automatic` line")
	}
	b.Do(
		chromedp.Navigate(s.URL+"/validate"),
		chromedp.WaitVisible(chromedp.CSS("#manifest")),
		chromedp.SetValue(chromedp.CSS("#manifest"), prod),
	)
	// A valid manifest: the list says so and no marker is painted.
	b.Do(
		chromedp.Evaluate[chromedp.Void](`document.getElementById("manifest").dispatchEvent(new Event("input", {bubbles: true}))`),
		chromedp.WaitVisible(chromedp.CSS(`.editor-problems[data-state="ok"]`)),
	)
	if n := browsertest.Eval[int](b, `document.querySelectorAll(".editor-marker").length`); n != 0 {
		t.Errorf("a valid manifest has %d markers", n)
	}
	// Put the caret after "automatic" and type a mistake.
	b.Do(chromedp.Evaluate[chromedp.Void](`(() => {
		const ta = document.getElementById("manifest");
		const lines = ta.value.split("\n");
		let at = 0;
		for (let i = 0; i < ` + itoa(tlsLine) + `; i++) at += lines[i].length + 1;
		ta.focus();
		ta.setSelectionRange(at - 1, at - 1);
	})()`))
	b.Do(
		chromedp.KeyEvent("x"),
		chromedp.WaitVisible(chromedp.CSS(`.editor-marker[data-line="`+itoa(tlsLine)+`"]`)),
	)
	if n := browsertest.Eval[int](b, `document.querySelectorAll(".editor-marker").length`); n != 1 {
		t.Errorf("got %d markers, want 1", n)
	}
	// The caret stayed right after the typed character.
	if got := browsertest.Eval[string](b, `(() => { const ta = document.getElementById("manifest"); return ta.value.slice(ta.selectionStart - 10, ta.selectionStart); })()`); got != "automaticx" {
		t.Errorf("text before the caret = %q, want it to end the typed word", got)
	}
	// The word is underlined in the mirror and the message is in the tip
	// (the caret is in its range) and in the list under the editor.
	if got := b.Text(".editor-mirror .editor-mark-error"); got != "automaticx" {
		t.Errorf("underlined = %q, want automaticx", got)
	}
	if got := browsertest.Eval[string](b, `document.querySelector(".editor-tip").hidden ? "" : document.querySelector(".editor-tip").textContent`); !strings.Contains(got, "automatic") {
		t.Errorf("tip = %q, want the message while the caret is in the range", got)
	}
	item := b.Text(".editor-problems-list li")
	for _, want := range []string{itoa(tlsLine) + ":", "applications.web.routes.public.tls", "error"} {
		if !strings.Contains(item, want) {
			t.Errorf("list item %q lacks %q", item, want)
		}
	}
	if got := b.Text(".editor-problems-head"); !strings.Contains(got, "1 error") {
		t.Errorf("list head = %q, want 1 error", got)
	}
	// The marker sits on the line it names.
	if !browsertest.Eval[bool](b, `(() => {
		const ta = document.getElementById("manifest");
		const m = document.querySelector(".editor-marker").getBoundingClientRect();
		const lh = parseFloat(getComputedStyle(ta).lineHeight);
		const top = ta.getBoundingClientRect().top + parseFloat(getComputedStyle(ta).paddingTop) + (`+itoa(tlsLine)+` - 1) * lh - ta.scrollTop;
		return Math.abs((m.top + m.height / 2) - (top + lh / 2)) < lh / 2;
	})()`) {
		t.Errorf("the marker is not beside line %d", tlsLine)
	}
	for _, w := range []int64{1280, 390} {
		b.Emulate(w, "light")
		b.Do(chromedp.Evaluate[chromedp.Void](`(() => { const ta = document.getElementById("manifest"); ta.focus(); ta.dispatchEvent(new Event("keyup")); document.querySelector(".editor").scrollIntoView({block: "center"}); })()`),
			// The caret's tip (a keyup handler) painted: two frames later.
			chromedp.Evaluate[chromedp.Void](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r())))`, chromedp.EvalAwaitPromise))
		b.Screenshot("diagnostics-as-you-type-" + itoa(int(w)))
	}
	b.Emulate(1280, "light")
	if ms := browsertest.Eval[float64](b, `(() => { const e = performance.getEntriesByName("manifest-diagnostics"); return e.length ? e[e.length-1].duration : -1; })()`); ms >= 0 {
		t.Logf("keystroke to painted markers: %.1f ms (%.1f ms after the 150 ms pause)", ms, ms-150)
	}
	// Fixing it (Backspace) takes the marker away; undo brings the mistake back.
	b.Do(
		chromedp.Evaluate[chromedp.Void](`document.getElementById("manifest").focus()`),
		chromedp.KeyEvent("\b"),
		chromedp.WaitVisible(chromedp.CSS(`.editor-problems[data-state="ok"]`)),
	)
	if n := browsertest.Eval[int](b, `document.querySelectorAll(".editor-marker, .editor-mirror .editor-mark").length`); n != 0 {
		t.Errorf("after the fix %d markers or marks remain", n)
	}
	if got := browsertest.Eval[string](b, `document.getElementById("manifest").value`); got != prod {
		t.Errorf("after the fix the text differs from the example")
	}
}

// TestBrowserCompletion follows issue 26's item 2 at three positions: a
// top-level key, a key of a route, and a route's tls value; the offers and
// their descriptions come from the compiler's table (through the schema).
// Hovering a key shows its description.
func TestBrowserCompletion(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	b := browsertest.New(t)
	src := "name: shop\napplications:\n  web:\n    image: nginx\n    ports:\n      http: {port: 80}\n    routes:\n      public:\n        domain: a.example.com\n        port: http\n"
	b.Do(
		chromedp.Navigate(s.URL+"/validate"),
		chromedp.WaitVisible(chromedp.CSS("#manifest")),
		chromedp.SetValue(chromedp.CSS("#manifest"), src),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("manifest").dispatchEvent(new Event("input", {bubbles: true}))`),
		chromedp.WaitVisible(chromedp.CSS(`.editor-problems[data-state="ok"]`)),
	)
	// The schema the offers come from has arrived.
	if _, err := chromedp.Run(b.Ctx, chromedp.Poll[bool](`performance.getEntriesByName(location.origin + "/schema/skali.json").length > 0`)); err != nil {
		t.Fatalf("the schema was not fetched: %v", err)
	}
	// press sends a key to the editor's key handler as a keydown event. (A
	// CDP key event also sends the character on its own, which a browser
	// does not do once a keydown handler has taken the key.)
	press := func(key string) {
		b.Do(chromedp.Evaluate[chromedp.Void](`document.getElementById("manifest").dispatchEvent(new KeyboardEvent("keydown", {key: "` + key + `", bubbles: true, cancelable: true}))`))
	}
	value := func() string { return browsertest.Eval[string](b, `document.getElementById("manifest").value`) }
	offers := func() string {
		return browsertest.Eval[string](b, `(() => { const m = document.querySelector(".editor-complete"); return m.hidden ? "" : m.innerText; })()`)
	}
	// 1. A new key inside routes.public: "tl" offers tls, with its description.
	b.Do(
		chromedp.Evaluate[chromedp.Void](`(() => { const ta = document.getElementById("manifest"); ta.focus(); ta.setSelectionRange(ta.value.length, ta.value.length); })()`),
		chromedp.KeyEvent("        tl"),
		chromedp.WaitVisible(chromedp.CSS(".editor-complete")),
	)
	if got := offers(); !strings.Contains(got, "tls") || !strings.Contains(got, "TLS") || strings.Contains(got, "domain") {
		t.Errorf("offers under routes.public after `tl` = %q, want tls with its description and not the keys already there", got)
	}
	press("Enter")
	if got := value(); !strings.HasSuffix(got, "        tls: ") {
		t.Fatalf("after accepting, the text ends %q", got[max(0, len(got)-30):])
	}
	// 2. The value: the allowed TLS modes, filtered as typed.
	b.Do(chromedp.WaitVisible(chromedp.CSS(".editor-complete")))
	if got := offers(); !strings.Contains(got, "automatic") || !strings.Contains(got, "optional") || !strings.Contains(got, "disabled") {
		t.Errorf("value offers = %q, want the three TLS modes", got)
	}
	b.Do(chromedp.KeyEvent("o"))
	if got := offers(); strings.TrimSpace(got) != "optional" {
		t.Errorf("after `o` the offers are %q, want optional", got)
	}
	press("Enter")
	if got := value(); !strings.HasSuffix(got, "        tls: optional") {
		t.Errorf("after accepting the value, the text ends %q", got[max(0, len(got)-30):])
	}
	// Undo takes the accepted value back out: the edit is in the history.
	b.Do(chromedp.Evaluate[chromedp.Void](`(() => { document.getElementById("manifest").focus(); document.execCommand("undo"); })()`))
	if got := value(); strings.HasSuffix(got, "optional") {
		t.Errorf("undo did not take the completion back: %q", got[max(0, len(got)-30):])
	}
	// 3. A top-level key on a new line: "da" offers databases.
	b.Do(
		chromedp.Evaluate[chromedp.Void](`(() => { const ta = document.getElementById("manifest"); ta.setSelectionRange(ta.value.length, ta.value.length); })()`),
		chromedp.KeyEvent("\rda"),
		chromedp.WaitVisible(chromedp.CSS(".editor-complete")),
	)
	if got := offers(); !strings.Contains(got, "databases") || strings.Contains(got, "applications") {
		t.Errorf("top-level offers after `da` = %q, want databases", got)
	}
	b.Screenshot("completion-1280")
	press("Enter")
	if got := value(); !strings.HasSuffix(got, "\ndatabases:\n  ") {
		t.Errorf("after accepting a block key, the text ends %q", got[max(0, len(got)-30):])
	}
	// Hover on a key shows its description.
	hover := browsertest.Eval[string](b, `(() => {
		const ta = document.getElementById("manifest"), cs = getComputedStyle(ta), r = ta.getBoundingClientRect();
		const lh = parseFloat(cs.lineHeight), probe = document.createElement("span");
		probe.textContent = "0000000000"; document.querySelector(".editor-mirror").appendChild(probe);
		const cw = probe.getBoundingClientRect().width / 10; probe.remove();
		const x = r.left + parseFloat(cs.paddingLeft) + cw * 10.5, y = r.top + parseFloat(cs.paddingTop) + lh * 8.5 - ta.scrollTop;
		ta.dispatchEvent(new MouseEvent("mousemove", {clientX: x, clientY: y, bubbles: true}));
		const tip = document.querySelector(".editor-tip");
		return tip.hidden ? "" : tip.textContent;
	})()`)
	if !strings.Contains(hover, "domain") || !strings.Contains(hover, "The domain served") {
		t.Errorf("hover on `domain` shows %q, want its description", hover)
	}
}

// BenchmarkKeystrokeToPaint measures issue 26's browser goal in headless
// Chromium: in the production example on /validate, a character typed
// after `tls: automatic` and then taken back, each time to the painted
// markers (the page's own performance measure, from the last keystroke to
// the frame after the answer is painted). It reports p50 and p99 after
// the 150 ms pause (the goal is 50 ms); it asserts no time. Beside them it
// reports the phases after the pause (phaseNames), the request's and the
// write's own steps (stepPhases, requestPhases) and, outside the measure,
// the frame's rendering after it ("rendered"), so that a p99 over the goal
// can be told apart as the network, the page's script or the frame. With
// 60 samples its p99 is the slowest one; with 200, the second slowest.
//
//	go test ./web -run '^$' -bench KeystrokeToPaint -benchtime 200x
func BenchmarkKeystrokeToPaint(b *testing.B) {
	s := webtest.Start(b)
	br := browsertest.NewFor(b, 10*time.Minute)
	prod := readExample(b, "production")
	at := strings.Index(prod, "tls: automatic")
	if at < 0 {
		b.Fatal("the production example has no `tls: automatic` line")
	}
	at += len("tls: automatic")
	br.Do(
		chromedp.Navigate(s.URL+"/validate"),
		chromedp.WaitVisible(chromedp.CSS("#manifest")),
		chromedp.SetValue(chromedp.CSS("#manifest"), prod),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("manifest").dispatchEvent(new Event("input", {bubbles: true}))`),
		chromedp.WaitVisible(chromedp.CSS(`.editor-problems[data-state="ok"]`)),
		chromedp.Evaluate[chromedp.Void](`(() => { const ta = document.getElementById("manifest"); ta.focus(); ta.setSelectionRange(`+itoa(at)+`, `+itoa(at)+`); })()`),
	)
	// The last measure of each keystroke is the frame's rendering after the
	// painted markers; the benchmark waits for it.
	measures := `performance.getEntriesByName("manifest-diagnostics-rendered")`
	var after []time.Duration
	phases := map[string][]time.Duration{}
	i := 0
	for b.Loop() {
		n := browsertest.Eval[int](br, measures+`.length`)
		key, state := "x", "errors"
		if i%2 == 1 {
			key, state = "\b", "ok"
		}
		i++
		br.Do(
			chromedp.KeyEvent(key),
			chromedp.WaitVisible(chromedp.CSS(`.editor-problems[data-state="`+state+`"]`)),
		)
		if _, err := chromedp.Run(br.Ctx, chromedp.Poll[bool](measures+`.length > `+itoa(n))); err != nil {
			b.Fatalf("no measure after keystroke %d: %v", i, err)
		}
		ms := browsertest.Eval[[]float64](br, `(() => ["", "-pause", "-request", "-write", "-frame"].concat(`+stepNames+`.map(p => "-" + p)).map(p => {
			const e = performance.getEntriesByName("manifest-diagnostics" + p); return e.length ? e[e.length-1].duration : 0; }).concat((() => {
			const r = performance.getEntriesByType("resource").filter(e => e.name.endsWith("/validate/check")).pop();
			const h = performance.getEntriesByName("manifest-diagnostics-headers").pop();
			return [r.responseStart - r.requestStart, r.responseEnd - r.startTime,
				r.requestStart - h.startTime, h.startTime + h.duration - r.responseStart];
			})()))()`)
		after = append(after, time.Duration((ms[0]-150)*float64(time.Millisecond)))
		// The phases after the pause: the timer's lateness, the request
		// (fetch and JSON), writing the answer into the page, and the wait
		// for the next frame.
		for k, name := range phaseNames {
			d := ms[k+1]
			if k == 0 {
				d -= 150
			}
			phases[name] = append(phases[name], time.Duration(d*float64(time.Millisecond)))
		}
		// Of the request: from sending it to the answer's first byte (the
		// server's time and the loopback), and the whole fetch as the
		// browser's resource timing sees it.
		n0 := 5 + len(stepPhases)
		phases["request-ttfb"] = append(phases["request-ttfb"], time.Duration(ms[n0]*float64(time.Millisecond)))
		phases["request-fetch"] = append(phases["request-fetch"], time.Duration(ms[n0+1]*float64(time.Millisecond)))
		phases["request-send"] = append(phases["request-send"], time.Duration(ms[n0+2]*float64(time.Millisecond)))
		phases["request-deliver"] = append(phases["request-deliver"], time.Duration(ms[n0+3]*float64(time.Millisecond)))
		// The steps of the request and of the write (manifest.js).
		for k, name := range stepPhases {
			phases[name] = append(phases[name], time.Duration(ms[5+k]*float64(time.Millisecond)))
		}
		// The resource timing entries would fill the buffer.
		browsertest.Eval[bool](br, `performance.clearResourceTimings(), true`)
	}
	b.ReportMetric(float64(percentile(after, 0.50).Microseconds())/1000, "after-pause-p50-ms")
	b.ReportMetric(float64(percentile(after, 0.99).Microseconds())/1000, "after-pause-p99-ms")
	for _, name := range slices.Concat(phaseNames, requestPhases, stepPhases) {
		b.ReportMetric(float64(percentile(phases[name], 0.50).Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(percentile(phases[name], 0.99).Microseconds())/1000, name+"-p99-ms")
	}
}

// phaseNames are the phases of the time from the pause to painted markers
// that BenchmarkKeystrokeToPaint reports (manifest.js measures them).
var phaseNames = []string{"timer-late", "request", "write", "frame"}

// requestPhases split the request phase (see BenchmarkKeystrokeToPaint).
// request-send is from the fetch call to the request's start on the
// network, request-deliver from the answer's first byte to the page's
// script getting its headers.
var requestPhases = []string{"request-ttfb", "request-fetch", "request-send", "request-deliver"}

// stepPhases split the request (encoding the text, the fetch to the
// answer's headers, reading its JSON body) and the write (reading the
// scroll position, the mirror's underlines, the gutter's markers, the list,
// the caret's tip) as manifest.js measures them.
// The rendered phase follows the measure's end: the frame's own style,
// layout and paint, until a task after it runs.
var stepPhases = []string{"encode", "headers", "body", "read", "mirror", "markers", "list", "tip", "rendered"}

// stepNames is stepPhases as a JavaScript array.
var stepNames = `["` + strings.Join(stepPhases, `","`) + `"]`
