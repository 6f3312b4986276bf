package web_test

import (
	"io"
	"net/http/httptest"
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
	var metrics *web.Metrics
	s := webtest.Start(t, func(d *web.Deps) {
		metrics = web.NewMetrics(d.DB)
		d.Metrics = metrics
	})
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)
	s.Get(t, admin, "/projects/hello-world/environments/production")
	conn, resp, err := s.DialStream(t, admin, runEventsPath(runID, 0), nil)
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
		appendRunEvent(t, s.DB, runID, "running", 0)
		readFrame(t, conn)
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
