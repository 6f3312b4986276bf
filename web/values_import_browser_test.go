package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserValuesImportShowsEveryProblemAndKeepsThePaste pastes a .env
// with three mistakes: all three are listed at once by line, a lower-case
// name is answered "did you mean APP_DOMAIN?", and the paste is back in
// the textarea (from the browser: the Studio's answer never holds the
// value). The single form takes app_domain to the Studio, whose sentence
// (not the browser's pattern message) says what to type; lengths read
// "N characters; at most M" on every form.
func TestBrowserValuesImportShowsEveryProblemAndKeepsThePaste(t *testing.T) {
	t.Parallel()
	const secret = "pasted-secret-4d1f0c2b"
	s := webtest.Start(t, webtest.WithValueKeys())
	s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	paste := "app_domain=wiki.test\nnot a line\nSESSION_SECRET=" + secret + "\nGREETING=\"hello\" world\n"

	// What the Studio answers holds no value.
	admin := s.SignInLocal(t)
	resp, body := s.PostForm(t, admin, envPath+"/values/import", url.Values{"dotenv": {paste}})
	if resp.StatusCode != http.StatusUnprocessableEntity || strings.Contains(body, secret) {
		t.Fatalf("import with mistakes = %d (holds the value: %v), want 422 without it", resp.StatusCode, strings.Contains(body, secret))
	}

	b := browsertest.New(t)
	b.Do(
		chromedp.Navigate(s.LocalLoginURL(t)),
		chromedp.WaitVisible(chromedp.CSS("h1")),
		chromedp.Navigate(s.URL+envPath+"/values"),
		chromedp.WaitVisible(chromedp.CSS("#dotenv")),
		chromedp.SetValue(chromedp.CSS("#dotenv"), paste),
		chromedp.Click(chromedp.CSS("#import button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#dotenv-error")),
	)
	problems := browsertest.Eval[[]string](b, `[...document.querySelectorAll("#dotenv-error li")].map(li => li.textContent.trim())`)
	want := []string{
		"Line 1: the manifest has no app_domain; did you mean APP_DOMAIN?",
		"Line 2: expected NAME=value, with a name of letters, digits and underscores.",
		"Line 4: unexpected text after the closing quote (put a # before a comment).",
	}
	if strings.Join(problems, "\n") != strings.Join(want, "\n") {
		t.Errorf("the import's problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if got := b.Text("#dotenv-error"); !strings.Contains(got, "3 problems in the pasted file; nothing was changed") || !strings.Contains(got, "back from this browser") {
		t.Errorf("the import's error = %q", got)
	}
	if got := browsertest.Eval[string](b, `document.querySelector("#dotenv").value`); got != paste {
		t.Errorf("the textarea after the refused import does not hold the paste (%d characters, want %d)", len(got), len(paste))
	}
	b.Screenshot("values-import-problems")
	b.Emulate(390, "light")
	b.Screenshot("values-import-problems-390")
	b.Emulate(1280, "light")

	// The single form: app_domain reaches the Studio, which answers.
	b.Do(
		chromedp.SetValue(chromedp.CSS("#value-name"), "app_domain"),
		chromedp.SetValue(chromedp.CSS("#value-value"), "wiki.test"),
		chromedp.Click(chromedp.CSS("#set button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#value-name-error")),
	)
	if got := b.Text("#value-name-error"); !strings.Contains(got, "Did you mean APP_DOMAIN?") {
		t.Errorf("the single form's name error = %q, want the Studio's sentence with the suggestion", got)
	}
	if got := browsertest.Eval[string](b, `document.querySelector("#value-name").validationMessage`); got != "" {
		t.Logf("(the browser would also say %q; the form does not let it block)", got)
	}

	// Lengths, the same way on every form.
	for _, c := range []struct{ path, field, value, want string }{
		{envPath + "/values", "name", strings.Repeat("A", 300), "This name has 300 characters; at most 255."},
		{envPath + "/values/import", "dotenv", strings.Repeat("A", 300) + "=1\n", "Line 1: the name has 300 characters; at most 255."},
		{"/projects/team-wiki/environments", "name", strings.Repeat("e", 78), "This name has 78 characters; at most 63."},
	} {
		_, body := s.PostForm(t, admin, c.path, url.Values{c.field: {c.value}, "value": {"x"}})
		if !strings.Contains(body, c.want) {
			t.Errorf("%s with a long %s lacks %q:\n%s", c.path, c.field, c.want, pageMain(body))
		}
	}
}
