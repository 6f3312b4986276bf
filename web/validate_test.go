package web_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

// readExample returns one of the reference's example manifests.
func readExample(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "compiler", "testdata", name+".skali.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

const typoManifest = `name: shop
applications:
  web:
    image: nginx:1.27
    environment:
      API_TOKEN: "hunter2-do-not-echo"
    ports:
      http: {port: 80}
    routes:
      public:
        domain: "${APP_DOMAIN}"
        port: http
        tls: automatc
    scaling:
      replicas: {min: 2, max: 1}
`

func TestValidatePageIsPublic(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	status, body := s.Get(t, s.NewClient(), "/validate")
	if status != http.StatusOK {
		t.Fatalf("GET /validate anonymously = %d, want 200", status)
	}
	for _, want := range []string{`<textarea`, `id="manifest"`, `name="manifest"`, `data-fill="manifest"`, `type="file"`, `action="/validate#report"`} {
		if !strings.Contains(body, want) {
			t.Errorf("validator form lacks %s", want)
		}
	}
	if strings.Contains(body, `class="verdict`) {
		t.Errorf("an empty form shows a verdict")
	}
}

func TestValidateValidManifestShowsSummaryAndHash(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	src := readExample(t, "production")
	resp, body := s.PostForm(t, s.NewClient(), "/validate", url.Values{"manifest": {src}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /validate valid = %d, want 200", resp.StatusCode)
	}
	hash := regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindString(body)
	if hash == "" {
		t.Fatalf("no definition hash on the page")
	}
	for _, want := range []string{
		`data-valid="true"`, "Valid manifest", "team-wiki",
		// applications, ports, routes, replicas
		`>web<`, "http 8080/http", "${APP_DOMAIN}", "automatic", "2–5", "CPU 70%",
		// databases and buckets
		"postgres 17", "project", "citext", "attachments", "50GB storage",
		// values
		`data-value="required">APP_DOMAIN<`, `data-value="required">SESSION_SECRET<`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("valid page lacks %q", want)
		}
	}
	// The pasted text comes back in the form, escaped.
	if !strings.Contains(body, "{{databases.data.url}}") || !strings.Contains(body, "name: team-wiki") {
		t.Errorf("the text area does not keep the pasted manifest")
	}
	if strings.Contains(body, `class="card diagnostics-card"`) {
		t.Errorf("a valid manifest without warnings shows a diagnostics list")
	}
}

func TestValidateInvalidManifestShowsEachDiagnosticAtItsLine(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	resp, body := s.PostForm(t, s.NewClient(), "/validate", url.Values{"manifest": {strings.ReplaceAll(typoManifest, "\n", "\r\n")}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("POST /validate invalid = %d, want 422", resp.StatusCode)
	}
	for _, want := range []string{
		`data-valid="false"`, "2 errors",
		// the list links each diagnostic to its line, with path and position
		`href="#L13"`, "13:14", "applications.web.routes.public.tls", "did you mean <code>automatic</code>?",
		`href="#L15"`, "applications.web.scaling.replicas",
		// the source has the anchors and the notes under the lines
		`id="L13" class="source-line has-error"`, `<mark class="source-mark source-mark-error">automatc</mark>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("invalid page lacks %q", want)
		}
	}
	if strings.Contains(body, "sha256:") {
		t.Errorf("an invalid manifest shows a hash")
	}
	// The environment value appears only where the user pasted it: in the
	// text area and the source listing, never in a diagnostic or summary.
	if n := strings.Count(body, "hunter2-do-not-echo"); n != 2 {
		t.Errorf("environment value appears %d times, want 2 (text area and source)", n)
	}
	// CRLF from the browser's text area is shown as plain lines.
	if strings.Contains(body, "\r") {
		t.Errorf("the page echoes carriage returns")
	}
}

func TestValidateOversizeManifest(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	c := s.NewClient()

	// Over the compiler's 1 MiB but under the web body limit: the
	// compiler's diagnostic, on the page.
	big := "name: x\n# " + strings.Repeat("x", 1<<20) + "\n"
	resp, body := s.PostForm(t, c, "/validate", url.Values{"manifest": {big}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("POST /validate 1 MiB+ = %d, want 422", resp.StatusCode)
	}
	for _, want := range []string{"the limit is 1 MiB", "too large to list"} {
		if !strings.Contains(body, want) {
			t.Errorf("oversize page lacks %q", want)
		}
	}

	// Over the web body limit: refused before it is read.
	huge := strings.Repeat("x", 5<<20)
	resp, body = s.PostForm(t, c, "/validate", url.Values{"manifest": {huge}})
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST /validate 5 MiB = %d, want 413", resp.StatusCode)
	}
	if !strings.Contains(body, "at most 1 MiB") {
		t.Errorf("413 page does not say the limit")
	}
}

func TestValidateEmptyManifest(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	resp, body := s.PostForm(t, s.NewClient(), "/validate", url.Values{"manifest": {""}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("POST /validate empty = %d, want 422", resp.StatusCode)
	}
	if !strings.Contains(body, "manifest is empty") {
		t.Errorf("empty manifest page lacks the compiler's message")
	}
}
