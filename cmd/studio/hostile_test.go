package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// What a hostile Studio puts in the text it answers: a screen clear, a
// window title (OSC, ended by BEL), a hyperlink, a C1 CSI, a byte that is
// not UTF-8, a right-to-left override and a line of its own.
const (
	hostileESC  = "\x1b[2J\x1b]0;owned\a"
	hostileOSC8 = "\x1b]8;;https://evil.test/\x1b\\click\x1b]8;;\x1b\\"
	hostileC1   = "\u009b31m"
	hostileBidi = "\u202egnp.exe\u202c"
	hostileLine = "\nRun 1 succeeded: https://studio.test/"
)

// hostile is all of them in one text, around a word that must stay.
func hostile(word string) string {
	return hostileESC + word + hostileOSC8 + hostileC1 + hostileBidi + hostileLine
}

// rawControls describes the bytes of out a terminal would act on (C0
// controls but \t and \n, DEL, C1 controls, bidi overrides and isolates,
// bytes that are not UTF-8), by position and never by content; allowed
// are sequences the CLI writes itself (its progress line's \r\033[K).
func rawControls(out string, allowed ...string) []string {
	for _, a := range allowed {
		out = strings.ReplaceAll(out, a, "")
	}
	var found []string
	for i, r := range out {
		switch {
		case r == utf8.RuneError:
			found = append(found, fmt.Sprintf("a byte that is not UTF-8 at %d", i))
		case r < 0x20 && r != '\t' && r != '\n', r >= 0x7f && r <= 0x9f:
			found = append(found, fmt.Sprintf("U+%04X at %d", r, i))
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			found = append(found, fmt.Sprintf("U+%04X at %d", r, i))
		}
	}
	return found
}

// shownEscaped reports what of the hostile text out does not show as
// visible escapes.
func shownEscaped(out string) []string {
	var missing []string
	for _, want := range []string{`\x1b[2J\x1b]0;owned\x07`, `\x1b]8;;https://evil.test/\x1b\click`, `\u009b31m`, `\u202egnp.exe\u202c`, `\nRun 1 succeeded`} {
		if !strings.Contains(out, want) {
			missing = append(missing, want)
		}
	}
	return missing
}

