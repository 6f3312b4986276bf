// Package browsertest drives headless Debian Chromium from Go through the
// DevTools protocol (chromedp), for tests that look at pages as a person does.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Browser is one tab, in a browser context of its own, of the package's
// headless Chromium.
type Browser struct {
	// Ctx runs chromedp actions in the tab.
	Ctx context.Context
	tb  testing.TB
	// axeRegistered: axe-core is evaluated in every document the tab
	// loads (Axe registers it on its first call).
	axeRegistered bool
}

// chromiumPath finds the browser: $CHROMIUM, then Debian's Chromium
// headless shell (package chromium-headless-shell), then Debian's chromium.
//
// The headless shell is Chromium built without the browser's own windows
// and tabs around the page: the same Blink, V8 and network stack, the
// browser Puppeteer and Playwright run headless tests in. The same tests
// took half the CPU time in it (71 CPU-seconds against 146 for the walk of
// every page and three live pages; the web package 391 in all, alone).
func chromiumPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, p := range []string{"/usr/bin/chromium-headless-shell", "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// New opens a tab for the test in the package's headless Chromium, in a
// browser context of its own, and closes both when the test ends. Without
// Chromium the test fails on CI (CI=true) and is skipped elsewhere with a
// message saying how to install it.
//
// Its actions may take 5 minutes in all: many tests deploy, snapshot or
// restore while their tab is open, and on a two-core machine that a
// browser saturates a 90 s bound ran out in tests that were not stuck.
func New(tb testing.TB) *Browser {
	tb.Helper()
	return NewFor(tb, 5*time.Minute)
}

// NewFor is New for a test whose actions may take up to limit in all (a
// walk through every page at several sizes).
//
// Every test of a package shares one Chromium process (started by the
// first test that asks for it, stopped by Shutdown from TestMain), and each
// test gets a new browser context in it: its own cookies, storage, cache
// and tabs, as a fresh incognito window has, so tests can run in parallel
// without seeing each other's sessions. Starting one Chromium per test cost
// about a second of a busy two-core machine each.
func NewFor(tb testing.TB, limit time.Duration) *Browser {
	tb.Helper()
	path := chromiumPath()
	if path == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatal("browsertest: Chromium is not installed; .ci/run must install it (apt-get install -y chromium-headless-shell)")
		}
		tb.Skip("browsertest: Chromium is not installed; install it with 'apt-get install -y chromium-headless-shell' (or chromium) to run browser tests")
	}
	root, err := sharedBrowser(path)
	if err != nil {
		tb.Fatalf("browsertest: start Chromium: %v", err)
	}
	ctx, cancelTab := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
	tb.Cleanup(cancelTab)
	// The first action opens the tab; later actions are bounded, so a hung
	// page fails the test instead of hanging CI.
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("browsertest: open a tab: %v", err)
	}
	bounded, cancelTimeout := context.WithTimeout(ctx, limit)
	tb.Cleanup(cancelTimeout)
	return &Browser{Ctx: bounded, tb: tb}
}

// shared is the package's one Chromium: the context of its first tab (which
// only starts it; tests open tabs of their own) and what stops it.
var shared struct {
	mu          sync.Mutex
	ctx         context.Context
	cancelTab   context.CancelFunc
	cancelAlloc context.CancelFunc
	dir         string
}

// sharedBrowser returns the context of the package's Chromium, starting it
// when it is not running (the first test, or one after Chromium died).
func sharedBrowser(path string) (context.Context, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.ctx != nil && shared.ctx.Err() == nil {
		return shared.ctx, nil
	}
	stopLocked()
	dir, err := os.MkdirTemp("", "studio-chromium-")
	if err != nil {
		return nil, err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-proxy-server", true),
		// Tabs of parallel tests are all "in the background" for Chromium:
		// their timers and rendering must run at full speed all the same.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	// The first action starts the browser and must not carry a timeout (it
	// would stop the browser).
	if err := chromedp.Do(ctx); err != nil {
		cancelTab()
		cancelAlloc()
		os.RemoveAll(dir)
		return nil, err
	}
	shared.ctx, shared.cancelTab, shared.cancelAlloc, shared.dir = ctx, cancelTab, cancelAlloc, dir
	return ctx, nil
}

// Shutdown stops the package's Chromium, if a test started it. Call it from
// TestMain after the tests ran (storetest.Main(m, browsertest.Shutdown)), so
// no browser outlives the test binary.
func Shutdown() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	stopLocked()
}

