package web

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/store"
)

// Metrics are the Studio's Prometheus metrics: event streams, HTTP requests
// by route pattern, the run queue, and the Go runtime and process. A nil
// *Metrics records nothing.
type Metrics struct {
	registry *prometheus.Registry

	openStreams   *prometheus.GaugeVec
	delivered     *prometheus.CounterVec
	deliveredRun  prometheus.Counter
	slowClosed    *prometheus.CounterVec
	deliveryDelay prometheus.Histogram
	hubRead       *prometheus.HistogramVec
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	hubOnce       sync.Once
}

// NewMetrics registers the Studio's metrics; the run queue's depth is read
// from db at each scrape.
func NewMetrics(db *store.DB) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		registry: reg,
		openStreams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "studio_event_streams_open",
			Help: "Websocket event streams open now, by stream kind (run, environment).",
		}, []string{"stream"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "studio_events_delivered_total",
			Help: "Events written to websocket subscribers (backlog and live), by stream kind.",
		}, []string{"stream"}),
		slowClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "studio_event_subscribers_closed_slow_total",
			Help: "Subscribers closed because they fell behind (they resume by replay), by stream kind.",
		}, []string{"stream"}),
		deliveryDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "studio_event_delivery_seconds",
			Help:    "Time from receiving an event's notification to writing it to a subscriber.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		hubRead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "studio_event_hub_read_seconds",
			Help:    "Time the event hub took to read a followed stream's new events, with the state their frames are rendered from, after notifications: one read per stream, whatever the number of subscribers. By stream kind.",
			Buckets: []float64{.00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"stream"}),
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
	m.deliveredRun = m.delivered.WithLabelValues("run")
	reg.MustRegister(m.openStreams, m.delivered, m.slowClosed, m.deliveryDelay, m.hubRead, m.requests, m.duration,
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

// followHub adds the hub's notification count and read times to the
// metrics (once, should the same metrics serve several applications, as in
// tests).
func (m *Metrics) followHub(h *events.Hub) {
	if m == nil || h == nil {
		return
	}
	m.hubOnce.Do(func() {
		m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "studio_event_notifications_total",
			Help: "Notifications the event hub received: one per announced event of a stream this process follows (it listens to no other).",
		}, func() float64 { return float64(h.Notifications()) }))
		read := map[events.StreamKind]prometheus.Observer{
			events.RunEvents:         m.hubRead.WithLabelValues(events.RunEvents.String()),
			events.EnvironmentEvents: m.hubRead.WithLabelValues(events.EnvironmentEvents.String()),
		}
		h.ObserveReads(func(k events.StreamKind, d time.Duration) {
			if o, ok := read[k]; ok {
				o.Observe(d.Seconds())
			}
		})
	})
}

// Handler serves the metrics in the Prometheus text format. A collector
// that fails (the database's, during an outage) leaves its metric out and
// the rest are served: a scrape must not fail just when it matters most.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func (m *Metrics) streamOpened(kind string) {
	if m != nil {
		m.openStreams.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) streamClosed(kind string) {
	if m != nil {
		m.openStreams.WithLabelValues(kind).Dec()
	}
}

// eventsDelivered counts frames written to a watcher at once, and the
// time from each live event's notification to its write.
func (m *Metrics) eventsDelivered(kind string, evs []*events.Event) {
	if m == nil {
		return
	}
	if kind == "run" {
		m.deliveredRun.Add(float64(len(evs)))
	} else {
		m.delivered.WithLabelValues(kind).Add(float64(len(evs)))
	}
	now := time.Now()
	for _, e := range evs {
		if !e.Notified.IsZero() {
			m.deliveryDelay.Observe(now.Sub(e.Notified).Seconds())
		}
	}
}

func (m *Metrics) subscriberTooSlow(kind string) {
	if m != nil {
		m.slowClosed.WithLabelValues(kind).Inc()
	}
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
			if isWebsocketUpgrade(r) {
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