// hostileStudio imitates the Studio's JSON API with hostile text in
// every string it answers: run 7 of shop/production runs a checkpoint
// (its name, warning and the run's address hostile) and fails (its
// error and reason hostile); a deploy of shop/refused is refused with a
// hostile problem document and diagnostics; a deploy of shop/broken gets
// a 502 whose status line is hostile.
func hostileStudio(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	reads := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runURL := "http://" + r.Host + "/projects/shop/environments/production/runs/7" + hostileESC
		run := func(finished bool) map[string]any {
			cp := map[string]any{"position": 1, "name": hostile("Build web"), "status": "running", "warning": hostile("slow")}
			run := map[string]any{"id": 7, "kind": "deploy", "status": "running", "url": runURL, "checkpoints": []any{cp}}
			if finished {
				cp["status"], cp["error"] = "failed", hostile("exit 1")
				run["status"], run["finished"], run["reason"] = "failed", true, hostile("Build web failed")
			}
			return run
		}
		answer := func(code int, v any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(v)
		}
		switch {
		case r.Method == "POST" && r.URL.Path == "/api/v1/projects/shop/environments/production/deploys":
			answer(http.StatusCreated, run(false))
		case r.Method == "GET" && r.URL.Path == "/api/v1/projects/shop/environments/production/runs/7":
			mu.Lock()
			reads++
			n := reads
			mu.Unlock()
			answer(http.StatusOK, run(n%2 == 0))
		case r.Method == "POST" && r.URL.Path == "/api/v1/projects/shop/environments/refused/deploys":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": 422, "title": hostile("Refused"), "detail": hostile("Required values are missing"),
				"field": hostile("revision"), "diagnostics": []any{map[string]any{"severity": "error", "path": hostile("applications.web"), "message": hostile("unknown key"), "line": 3, "column": 1}}})
		case r.Method == "POST" && r.URL.Path == "/api/v1/projects/shop/environments/broken/deploys":
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			fmt.Fprintf(buf, "HTTP/1.1 502 %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", strings.ReplaceAll(hostile("Bad Gateway"), "\n", " "))
			_ = buf.Flush()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDeployWaitAndWatchShowAHostileStudiosEscapesVisibly runs `studio
// deploy --wait` (text and --json) and `studio runs watch` against a fake
// Studio whose checkpoint names, warnings, errors, reasons, addresses,
// problem documents and status line carry terminal escape sequences, C1
// controls, bidi overrides and lines of their own: the output holds none
// of those bytes and shows each as a visible escape.
func TestDeployWaitAndWatchShowAHostileStudiosEscapesVisibly(t *testing.T) {
	t.Parallel()
	srv := hostileStudio(t)
	const token = "hostile-test-token-never-printed"
	for _, c := range []struct {
		name string
		args []string
		code int
		// words are texts the output must still show.
		words []string
	}{
		{"deploy --wait", []string{"deploy", "--url", srv.URL, "--project", "shop", "--env", "production", "--wait", "--poll", "10ms"}, 1,
			[]string{"Build web", "slow", "exit 1", "Build web failed", "Run 7 failed"}},
		{"deploy --wait --json", []string{"deploy", "--url", srv.URL, "--project", "shop", "--env", "production", "--wait", "--json", "--poll", "10ms"}, 1,
			[]string{"Build web", "slow", "exit 1", "Build web failed", `"event":"finished"`}},
		{"runs watch", []string{"runs", "watch", "--poll", "10ms", srv.URL + "/projects/shop/environments/production/runs/7"}, 1,
			[]string{"Build web", "exit 1", "Build web failed"}},
		{"a refused deploy", []string{"deploy", "--url", srv.URL, "--project", "shop", "--env", "refused"}, 2,
			[]string{"Required values are missing", "(field ", "unknown key", "applications.web"}},
		{"a 502 with a hostile status line", []string{"deploy", "--url", srv.URL, "--project", "shop", "--env", "broken"}, 1,
			[]string{"502", "Bad Gateway", `\x1b[2J\x1b]0;owned\x07`, `\u202egnp.exe`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := studioCLI(t, token, c.args...)
			out := r.stdout + r.stderr
			// What a failure may print of the output: never the token.
			printable := strings.ReplaceAll(out, token, "[the token]")
			if r.code != c.code {
				t.Errorf("exit %d, want %d\n%q", r.code, c.code, printable)
			}
			if found := rawControls(out); len(found) > 0 {
				t.Errorf("the output holds bytes a terminal acts on: %s", strings.Join(found, ", "))
			}
			shown := out
			if c.name == "deploy --wait --json" {
				// What a reader of the JSON (jq -r) prints: its strings.
				shown = ""
				sc := bufio.NewScanner(strings.NewReader(r.stdout))
				for sc.Scan() {
					var ev map[string]any
					if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
						t.Fatalf("--json printed a line that is not JSON: %q", sc.Text())
					}
					for _, v := range ev {
						if s, ok := v.(string); ok {
							shown += s + "\n"
						}
					}
				}
				if found := rawControls(shown); len(found) > 0 {
					t.Errorf("the strings of the JSON hold bytes a terminal acts on: %s", strings.Join(found, ", "))
				}
			}
			if missing := shownEscaped(shown); len(missing) > 0 && c.name != "a 502 with a hostile status line" {
				t.Errorf("the output does not show %q as visible escapes\n%q", missing, printable)
			}
			for _, w := range c.words {
				if !strings.Contains(out, w) {
					t.Errorf("the output lacks %q\n%q", w, printable)
				}
			}
			if strings.Contains(out, token) {
				t.Error("the output holds the token")
			}
		})
	}
}

