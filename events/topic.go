package events

import (
	"time"

	"github.com/skali-dev/studio/store"
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
	// state is, for a run's stream, the run and its environment as the
	// last read or notification left them (nil until the first read): a
	// notification that carries its event is rendered from it and its own
	// state, without a read.
	state *runState
}

// runState is what a run's live fragments render from besides the event:
// the run (its row as of the newest event handed out) and its environment.
type runState struct {
	run *store.Run
	env *store.Environment
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

// notified records a notification that stream has an event numbered seq;
// notice, when the notification carried it, is the event with its state.
// The next event of a topic whose state is known, with no read due or under
// way, is handed to the subscribers at once; any other makes the topic read
// from its cursor (a gap, an event too large to carry, a reconnect, a read
// meanwhile), so every event still goes out once and in order.
func (h *Hub) notified(stream Stream, seq int64, notice *store.RunNotice, at time.Time) {
	h.mu.Lock()
	t, ok := h.topics[stream]
	if !ok || (t.ready && seq <= t.cursor) {
		h.mu.Unlock()
		return
	}
	if notice != nil && t.ready && !t.dirty && !t.fetching && t.state != nil && seq == t.cursor+1 && len(t.subs) > 0 && !h.closed {
		run := notice.Apply(t.state.run, seq)
		t.state = &runState{run: run, env: t.state.env}
		e := &Event{Stream: stream, Seq: seq, At: notice.At, Checkpoint: notice.Checkpoint, Payload: notice.Payload,
			Notified: at, Run: run, Environment: t.state.env, CheckpointNow: notice.CheckpointOf(stream.ID)}
		t.cursor = seq
		slow, wake := h.pushLocked(t, []*Event{e})
		h.mu.Unlock()
		wakeAll(wake)
		for _, s := range slow {
			s.fail(ErrSlowSubscriber)
		}
		return
	}
	defer h.mu.Unlock()
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
		evs, state, err := h.readState(h.ctx, t.stream, cursor, h.opts.PageSize)
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
		var wake []func()
		if len(evs) > 0 && evs[len(evs)-1].Seq > t.cursor {
			t.cursor = evs[len(evs)-1].Seq
			slow, wake = h.pushLocked(t, evs)
		}
		if state != nil && (len(evs) == 0 || evs[len(evs)-1].Seq >= t.cursor) {
			// Read after its events: as new as the cursor, or newer.
			t.state = state
		}
		h.mu.Unlock()
		wakeAll(wake)
		for _, s := range slow {
			s.fail(ErrSlowSubscriber)
		}
	}
}

// pushLocked queues evs for every subscriber of t and returns those whose
// queue would overflow (the caller fails them once it lets go of h.mu) and
// the notify functions of the others (see Subscription.SetNotify; the
// caller calls them once it lets go of h.mu, so that a subscriber's writer
// may start at once without holding up the hub).
func (h *Hub) pushLocked(t *topic, evs []*Event) (slow []*Subscription, wake []func()) {
	for s := range t.subs {
		ok, notify := s.push(evs, h.opts.QueueLimit, len(t.subs))
		if !ok {
			slow = append(slow, s)
		} else if notify != nil {
			if wake == nil {
				wake = make([]func(), 0, len(t.subs))
			}
			wake = append(wake, notify)
		}
	}
	return slow, wake
}

// wakeAll calls the notify functions pushLocked returned.
func wakeAll(wake []func()) {
	for _, f := range wake {
		f()
	}
}
