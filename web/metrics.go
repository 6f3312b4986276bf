package web

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/stream"
)

// Metrics are the Studio's Prometheus metrics: HTTP requests by route
// pattern, the run queue, backups that need attention, the Go runtime and
// process, and the event streams' (package stream). A nil *Metrics records
// nothing.
type Metrics struct {
	registry *prometheus.Registry
	streams  *stream.Metrics
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the Studio's metrics; the run queue's depth is read
// from db at each scrape.
func NewMetrics(db *store.DB) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		registry: reg,
		streams:  stream.NewMetrics(reg),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "studio_http_requests_total",
			Help: "HTTP requests by method, chi route pattern and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "studio_http_request_duration_seconds",
			Help:    "HTTP request durations by method and chi route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
	}
	reg.MustRegister(m.requests, m.duration,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "studio_run_queue_depth",
			Help: "Runs not finished yet (pending, running or waiting).",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := db.RunQueueDepth(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		}),
		backupAlarms{db: db},
	)
	return m
}

// Streams are the event streams' metrics, registered with these (nil for
// nil Metrics).
func (m *Metrics) Streams() *stream.Metrics {
	if m == nil {
		return nil
	}
	return m.streams
}

// backupAlarmDesc is studio_backup_alarm: 1 for each environment whose
// backups need attention (the last scheduled fire failed or was skipped, or
// no good snapshot within twice the schedule's interval), the state the
// environment and home pages show in red.
var backupAlarmDesc = prometheus.NewDesc("studio_backup_alarm",
	"1 for each environment whose backups need attention: its last scheduled fire failed or was skipped, or it has no good snapshot within twice its schedule's interval.",
	[]string{"project", "environment", "reason"}, nil)

// backupAlarms reads the alarms at each scrape.
type backupAlarms struct{ db *store.DB }

// Describe implements prometheus.Collector.
func (b backupAlarms) Describe(ch chan<- *prometheus.Desc) { ch <- backupAlarmDesc }

// Collect implements prometheus.Collector.
func (b backupAlarms) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	alarms, err := b.db.BackupAlarms(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(backupAlarmDesc, err)
		return
	}
	for _, a := range alarms {
		ch <- prometheus.MustNewConstMetric(backupAlarmDesc, prometheus.GaugeValue, 1, a.Project, a.Environment, a.Reason)
	}
}

// Handler serves the metrics in the Prometheus text format. A collector
// that fails (the database's, during an outage) leaves its metric out and
// the rest are served: a scrape must not fail just when it matters most.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// instrument counts requests and their durations by the chi route pattern
// (never the raw path, which would make a series per project and id) and
// the method, known methods only.
func (m *Metrics) instrument(next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		code := rec.status
		if code == 0 {
			code = http.StatusOK
			if stream.IsUpgrade(r) {
				// The upgrade's 101 went out on the hijacked connection.
				code = http.StatusSwitchingProtocols
			}
		}
		method := methodLabel(r.Method)
		m.requests.WithLabelValues(method, route, strconv.Itoa(code)).Inc()
		m.duration.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
	})
}

// methodLabel is the method as a label: one of the standard methods, or
// "other". Any token is a valid method in HTTP, so a raw method as a label
// would let anyone add series without limit.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}
