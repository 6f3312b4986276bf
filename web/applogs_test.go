package web_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// logsSecret is the value the wiki's web application prints in its
// runtime log, in several encodings.
const logsSecret = `Runtime-s3cret/&"ünïcode`

// logsSecretForms are what must never reach a page, a download or a
// frame: the value as it is and in the encodings the application prints.
func logsSecretForms() []string {
	q := strconv.Quote(logsSecret)
	j, _ := json.Marshal(logsSecret)
	return []string{logsSecret, html.EscapeString(logsSecret), base64.StdEncoding.EncodeToString([]byte(logsSecret)),
		url.QueryEscape(logsSecret), q[1 : len(q)-1], string(j[1 : len(j)-1]), "s3cret"}
}

// assertNoSecret fails when text holds any form of logsSecret (never
// printing the value itself).
func assertNoSecret(t *testing.T, where, text string) {
	t.Helper()
	for i, f := range logsSecretForms() {
		if strings.Contains(text, f) {
			t.Errorf("%s holds the value's plaintext (form %d)", where, i)
		}
	}
}

// logsWiki deploys the wiki whose web application prints SESSION_SECRET
// in its runtime log (plain, base64, URL, JSON and Go-quoted) and a line
// with terminal control sequences, a line every 20ms per pod. It returns
// once web's pods print.
func logsWiki(tb testing.TB) (*webtest.Server, *http.Client, *webtest.Deploys) {
	return logsWikiEvery(tb, 20*time.Millisecond)
}

