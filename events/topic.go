package events

import (
	"time"
)

// topic is the shared state of one followed stream.
type topic struct {
	stream Stream
	subs   map[*Subscription]struct{}
	// cursor is the highest sequence number handed to the subscribers.
	cursor int64
	// ready says cursor has been initialised from the table; readyCh is
	// closed then (or when initialising failed).
	ready   bool
	readyCh chan struct{}
	// dirty says events past cursor may exist (a notification arrived, or
	// the connection came back) since the last read started.
	dirty    bool
	fetching bool
	// notified is when the first notification not read yet arrived.
	notified time.Time
	// listened says the connection LISTENs on the stream's channel and
	// the stream was read again after that started.
	listened bool
}

// failTopic ends every subscription of t with err.
func (h *Hub) failTopic(t *topic, err error) {
	h.mu.Lock()
	var subs []*Subscription
	for s := range t.subs {
		subs = append(subs, s)
	}
	if h.topics[t.stream] == t {
		delete(h.topics, t.stream)
		h.topicsChangedLocked()
	}
	h.mu.Unlock()
	for _, s := range subs {
		s.fail(err)
	}
}

// notified records a notification that stream has an event numbered seq.
func (h *Hub) notified(stream Stream, seq int64, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.topics[stream]
	if !ok || (t.ready && seq <= t.cursor) {
		return
	}
	t.dirty = true
	if t.notified.IsZero() {
		t.notified = at
	}
	h.kickLocked(t)
}

// kickLocked starts reading t unless a read is under way (which will see
// the dirty flag when it finishes: notifications arriving meanwhile are
// coalesced into one more read).
func (h *Hub) kickLocked(t *topic) {
	if !t.ready || !t.dirty || t.fetching || h.closed {
		return
	}
	t.fetching = true
	go h.fetch(t)
}

// fetch reads t's new events from the table and hands them to t's
// subscribers until no notification is outstanding.
func (h *Hub) fetch(t *topic) {
	failures := 0
	for {
		h.mu.Lock()
		if !t.dirty || len(t.subs) == 0 || h.closed || h.topics[t.stream] != t {
			t.fetching = false
			h.mu.Unlock()
			return
		}
		t.dirty = false
		cursor, notified := t.cursor, t.notified
		t.notified = time.Time{}
		h.mu.Unlock()

		start := time.Now()
		evs, err := h.read(h.ctx, t.stream, cursor, h.opts.PageSize)
		if f := h.observeRead.Load(); f != nil && err == nil {
			(*f)(t.stream.Kind, time.Since(start))
		}
		if err != nil {
			if h.ctx.Err() != nil {
				h.mu.Lock()
				t.fetching = false
				h.mu.Unlock()
				return
			}
			failures++
			h.logger.Warn("event hub: read events", "stream", t.stream.Kind.String(), "id", t.stream.ID, "err", err)
			h.mu.Lock()
			t.dirty = true
			if t.notified.IsZero() {
				t.notified = notified
			}
			h.mu.Unlock()
			sleep(h.ctx, backoff(failures))
			continue
		}
		failures = 0
		for _, e := range evs {
			e.Notified = notified
		}
		h.mu.Lock()
		if len(evs) == h.opts.PageSize {
			t.dirty = true // more may follow
		}
		var slow []*Subscription
		if len(evs) > 0 && evs[len(evs)-1].Seq > t.cursor {
			t.cursor = evs[len(evs)-1].Seq
			for s := range t.subs {
				if !s.push(evs, h.opts.QueueLimit) {
					slow = append(slow, s)
				}
			}
		}
		h.mu.Unlock()
		for _, s := range slow {
			s.fail(ErrSlowSubscriber)
		}
	}
}