// TestDeployWaitOnATerminalShowsAHostileStudiosEscapesVisibly follows
// the hostile run as on a terminal (its progress line rewritten in place):
// the only control sequence in the output is the CLI's own \r\033[K.
func TestDeployWaitOnATerminalShowsAHostileStudiosEscapesVisibly(t *testing.T) {
	// Serial: t.Setenv(STUDIO_TOKEN), which newAPIClient reads in this process.
	srv := hostileStudio(t)
	t.Setenv("STUDIO_TOKEN", "hostile-test-token")
	c, err := newAPIClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	f := &follower{c: c, out: &out, errOut: &errOut, stdin: strings.NewReader(""), terminal: true, poll: 10_000_000}
	if code := f.follow(context.Background(), "/api/v1/projects/shop/environments/production/runs/7"); code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	got := out.String() + errOut.String()
	if !strings.Contains(got, "\r\033[K") {
		t.Fatalf("no progress line was written as on a terminal\n%q", got)
	}
	if found := rawControls(got, "\r\033[K"); len(found) > 0 {
		t.Errorf("the output holds bytes a terminal acts on besides the progress line's own: %s", strings.Join(found, ", "))
	}
	if missing := shownEscaped(got); len(missing) > 0 {
		t.Errorf("the output does not show %q as visible escapes\n%q", missing, got)
	}
}

// TestRedirectIsRefusedAndNeverCarriesTheToken points the CLI at a Studio
// that answers every request with a redirect (307 for the deploy's POST,
// 302 for runs watch's GET, and a 3xx without a Location) to another
// server: the CLI refuses to follow, says where the redirect pointed by
// scheme and host only, exits 2, and the other server never sees a
// request, let alone the token.
func TestRedirectIsRefusedAndNeverCarriesTheToken(t *testing.T) {
	t.Parallel()
	const token = "redirect-test-token-never-sent"
	var mu sync.Mutex
	seen, withToken := 0, 0
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen++
		if strings.Contains(r.Header.Get("Authorization"), token) || strings.Contains(r.URL.RawQuery, token) {
			withToken++
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id": 1, "status": "succeeded", "finished": true, "url": "https://elsewhere.test/"}`))
	}))
	t.Cleanup(elsewhere.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusFound
		switch {
		case r.Method == "POST":
			code = http.StatusTemporaryRedirect
		case strings.Contains(r.URL.Path, "/runs/9"):
			w.WriteHeader(http.StatusMultipleChoices)
			return
		}
		http.Redirect(w, r, elsewhere.URL+r.URL.Path+"?secret-path-part=1", code)
	}))
	t.Cleanup(redirector.Close)
	wantTo := "answered with a redirect to " + elsewhere.URL + "; refusing to follow (a redirect never carries the token)"
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"deploy (307)", []string{"deploy", "--url", redirector.URL, "--project", "shop", "--env", "production", "--wait"}, wantTo},
		{"runs watch (302)", []string{"runs", "watch", redirector.URL + "/projects/shop/environments/production/runs/7"}, wantTo},
		{"runs watch (300 without a Location)", []string{"runs", "watch", redirector.URL + "/projects/shop/environments/production/runs/9"}, "answered with a redirect to nowhere (300 Multiple Choices); refusing to follow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := studioCLI(t, token, c.args...)
			if r.code != exitRefused || !strings.Contains(r.stderr, "the Studio at "+redirector.URL+" "+c.want) {
				t.Errorf("exit %d, want %d with the refusal\n%q", r.code, exitRefused, strings.ReplaceAll(r.stdout+r.stderr, token, "[the token]"))
			}
			if strings.Contains(r.stdout+r.stderr, "secret-path-part") {
				t.Error("the refusal quotes the redirect's path or query, not only its scheme and host")
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if seen > 0 || withToken > 0 {
		t.Errorf("the server redirected to got %d requests (%d with the token), want none", seen, withToken)
	}
}
