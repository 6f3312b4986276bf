package browsertest

import (
	"strconv"

	"github.com/chromedp/chromedp"
)

// BrokenTokens lists the words of the main content's tables, outside code,
// that wrap across two lines: a phone table wraps at word boundaries, so
// a label never reads S3_ACCESS_KE / Y. Words longer than maxLen
// characters may break; they cannot fit otherwise.
func (b *Browser) BrokenTokens(maxLen int) []string {
	b.tb.Helper()
	out, err := chromedp.Run(b.Ctx, chromedp.Evaluate[[]string](`(() => {
		const out = [];
		const walk = document.createTreeWalker(document.querySelector("main") || document.body, NodeFilter.SHOW_TEXT);
		for (let n = walk.nextNode(); n; n = walk.nextNode()) {
			// Code (hashes, addresses, references) may break anywhere.
			if (!n.parentElement.closest("table") || n.parentElement.closest(".sr-only, code")) continue;
			const re = /\S+/g;
			for (let m = re.exec(n.data); m; m = re.exec(n.data)) {
				if (m[0].length > `+itoa(maxLen)+` || m[0].length < 2) continue;
				const r = document.createRange();
				r.setStart(n, m.index);
				r.setEnd(n, m.index + m[0].length);
				const tops = new Set();
				for (const rect of r.getClientRects()) if (rect.width > 0) tops.add(Math.round(rect.top));
				if (tops.size > 1) out.push(m[0]);
			}
		}
		return out;
	})()`))
	if err != nil {
		b.tb.Fatalf("browser: look for broken words: %v", err)
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