func stopLocked() {
	if shared.cancelTab != nil {
		shared.cancelTab()
		shared.cancelAlloc()
		os.RemoveAll(shared.dir)
	}
	shared.ctx, shared.cancelTab, shared.cancelAlloc, shared.dir = nil, nil, nil, ""
}

// Do runs steps in the tab and fails the test on error, saying what the
// tab shows.
func (b *Browser) Do(steps ...chromedp.Action[chromedp.Void]) {
	b.tb.Helper()
	if err := chromedp.Do(b.Ctx, steps...); err != nil {
		b.tb.Fatalf("browser: %v; the tab shows %s", err, b.seen())
	}
}

// Paste sets the field sel to text as a paste does (an input event). When
// the field is the manifest editor (textarea[data-editor]), which checks as
// you type, it then waits until the editor painted its check: the list of
// problems it adds under the editor moves everything below it, the form's
// submit button too, and a click aimed before that lands would miss it.
func Paste(sel, text string) chromedp.Action[chromedp.Void] {
	quoted := strconv.Quote(sel)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		steps := []chromedp.Action[chromedp.Void]{
			// A check painted before this paste says nothing of it.
			chromedp.Evaluate[chromedp.Void](`(() => { const p = document.querySelector(".editor-problems"); if (p) p.removeAttribute("data-state"); })()`),
			chromedp.SetValue(chromedp.CSS(sel), text),
			chromedp.Poll[chromedp.Void](`(() => { const f = document.querySelector(`+quoted+`);
				if (!f || !f.hasAttribute("data-editor")) return true;
				const p = document.querySelector(".editor-problems");
				return !!p && p.hasAttribute("data-state") && p.getAttribute("aria-busy") !== "true"; })()`, chromedp.WithPollingTimeout(0)),
		}
		for _, step := range steps {
			if _, err := step(ctx, t); err != nil {
				return chromedp.Void{}, fmt.Errorf("pasting into %s: %w", sel, err)
			}
		}
		return chromedp.Void{}, nil
	}
}

