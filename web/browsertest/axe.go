package browsertest

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// axeSource is axe-core 4.14.1, vendored (see testdata/axe-core.README.md).
//
//go:embed testdata/axe.min.js
var axeSource string

// Violation is one axe-core rule a page breaks, with the elements that break it.
type Violation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// String reads like "color-contrast (serious): Elements must meet minimum
// color contrast ratio thresholds: .subtle :: Fix ...".
func (v Violation) String() string {
	return fmt.Sprintf("%s (%s): %s\n      %s", v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n      "))
}

// WCAG21AA are the axe-core tags of the WCAG 2.1 level A and AA rules.
var WCAG21AA = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa"}

// Axe runs axe-core in the current page with the rules tagged tags and
// returns the violations. Rules named in disabled are not run; a caller
// disabling one must say why next to the call.
func (b *Browser) Axe(tags []string, disabled ...string) []Violation {
	b.tb.Helper()
	// axe-core (600 KB) is sent to the tab once: registered for every
	// document the tab loads afterwards, and evaluated in this one.
	// Sent with every check, its transfer cost as much as the check.
	if !b.axeRegistered {
		if _, err := chromedp.Run(b.Ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: axeSource})
			return err
		})); err != nil {
			b.tb.Fatalf("browser: register axe-core: %v", err)
		}
		b.axeRegistered = true
	}
	if !Eval[bool](b, `typeof window.axe === "object"`) {
		if _, err := chromedp.Run(b.Ctx, chromedp.Evaluate[chromedp.Void](axeSource)); err != nil {
			b.tb.Fatalf("browser: inject axe-core: %v", err)
		}
	}
	rules := make([]string, len(disabled))
	for i, id := range disabled {
		rules[i] = fmt.Sprintf("%q: {enabled: false}", id)
	}
	quoted := make([]string, len(tags))
	for i, tag := range tags {
		quoted[i] = fmt.Sprintf("%q", tag)
	}
	script := `axe.run(document, {runOnly: {type: "tag", values: [` + strings.Join(quoted, ",") + `]}, rules: {` + strings.Join(rules, ",") + `}})
		.then(r => r.violations.map(v => ({id: v.id, impact: v.impact || "", help: v.help,
			nodes: v.nodes.map(n => n.target.join(" ") + " :: " + (n.failureSummary || "").replace(/\s+/g, " "))})))`
	out, err := chromedp.Run(b.Ctx, chromedp.Evaluate[[]Violation](script, chromedp.EvalAwaitPromise))
	if err != nil {
		b.tb.Fatalf("browser: run axe-core: %v", err)
	}
	return out
}

// Emulate sets the viewport's width (height 900) and the preferred colour
// scheme ("light" or "dark"), as a phone or a dark desktop shows the page,
// and returns once the page has rendered a frame in it.
func (b *Browser) Emulate(width int64, scheme string) {
	b.tb.Helper()
	mobile := width < 600
	opts := []chromedp.EmulateViewportOption{}
	if mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulatePortrait)
	}
	b.Do(
		chromedp.EmulateViewport(width, 900, opts...),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
			})
			return err
		}),
		chromedp.Evaluate[chromedp.Void](`new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done())))`, chromedp.EvalAwaitPromise),
	)
}

// Overflow returns how many CSS pixels the page is wider than its
// viewport (0 when it fits), with the elements that stick out furthest, so
// that a failure names the culprit.
func (b *Browser) Overflow() (int, string) {
	b.tb.Helper()
	type result struct {
		Extra    int    `json:"extra"`
		Culprits string `json:"culprits"`
	}
	r, err := chromedp.Run(b.Ctx, chromedp.Evaluate[result](`(() => {
		const w = document.documentElement.clientWidth;
		const extra = Math.max(0, document.documentElement.scrollWidth - w);
		const out = [];
		if (extra > 0) {
			for (const el of document.querySelectorAll("body *")) {
				const r = el.getBoundingClientRect();
				if (r.right > w + 1 && r.width > 0) {
					let p = el.parentElement, clipped = false;
					while (p) { const o = getComputedStyle(p).overflowX; if (o === "auto" || o === "scroll" || o === "hidden") { clipped = true; break; } p = p.parentElement; }
					if (!clipped) out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : "") + " right=" + Math.round(r.right));
				}
			}
		}
		return {extra, culprits: out.slice(0, 8).join("; ")};
	})()`))
	if err != nil {
		b.tb.Fatalf("browser: measure overflow: %v", err)
	}
	return r.Extra, r.Culprits
}

// ControlsOutOfSight lists the links, buttons and fields of the page's
// main content that lie beyond the edges of the viewport or of a box that
// scrolls or clips sideways: an action a person has to find by scrolling a
// table is an action out of sight.
func (b *Browser) ControlsOutOfSight() []string {
	b.tb.Helper()
	out, err := chromedp.Run(b.Ctx, chromedp.Evaluate[[]string](`(() => {
		const w = document.documentElement.clientWidth;
		const out = [];
		for (const el of document.querySelectorAll("main a[href], main button, main input:not([type=hidden]), main select, main textarea")) {
			const r = el.getBoundingClientRect();
			if (r.width === 0 || el.closest(".source, .diff")) continue;
			let hidden = r.right > w + 1 || r.left < -1;
			// Clipped by a box that scrolls or hides what overflows it.
			for (let p = el.parentElement; p && !hidden; p = p.parentElement) {
				const o = getComputedStyle(p).overflowX;
				if (o === "visible") continue;
				const pr = p.getBoundingClientRect();
				hidden = r.right > pr.right + 1 || r.left < pr.left - 1;
			}
			if (hidden) out.push(el.tagName.toLowerCase() + " " + JSON.stringify((el.textContent || el.name || el.id).trim().slice(0, 40)) + " right=" + Math.round(r.right));
		}
		return out.slice(0, 8);
	})()`))
	if err != nil {
		b.tb.Fatalf("browser: find controls out of sight: %v", err)
	}
	return out
}
