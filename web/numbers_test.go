package web_test

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

// The edges of the columns numbers are compared with: revision numbers and
// a run's event sequence are integers, ids and an environment's event
// sequence bigints.
const (
	int4Max   = "2147483647"
	int4Over  = "2147483648"
	int8Max   = "9223372036854775807"
	int8Over  = "9223372036854775808"
	negative  = "-1"
	hugeDigit = "99999999999999999999999999"
)

var edges = []string{int4Max, int4Over, int8Max, int8Over, negative, hugeDigit}

// TestNumbersBeyondTheirColumn sends numbers at and beyond the range of
// the column each is compared with, in route paths (404), in queries and
// forms (400 with a sentence), and to the event streams before their
// upgrade: none reaches a query that fails, so none answers 500.
func TestNumbersBeyondTheirColumn(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	c := s.SignInLocal(t)
	const envPath = "/projects/hello-world/environments/production"

	type check struct {
		name   string
		path   func(n string) string
		want   map[string]int // status by number; the rest want other
		other  int
		phrase string // in the page of a 400
	}
	pages := []check{
		{name: "deploy plan ?revision", path: func(n string) string { return envPath + "/deploys/new?revision=" + n },
			want: map[string]int{int4Max: 404}, other: 400, phrase: "revision must be a revision number from 1 to 2147483647"},
		{name: "revision page", path: func(n string) string { return "/projects/hello-world/revisions/" + n }, other: 404},
		{name: "run page", path: func(n string) string { return envPath + "/runs/" + n }, other: 404},
		{name: "runs ?before", path: func(n string) string { return envPath + "/runs?before=" + n },
			want: map[string]int{int4Max: 200, int4Over: 200, int8Max: 200}, other: 400, phrase: "before must be a run number"},
		{name: "member removal page", path: func(n string) string { return envPath + "/members/" + n + "/remove" }, other: 404},
		{name: "snapshot restore page", path: func(n string) string { return envPath + "/backups/" + n + "/restore" }, other: 404},
		{name: "snapshot removal page", path: func(n string) string { return envPath + "/backups/" + n + "/remove" }, other: 404},
	}
	for _, p := range pages {
		for _, n := range edges {
			want, ok := p.want[n]
			if !ok {
				want = p.other
			}
			status, body := s.Get(t, c, p.path(n))
			if status != want {
				t.Errorf("%s %s: GET %s = %d, want %d", p.name, n, p.path(n), status, want)
			} else if want == 400 && !strings.Contains(body, p.phrase) {
				t.Errorf("%s %s: the 400 page lacks %q:\n%s", p.name, n, p.phrase, pageMain(body))
			}
		}
	}

	posts := []check{
		{name: "deploy revision field", path: func(string) string { return envPath + "/deploys" },
			want: map[string]int{int4Max: 404}, other: 400, phrase: "revision must be a revision number from 1 to 2147483647"},
		{name: "cancel run", path: func(n string) string { return envPath + "/runs/" + n + "/cancel" }, other: 404},
		{name: "change member role", path: func(n string) string { return envPath + "/members/" + n + "/role" }, other: 404},
		{name: "restore snapshot", path: func(n string) string { return envPath + "/backups/" + n + "/restore" }, other: 404},
	}
	for _, p := range posts {
		for _, n := range edges {
			want, ok := p.want[n]
			if !ok {
				want = p.other
			}
			resp, body := s.PostForm(t, c, p.path(n), url.Values{"revision": {n}, "confirm": {"hello-world"}, "role": {"viewer"}})
			if resp.StatusCode != want {
				t.Errorf("%s %s: POST %s = %d, want %d", p.name, n, p.path(n), resp.StatusCode, want)
			} else if want == 400 && !strings.Contains(body, p.phrase) {
				t.Errorf("%s %s: the 400 page lacks %q:\n%s", p.name, n, p.phrase, pageMain(body))
			}
		}
	}

	// The streams answer before upgrading, and upgrade for every number
	// their column holds.
	streams := []check{
		{name: "run stream ?after", path: func(n string) string { return envPath + "/runs/" + strconv.FormatInt(runID, 10) + "/events?after=" + n },
			want: map[string]int{int4Max: 101}, other: 400},
		{name: "environment stream ?after", path: func(n string) string { return envPath + "/events?after=" + n },
			want: map[string]int{int4Max: 101, int4Over: 101, int8Max: 101}, other: 400},
		{name: "run stream path", path: func(n string) string { return envPath + "/runs/" + n + "/events" }, other: 404},
	}
	for _, p := range streams {
		for _, n := range edges {
			want, ok := p.want[n]
			if !ok {
				want = p.other
			}
			conn, resp, err := s.DialStream(t, c, p.path(n), nil)
			if resp == nil {
				t.Fatalf("%s %s: no handshake answer: %v", p.name, n, err)
			}
			if resp.StatusCode != want {
				t.Errorf("%s %s: handshake %s = %d, want %d", p.name, n, p.path(n), resp.StatusCode, want)
			}
			if conn != nil {
				conn.Close()
			}
		}
	}
	for line := range strings.Lines(s.Logs.String()) {
		if strings.Contains(line, "status=500") {
			t.Errorf("a request answered 500: %s", line)
		}
	}
}
