package stream

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skali-dev/studio/events"
)

// Metrics are the streams' Prometheus metrics: streams open, events
// delivered and how long after their notification, subscribers closed for
// falling behind, and the hub's notifications and reads. A nil *Metrics
// records nothing.
type Metrics struct {
	registry      prometheus.Registerer
	openStreams   *prometheus.GaugeVec
	delivered     *prometheus.CounterVec
	deliveredRun  prometheus.Counter
	slowClosed    *prometheus.CounterVec
	deliveryDelay prometheus.Histogram
	hubRead       *prometheus.HistogramVec
	hubOnce       sync.Once
}

// NewMetrics registers the streams' metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
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
	}
	m.deliveredRun = m.delivered.WithLabelValues("run")
	reg.MustRegister(m.openStreams, m.delivered, m.slowClosed, m.deliveryDelay, m.hubRead)
	return m
}

// followHub adds the hub's notification count and read times to the
// metrics (once, should the same metrics serve several servers, as in
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
