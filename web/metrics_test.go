package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/webtest"
)

// TestMetrics checks that requests are counted by route pattern and that
// an open stream, its delivered events, the hub's reads and the run queue
// show in /metrics.
func TestMetrics(t *testing.T) {
	t.Parallel()
	var metrics *web.Metrics
	s := webtest.Start(t, func(d *web.Deps) {
		metrics = web.NewMetrics(d.DB)
		d.Metrics = metrics
	})
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	s.Get(t, admin, "/projects/hello-world/environments/production")
	conn, resp, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, 0), nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	wants := []string{
		`studio_http_requests_total{code="200",method="GET",route="/projects/{project}/environments/{env}"} 1`,
		`studio_http_requests_total{code="101",method="GET",route="/projects/{project}/environments/{env}/runs/{run}/events"} 1`,
		`studio_event_streams_open{stream="run"} 1`,
		`studio_events_delivered_total{stream="run"}`,
		`studio_event_delivery_seconds_count`,
		`studio_event_hub_read_seconds_count{stream="run"}`,
		`studio_run_queue_depth 1`,
		`go_goroutines`,
	}
	scrape := func() string {
		rec := httptest.NewRecorder()
		metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(rec.Result().Body)
		return string(body)
	}
	// An event appended while the stream still reads its backlog goes out
	// as backlog (no notification delay to observe): append until one has
	// gone out live.
	var body string
	for i := 0; i < 50; i++ {
		s.AppendRunEvent(t, runID, "running", 0)
		webtest.ReadFrame(t, conn)
		time.Sleep(20 * time.Millisecond)
		body = scrape()
		if strings.Contains(body, "studio_event_delivery_seconds_count 0") || !strings.Contains(body, "studio_event_delivery_seconds_count") {
			continue
		}
		if strings.Contains(body, wants[1]) {
			break
		}
	}
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// An event that went out live was read once after its notification.
	if strings.Contains(body, `studio_event_hub_read_seconds_count{stream="run"} 0`) {
		t.Errorf("the hub's reads after notifications were not counted")
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", body)
	}
}

// TestMetricsLabelsStayFew sends thousands of invented methods to many
// different paths, matched and not: the request metrics keep one series per
// known method, route pattern and status, so nobody can grow them at will.
func TestMetricsLabelsStayFew(t *testing.T) {
	t.Parallel()
	var metrics *web.Metrics
	s := webtest.Start(t, func(d *web.Deps) {
		metrics = web.NewMetrics(d.DB)
		d.Metrics = metrics
	})
	c := s.NewClient()
	paths := []string{"/", "/login", "/projects/p%d", "/projects/p%d/environments/e/runs/%d", "/nowhere/%d", "/static/x%d.css", "/healthz"}
	const n = 2000
	send := func(method, p string) error {
		req, err := http.NewRequest(method, s.URL+p, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	// Every invented method, and a GET of every tenth path: the paths
	// differ in every request, the route patterns do not.
	work := make(chan int)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			var first error
			for i := range work {
				p := strings.ReplaceAll(paths[i%len(paths)], "%d", strconv.Itoa(i))
				if i%10 == 0 && first == nil {
					first = send(http.MethodGet, p)
				}
				if first == nil {
					first = send(fmt.Sprintf("INVENTED%d", i), p)
				}
			}
			errs <- first
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// The standard methods, the lower-case spelling of one of them
	// (methods are case-sensitive) and a path never routed.
	for _, m := range []string{"GET", "get", "DELETE", "OPTIONS", "PATCH"} {
		if err := send(m, "/nowhere/again"); err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	series := map[string]int{}
	methods := map[string]bool{}
	for line := range strings.Lines(body) {
		for _, name := range []string{"studio_http_requests_total{", "studio_http_request_duration_seconds_count{"} {
			if strings.HasPrefix(line, name) {
				series[name]++
				_, after, _ := strings.Cut(line, `method="`)
				m, _, _ := strings.Cut(after, `"`)
				methods[m] = true
			}
		}
	}
	for name, count := range series {
		// Seven paths at most a few statuses each, plus five methods on
		// the unrouted path: a few dozen, never thousands.
		if count > 40 {
			t.Errorf("%s has %d series after %d invented methods, want at most 40", strings.TrimSuffix(name, "{"), count, n)
		}
	}
	if len(series) != 2 {
		t.Fatalf("metrics lack the request series:\n%s", body)
	}
	var unknown []string
	for m := range methods {
		switch m {
		case "GET", "DELETE", "OPTIONS", "PATCH", "other":
		default:
			unknown = append(unknown, m)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		t.Errorf("%d method labels besides the standard methods and \"other\", such as %q", len(unknown), unknown[:min(3, len(unknown))])
	}
	if !methods["other"] || !methods["GET"] {
		t.Errorf("no method label \"other\" or \"GET\"")
	}
	if t.Failed() && len(unknown) == 0 {
		for line := range strings.Lines(body) {
			if strings.HasPrefix(line, "studio_http_requests_total{") {
				t.Log(strings.TrimSpace(line))
			}
		}
	}
}
