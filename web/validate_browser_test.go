package web_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserValidateFindsTheTypo pastes a manifest with a typo, as a person
// would, and checks that the error is in view at once and that clicking it
// lands on its line.
func TestBrowserValidateFindsTheTypo(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	b := browsertest.New(t)
	b.Do(
		chromedp.Navigate(s.URL+"/validate"),
		chromedp.WaitVisible(chromedp.CSS("#manifest")),
	)
	b.Screenshot("validate-empty")
	b.Do(
		browsertest.Paste("#manifest", typoManifest),
		chromedp.Click(chromedp.CSS("button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(".verdict")),
	)
	if got := b.Text(".verdict h2"); got != "2 errors" {
		t.Errorf("verdict = %q, want %q", got, "2 errors")
	}
	// The page lands on the report: the verdict and the first diagnostic
	// are on screen without scrolling.
	if !browsertest.Eval[bool](b, `(() => {
		const inView = el => { const r = el.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; };
		return inView(document.querySelector(".verdict")) && inView(document.querySelector(".diagnostics li"));
	})()`) {
		t.Errorf("verdict and first diagnostic are not in view after submit")
	}
	first := b.Text(".diagnostics li")
	for _, want := range []string{"13:14", "applications.web.routes.public.tls", "automatic"} {
		if !strings.Contains(first, want) {
			t.Errorf("first diagnostic %q lacks %q", first, want)
		}
	}
	if got := b.Text("#L13 .source-note"); !strings.Contains(got, "automatc") {
		t.Errorf("note under line 13 = %q, want the typo's message", got)
	}
	// The text area kept what was pasted.
	if got := browsertest.Eval[string](b, `document.getElementById("manifest").value`); got != typoManifest {
		t.Errorf("text area = %q, want the pasted manifest", got)
	}
	b.Screenshot("validate-invalid")

	// With JavaScript, the editor numbers its lines and the diagnostic's
	// line link puts the cursor on line 13 of the text.
	if n := browsertest.Eval[int](b, `document.querySelector(".editor-gutter").textContent.split("\n").length`); n != strings.Count(typoManifest, "\n")+1 {
		t.Errorf("editor gutter numbers %d lines, want %d", n, strings.Count(typoManifest, "\n")+1)
	}
	b.Do(chromedp.Click(chromedp.CSS(`.diagnostics a[href="#L13"]`)))
	if !browsertest.Eval[bool](b, `(() => {
		const ta = document.getElementById("manifest");
		const line = ta.value.slice(0, ta.selectionStart).split("\n").length;
		return document.activeElement === ta && line === 13;
	})()`) {
		t.Errorf("after clicking the diagnostic the cursor is not on line 13 of the editor")
	}
	b.Screenshot("validate-invalid-line")
}

// TestBrowserValidateShowsTheSummary pastes the reference's production-shaped
// example and checks the summary and the hash.
func TestBrowserValidateShowsTheSummary(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	b := browsertest.New(t)
	b.Do(
		chromedp.Navigate(s.URL+"/validate"),
		browsertest.Paste("#manifest", readExample(t, "production")),
		chromedp.Click(chromedp.CSS("button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(".verdict")),
	)
	if got := b.Text(".verdict h2"); got != "Valid manifest" {
		t.Errorf("verdict = %q, want Valid manifest", got)
	}
	if got := b.Text("#definition-hash"); !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(got) {
		t.Errorf("hash = %q", got)
	}
	summary := b.Text(".summary-card")
	for _, want := range []string{"team-wiki", "web", "http 8080/http", "${APP_DOMAIN}", "data", "postgres 17", "attachments", "APP_DOMAIN", "SESSION_SECRET"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	if browsertest.Eval[bool](b, `document.querySelector("button[data-copy]").hidden`) {
		t.Errorf("the copy button stays hidden with JavaScript on")
	}
	b.Screenshot("validate-valid")
}

// TestBrowserValidateReleaseManifest: a pasted release manifest is
// recognised, and the page says so above the verdict.
func TestBrowserValidateReleaseManifest(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	b := browsertest.New(t)
	manifest := readFile(t, "..", "compiler", "release", "testdata", "manifest.yaml")
	b.Do(
		chromedp.Navigate(s.URL+"/validate"),
		chromedp.WaitVisible(chromedp.CSS("#manifest")),
		browsertest.Paste("#manifest", manifest),
		chromedp.Click(chromedp.CSS("button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(".verdict")),
	)
	if got := b.Text(".verdict-kind"); got != "Release manifest (selfhost/v1alpha1)" {
		t.Errorf("kind = %q, want the release manifest", got)
	}
	if got := b.Text(".verdict h2"); got != "Valid release manifest" {
		t.Errorf("verdict = %q", got)
	}
	b.Screenshot("validate-release")
	broken := strings.Replace(manifest, `mode: "0640"`, "mode: 0640", 1)
	b.Do(
		chromedp.Navigate(s.URL+"/validate"),
		chromedp.WaitVisible(chromedp.CSS("#manifest")),
		browsertest.Paste("#manifest", broken),
		chromedp.Click(chromedp.CSS("button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(".verdict-invalid")),
	)
	if got := b.Text(".diagnostics li"); !strings.Contains(got, "configuration[0].mode") {
		t.Errorf("first diagnostic = %q, want the unquoted mode", got)
	}
	b.Screenshot("validate-release-invalid")
}

// TestBrowserValidateFilePickerWithoutJavaScript: with scripts off, the
// file picked is what the form sends and the server checks, and a
// diagnostic's line link leads to the line in the source listing.
func TestBrowserValidateFilePickerWithoutJavaScript(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	b := browsertest.New(t)
	file := filepath.Join(t.TempDir(), "skali.yaml")
	if err := os.WriteFile(file, []byte(typoManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Do(
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
			return err
		}),
		chromedp.Navigate(s.URL+"/validate"),
		chromedp.WaitVisible(chromedp.CSS("#manifest")),
		chromedp.SetUploadFiles(chromedp.CSS(`input[name="manifest_file"]`), []string{file}),
		chromedp.Click(chromedp.CSS("button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(".verdict")),
	)
	if got := b.Text(".verdict h2"); got != "2 errors" {
		t.Errorf("verdict for the uploaded file = %q, want 2 errors", got)
	}
	if browsertest.Eval[bool](b, `!!document.querySelector(".editor-gutter")`) {
		t.Errorf("the editor was enhanced with scripts off")
	}
	b.Do(chromedp.Click(chromedp.CSS(`.diagnostics a[href="#L13"]`)))
	if got := browsertest.Eval[string](b, `location.hash`); got != "#L13" {
		t.Errorf("without JavaScript the diagnostic link leads to %q, want #L13", got)
	}
}