func logsWikiEvery(tb testing.TB, every time.Duration) (*webtest.Server, *http.Client, *webtest.Deploys) {
	tb.Helper()
	faults := &local.Faults{Output: map[string]map[string][]string{local.OutputRuntime: {"web": {
		"session loaded: ${SESSION_SECRET}",
		"cookie=${SESSION_SECRET|base64} next=${SESSION_SECRET|url}",
		`config {"secret":"${SESSION_SECRET|json}","quoted":"${SESSION_SECRET|quoted}"}`,
		"\x1b[31mred alert\x1b[0m \x1b]0;title\x07",
	}}}}
	dns := &webtest.Resolver{}
	d := &webtest.Deploys{Faults: faults, LogEvery: every, Resolver: dns}
	s := webtest.Start(tb, webtest.WithDeploys(d))
	manifest, err := os.ReadFile("../compiler/testdata/production.skali.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	s.CreateEnvironment(tb, string(manifest), "production")
	admin := s.SignInLocal(tb)
	for name, value := range map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": logsSecret} {
		if resp, _ := s.PostForm(tb, admin, wikiEnv+"/values", url.Values{"name": {name}, "value": {value}}); resp.StatusCode != http.StatusSeeOther {
			tb.Fatalf("set %s: %d", name, resp.StatusCode)
		}
	}
	dns.Set("wiki.test", "127.0.0.2")
	if resp, body := s.PostForm(tb, admin, wikiEnv+"/deploys", url.Values{}); resp.StatusCode != http.StatusSeeOther {
		tb.Fatalf("deploy: %d\n%s", resp.StatusCode, pageMain(body))
	}
	deadline := time.Now().Add(time.Minute)
	for {
		status, page := s.Get(tb, admin, wikiEnv+"/apps/web/logs")
		if status == http.StatusOK && strings.Contains(page, `class="log-line"`) {
			return s, admin, d
		}
		if time.Now().After(deadline) {
			tb.Fatalf("web printed nothing within a minute of its deploy; its logs page answers %d:\n%s", status, pageMain(page))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var (
	logLineRE = regexp.MustCompile(`<li class="log-line"><time class="log-at" datetime="([^"]+)">[^<]*</time><span class="log-src" title="[^"]*">([^<]*)</span><span class="log-text">([^<]*)</span></li>`)
)

type pageLine struct {
	at          time.Time
	source, txt string
}

// pageLines are the runtime log lines of a logs page.
func pageLines(t *testing.T, page string) []pageLine {
	t.Helper()
	var out []pageLine
	for _, m := range logLineRE.FindAllStringSubmatch(page, -1) {
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("a line's datetime %q: %v", m[1], err)
		}
		out = append(out, pageLine{at: at, source: html.UnescapeString(m[2]), txt: html.UnescapeString(m[3])})
	}
	return out
}

// waitLogsPage reads path until its lines satisfy ok.
func waitLogsPage(t *testing.T, s *webtest.Server, c *http.Client, path string, what string, ok func([]pageLine) bool) (string, []pageLine) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, page := s.Get(t, c, path)
		if status != http.StatusOK {
			t.Fatalf("GET %s = %d:\n%s", path, status, pageMain(page))
		}
		lines := pageLines(t, page)
		if ok(lines) {
			return page, lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: no %s within 15s; %d lines shown", path, what, len(lines))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func anyLine(lines []pageLine, ok func(pageLine) bool) bool {
	for _, l := range lines {
		if ok(l) {
			return true
		}
	}
	return false
}

// TestRuntimeLogsAreMaskedFilteredAndDownloaded: a viewer of production
// reads web's runtime log over real HTTP: lines of both pods, labelled,
// with the value the application prints hidden in every encoding and
// terminal control sequences made visible; a search, a time window and
// the previous container's log filter on the server; the download is
// exactly the lines shown; the follow websocket's frames bring new lines,
// masked too. Someone outside the environment reads nothing.
func TestRuntimeLogsAreMaskedFilteredAndDownloaded(t *testing.T) {
	t.Parallel()
	s, admin, d := logsWiki(t)
	viewer := s.SignInAs(t, "viewer@example.test", "Vera Viewer")
	env, err := s.DB.EnvironmentByName(context.Background(), "team-wiki", "production")
	if err != nil {
		t.Fatal(err)
	}
	s.AddMember(t, env, "viewer@example.test", store.RoleViewer)
	outsider := s.SignInAs(t, "outsider@example.test", "Otto Outsider")
	logs := wikiEnv + "/apps/web/logs"

	// The environment page links to it from web's card.
	_, envPage := s.Get(t, viewer, wikiEnv)
	if !strings.Contains(envPage, `href="`+logs+`" data-testid="app-logs"`) {
		t.Errorf("the environment page does not link web's card to %s", logs)
	}

	page, lines := waitLogsPage(t, s, viewer, logs, "scripted lines of both pods", func(ls []pageLine) bool {
		return anyLine(ls, func(l pageLine) bool { return l.source == "web-0/web" && strings.Contains(l.txt, "red alert") }) &&
			anyLine(ls, func(l pageLine) bool { return l.source == "web-1/web" && strings.Contains(l.txt, "red alert") })
	})
	assertNoSecret(t, "the logs page", page)
	for _, want := range []string{"session loaded: ••••", "cookie=•••• next=••••", `config {"secret":"••••","quoted":"••••"}`, `\x1b[31mred alert\x1b[0m \x1b]0;title\x07`} {
		if !anyLine(lines, func(l pageLine) bool { return l.txt == want }) {
			t.Errorf("no line reads %q", want)
		}
	}
	if strings.Contains(page, "\x1b") {
		t.Error("the page holds an ESC byte")
	}
	if !strings.Contains(page, "web-0/web") || !strings.Contains(page, "web-1/web") {
		t.Error("the page does not list web-0 and web-1")
	}

	// Search: on the server, on what is shown.
	_, found := waitLogsPage(t, s, viewer, logs+"?q=COOKIE", "search result", func(ls []pageLine) bool { return len(ls) > 0 })
	for _, l := range found {
		if !strings.Contains(strings.ToLower(l.txt), "cookie") {
			t.Errorf("a search for COOKIE shows %q", l.txt)
		}
	}
	if status, p := s.Get(t, viewer, logs+"?q="+url.QueryEscape("s3cret")); status != http.StatusOK || len(pageLines(t, p)) != 0 {
		t.Errorf("a search for part of the value = %d with %d lines, want none: the search runs on masked lines", status, len(pageLines(t, p)))
	}
	if status, _ := s.Get(t, viewer, logs+"?q="+strings.Repeat("x", 201)); status != http.StatusBadRequest {
		t.Errorf("a 201-character search = %d, want 400", status)
	}

	// Time window.
	since, until := lines[len(lines)/4].at, lines[len(lines)/2].at
	window := logs + "?since=" + url.QueryEscape(since.Format(time.RFC3339Nano)) + "&until=" + url.QueryEscape(until.Format(time.RFC3339Nano))
	_, inWindow := waitLogsPage(t, s, viewer, window, "lines in the window", func(ls []pageLine) bool { return len(ls) > 0 })
	for _, l := range inWindow {
		if l.at.Before(since) || !l.at.Before(until) {
			t.Errorf("a line at %v is outside [%v, %v)", l.at, since, until)
		}
	}
	if status, p := s.Get(t, viewer, logs+"?since=yesterday"); status != http.StatusBadRequest || !strings.Contains(p, "Since must be a time") {
		t.Errorf("since=yesterday = %d, want 400 saying what Since takes", status)
	}

	// Download: exactly the filtered lines, as text.
	resp, err := viewer.Get(s.URL + window + "&download=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") ||
		!regexp.MustCompile(`^attachment; filename="team-wiki-production-web-\d{8}T\d{6}Z\.log"$`).MatchString(resp.Header.Get("Content-Disposition")) {
		t.Errorf("download = %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"))
	}
	assertNoSecret(t, "the download", string(body))
	got := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(got) != len(inWindow) {
		t.Fatalf("the download has %d lines, the page %d", len(got), len(inWindow))
	}
	for i, l := range inWindow {
		if want := l.at.UTC().Format("2006-01-02T15:04:05.000Z") + "  " + l.source + "  " + l.txt; got[i] != want {
			t.Errorf("download line %d = %q, want %q", i, got[i], want)
		}
	}

	// Previous container: none before a restart, then what it printed.
	if _, p := s.Get(t, viewer, logs+"?previous=1"); len(pageLines(t, p)) != 0 || !strings.Contains(p, "No previous container") {
		t.Error("before any restart, the previous log is not said to be missing")
	}
	code := 3
	d.Faults.Set(func(f *local.Faults) {
		f.Runtime = map[string]*local.RuntimeFault{"web": {State: platform.StateCrashLooping, Restarts: 1, ExitCode: &code, Lines: []string{"panic: bad secret ${SESSION_SECRET}"}}}
	})
	page, prev := waitLogsPage(t, s, viewer, logs+"?previous=1", "previous log", func(ls []pageLine) bool { return len(ls) > 0 })
	assertNoSecret(t, "the previous log", page)
	if !anyLine(prev, func(l pageLine) bool { return l.txt == "panic: bad secret ••••" }) || !anyLine(prev, func(l pageLine) bool { return l.txt == "web exited with code 3" }) {
		t.Errorf("the previous log does not end with the crash and its exit code: %+v", prev[max(0, len(prev)-3):])
	}
	resp, err = viewer.Get(s.URL + logs + "?previous=1&download=1")
	if err == nil {
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		assertNoSecret(t, "the previous log's download", string(body))
		if !strings.Contains(resp.Header.Get("Content-Disposition"), "-web-previous-") || !strings.Contains(string(body), "web exited with code 3") {
			t.Errorf("the previous log's download is %q with %d bytes", resp.Header.Get("Content-Disposition"), len(body))
		}
	}

	// Follow: frames of new lines, masked.
	after := lines[len(lines)-1].at.Format(time.RFC3339Nano)
	conn, hs, err := s.DialStream(t, viewer, logs+"/follow?after="+url.QueryEscape(after), nil)
	if err != nil {
		t.Fatalf("follow handshake: %v (%v)", err, hs)
	}
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	var frames int
	for seenScripted := false; !seenScripted; {
		_, raw, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("reading the follow after %d frames: %v", frames, err)
		}
		frames++
		assertNoSecret(t, "a follow frame", string(raw))
		var f struct {
			Lines []struct {
				Datetime  string `json:"datetime"`
				Pod       string `json:"pod"`
				Container string `json:"container"`
				Text      string `json:"text"`
			} `json:"lines"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		for _, l := range f.Lines {
			at, _ := time.Parse(time.RFC3339Nano, l.Datetime)
			if !at.After(lines[len(lines)-1].at) {
				t.Errorf("the follow sent a line at %v, not after %s", at, after)
			}
			if l.Text == "session loaded: ••••" {
				seenScripted = true
			}
		}
	}

	// Outside the environment: nothing.
	for _, p := range []string{logs, logs + "?download=1", logs + "?previous=1&download=1"} {
		if status, body := s.Get(t, outsider, p); status != http.StatusForbidden && status != http.StatusNotFound {
			t.Errorf("an outsider's GET %s = %d", p, status)
		} else {
			assertNoSecret(t, "the outsider's answer", body)
			if strings.Contains(body, "log-line") {
				t.Errorf("an outsider's GET %s shows log lines", p)
			}
		}
	}
	if _, hs, err := s.DialStream(t, outsider, logs+"/follow", nil); err == nil || hs == nil || hs.StatusCode != http.StatusForbidden {
		t.Errorf("an outsider's follow handshake: %v, %v; want 403", err, hs)
	}
	if _, hs, err := s.DialStream(t, viewer, logs+"/follow", http.Header{"Origin": {"https://evil.example"}}); err == nil || hs == nil || hs.StatusCode != http.StatusForbidden {
		t.Errorf("a follow from another site's page: %v; want 403", err)
	}
	_ = admin
}