// Text returns the visible text of the first element matching the CSS
// selector ("" when it is hidden), waiting until there is one. The element
// is found and read in one evaluation: a page that updates itself live
// may replace it at any moment, and a node found first and read after
// could be one it had just removed (which reads as "", having no layout).
func (b *Browser) Text(selector string) string {
	b.tb.Helper()
	js := `(() => { const e = document.querySelector(` + strconv.Quote(selector) + `);
		if (!e) return null;
		return e.offsetWidth || e.offsetHeight || e.getClientRects().length ? e.innerText : ""; })()`
	for {
		// An evaluation fails while a navigation replaces the document:
		// tried again, as a query waits.
		text, err := chromedp.Run(b.Ctx, chromedp.Evaluate[*string](js))
		if err == nil && text != nil {
			return *text
		}
		if b.Ctx.Err() != nil {
			if err == nil {
				err = errors.New("no element matches")
			}
			b.tb.Fatalf("browser: text of %s: %v (%s)", selector, err, b.Ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TextWithin waits, up to limit, until the text of selector's element
// satisfies ok (a page that updates itself live may replace the element
// between two reads), and returns the last text it read: the caller's
// assertion then reports what was seen.
func (b *Browser) TextWithin(selector string, limit time.Duration, ok func(string) bool) string {
	b.tb.Helper()
	js := `(() => { const e = document.querySelector(` + strconv.Quote(selector) + `); return e ? e.innerText : "" })()`
	deadline := time.Now().Add(limit)
	for {
		text := Eval[string](b, js)
		if ok(text) || time.Now().After(deadline) {
			return text
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Eval evaluates a JavaScript expression in the page and returns its value.
func Eval[T any](b *Browser, expression string) T {
	b.tb.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		b.tb.Fatalf("browser: evaluate %s: %v", expression, err)
	}
	return v
}

// Screenshot saves a full-page PNG named name in the directory that
// STUDIO_SCREENSHOTS names, so a person can look at it, and returns its path.
// Without STUDIO_SCREENSHOTS it takes none and returns "": a full-page
// capture costs a render and an encode that no test reads (they were a
// quarter of the browser tests' time).
func (b *Browser) Screenshot(name string) string {
	b.tb.Helper()
	dir := os.Getenv("STUDIO_SCREENSHOTS")
	if dir == "" {
		return ""
	}
	png := b.FullScreenshot()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.tb.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.tb.Fatal(err)
	}
	return path
}

// FullScreenshot returns a full-page PNG of what the tab shows.
func (b *Browser) FullScreenshot() []byte {
	b.tb.Helper()
	png, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.tb.Fatalf("browser: screenshot: %v", err)
	}
	return png
}

// Submit clicks click (a link or a form's button: something that loads a
// page) and waits, up to a minute, until a NEW document has loaded and
// shows an element matching want. Waiting on want alone is not enough when
// the current page has it too (a form posted back to its own page, a
// button on both pages): the wait would return before the navigation
// ends, and the test's next Navigate would abort it (net::ERR_ABORTED).
// Submit marks the current document (window.__before) before clicking,
// and waits until the mark is gone, the new document's readyState is
// "complete" and want is there. On timeout it fails the test with what it
// saw: the URL, whether the old document is still there, and the page's
// heading and flash message.
func (b *Browser) Submit(click, want string) {
	b.tb.Helper()
	b.Do(chromedp.Evaluate[chromedp.Void](`window.__before = 1`), chromedp.Click(chromedp.CSS(click)))
	b.WaitNewPage(want)
}

// WaitNewPage waits, up to a minute, until the document that was marked
// with window.__before = 1 has been replaced by a new one, fully loaded,
// that has an element matching want; see Submit. Use it after a step that
// navigates by other means (a form submitted by a script, a key press),
// having set the mark before that step.
func (b *Browser) WaitNewPage(want string) {
	b.tb.Helper()
	js := `!window.__before && document.readyState === "complete" && !!document.querySelector(` + strconv.Quote(want) + `)`
	deadline := time.Now().Add(time.Minute)
	for {
		// While the navigation is under way the evaluation may fail (its
		// document goes away): that is not the end of the wait.
		ok, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) || b.Ctx.Err() != nil {
			b.tb.Fatalf("browser: no new page with %s within a minute (last error: %v); the tab shows %s", want, err, b.seen())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// seen describes the tab for a failure message: its URL, whether the
// document marked before a navigation is still there, its readyState, and
// the text of its heading and flash message (never the whole page, which
// may show a secret once).
func (b *Browser) seen() string {
	// Read even when the test's time limit ran out: the tab is open until
	// the test's cleanup.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.Ctx), 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({url: location.href, oldDocument: !!window.__before, readyState: document.readyState,
		h1: ((document.querySelector("h1") || {}).innerText || "").slice(0, 200),
		flash: ((document.querySelector(".flash") || {}).innerText || "").slice(0, 200)})`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// Session is what a tab holds for the person using it: its page's origin
// and cookies, and what is left of its time limit. Open opens the same
// session in another window.
type Session struct {
	origin  string
	cookies []*network.Cookie
	limit   time.Duration
}

// Session reads the cookies b holds for its current page.
func (b *Browser) Session() Session {
	b.tb.Helper()
	s := Session{origin: Eval[string](b, `location.origin`), limit: 90 * time.Second}
	b.Do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		res, err := cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{})
		s.cookies = res.Cookies
		return err
	}))
	if deadline, ok := b.Ctx.Deadline(); ok {
		s.limit = time.Until(deadline)
	}
	return s
}

// Open opens, for tb, a tab in a browser context of its own that holds the
// session's cookies: the same person, signed in the same way, in a second
// window. Its actions are bounded by what was left of the first tab's
// limit. Tests that walk pages at several sizes at once give each size a
// window of its own.
func (s Session) Open(tb testing.TB) *Browser {
	tb.Helper()
	b := NewFor(tb, s.limit)
	params := make([]*network.CookieParam, 0, len(s.cookies))
	for _, c := range s.cookies {
		p := &network.CookieParam{Name: c.Name, Value: c.Value, URL: s.origin, Path: c.Path,
			Secure: c.Secure, HTTPOnly: c.HTTPOnly, SameSite: c.SameSite}
		if !c.Session {
			p.Expires = cdp.TimeSinceEpoch(c.Expires)
		}
		params = append(params, p)
	}
	if len(params) > 0 {
		b.Do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, network.SetCookies, network.SetCookiesParams{Cookies: params})
			return err
		}))
	}
	return b
}
