package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/handlers"
	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/webtest"
)

func postCheck(t *testing.T, s *webtest.Server, body string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", s.URL+"/validate/check", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.NewClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestDiagnosticsEndpoint: POST /validate/check answers the compiler's
// diagnostics with the range the editor underlines, for every kind the
// form takes, and refuses what a form on another site could send.
func TestDiagnosticsEndpoint(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	ask := func(req handlers.CheckRequest) handlers.CheckAnswer {
		t.Helper()
		body, _ := json.Marshal(req)
		resp, b := postCheck(t, s, string(body), nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("status %d (%s): %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		var a handlers.CheckAnswer
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("answer %s: %v", b, err)
		}
		return a
	}
	if a := ask(handlers.CheckRequest{Manifest: readExample(t, "production"), Kind: "skali"}); !a.Valid || len(a.Diagnostics) != 0 || a.Kind != "skali" {
		t.Errorf("production example: %+v", a)
	}
	// The typo of the validate tests, CRLF line breaks as a browser sends
	// them: the first error is at 13:14 and its range is the word.
	a := ask(handlers.CheckRequest{Manifest: strings.ReplaceAll(typoManifest, "\n", "\r\n")})
	if a.Valid || a.Errors != 2 || len(a.Diagnostics) != 2 {
		t.Fatalf("typo manifest: %+v", a)
	}
	d := a.Diagnostics[0]
	if d.Line != 13 || d.Column != 14 || d.EndLine != 13 || d.EndColumn != 14+len("automatc") || d.Path != "applications.web.routes.public.tls" || d.Severity != "error" || !strings.Contains(d.Message, "automatic") {
		t.Errorf("first diagnostic = %+v", d)
	}
	// On the last line, without a final line break, the range is still the word.
	last := typoManifest[:strings.Index(typoManifest, "automatc")+len("automatc")]
	if a := ask(handlers.CheckRequest{Manifest: last}); len(a.Diagnostics) == 0 || a.Diagnostics[0].Line != 13 || a.Diagnostics[0].EndColumn != 14+len("automatc") {
		t.Errorf("typo on the last line: %+v", a)
	}
	// Detection works as in the form: an inline plan is a plan.
	plan := "components = [\n  {name = \"api\", recipe = \"api.toml\"},\n  {name = \"api\", recipe = \"b.toml\"},\n]\n"
	if a := ask(handlers.CheckRequest{Manifest: plan}); a.Kind != "plan" || len(a.Diagnostics) != 1 || a.Diagnostics[0].Path != "components[1].name" {
		t.Errorf("inline plan: %+v", a)
	}
	// A tab inside a block is marked where it is.
	if a := ask(handlers.CheckRequest{Manifest: "name: shop\napplications:\n  web:\n    image: nginx\n\tport: 80\n"}); len(a.Diagnostics) != 1 || a.Diagnostics[0].Line != 5 {
		t.Errorf("tab: %+v", a)
	}

	// A form post (what another site's form can send) is refused.
	resp, b := postCheck(t, s, "manifest=name%3A+x", map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("form post: %d %s", resp.StatusCode, b)
	}
	// A cross-site request is refused by the same protection as every post.
	body, _ := json.Marshal(handlers.CheckRequest{Manifest: "name: x\n"})
	resp, _ = postCheck(t, s, string(body), map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site post: %d, want 403", resp.StatusCode)
	}
	// Not JSON: a calm JSON error.
	resp, b = postCheck(t, s, "{", nil)
	if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(b, []byte(`"error"`)) {
		t.Errorf("bad JSON: %d %s", resp.StatusCode, b)
	}
	// Over the bound: refused without reading it all.
	big, _ := json.Marshal(handlers.CheckRequest{Manifest: strings.Repeat("\n", 3<<20)})
	resp, b = postCheck(t, s, string(big), nil)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d %.200s", resp.StatusCode, b)
	}
}

// TestSchemaEndpoint: GET /schema/skali.json serves the compiler's JSON
// Schema without a session, as an editor's language server fetches it.
func TestSchemaEndpoint(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	resp, err := http.Get(s.URL + "/schema/skali.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/schema+json" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !bytes.Equal(b, compiler.Schema()) {
		t.Errorf("the served schema differs from compiler.Schema()")
	}
	if resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("the schema sets a cookie")
	}
}

// TestCheckAnswersStayOutOfTheInfoLog: the live editor checks at every
// pause in typing, so at the default (info) level an answered check writes
// no access-log line, while a refused one and every other request still do.
func TestCheckAnswersStayOutOfTheInfoLog(t *testing.T) {
	t.Parallel()
	logs := &webtest.SyncBuffer{}
	s := webtest.Start(t, func(d *web.Deps) {
		d.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	body, _ := json.Marshal(handlers.CheckRequest{Manifest: "name: shop\n"})
	if resp, b := postCheck(t, s, string(body), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("check: %d %s", resp.StatusCode, b)
	}
	if resp, _ := postCheck(t, s, "{", nil); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad JSON: %d, want 400", resp.StatusCode)
	}
	resp, err := s.NewClient().Get(s.URL + "/validate")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var checks, refused, pages int
	for _, l := range strings.Split(logs.String(), "\n") {
		switch {
		case strings.Contains(l, "path=/validate/check") && strings.Contains(l, "status=200"):
			checks++
		case strings.Contains(l, "path=/validate/check") && strings.Contains(l, "status=400"):
			refused++
		case strings.Contains(l, "msg=request") && strings.Contains(l, "path=/validate "):
			pages++
		}
	}
	if checks != 0 || refused != 1 || pages != 1 {
		t.Errorf("info log has %d answered checks (want 0), %d refused (want 1), %d page requests (want 1):\n%s", checks, refused, pages, logs.String())
	}
}
