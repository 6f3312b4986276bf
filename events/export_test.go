package events

import "fmt"

// DebugState describes the hub's topics, for test failure messages.
func (h *Hub) DebugState() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := fmt.Sprintf("channels=%d subs=%d", h.channels, h.subs)
	for s, t := range h.topics {
		out += fmt.Sprintf(" | %v: cursor=%d ready=%v dirty=%v fetching=%v listened=%v subs=%d", s, t.cursor, t.ready, t.dirty, t.fetching, t.listened, len(t.subs))
		for sub := range t.subs {
			sub.mu.Lock()
			out += fmt.Sprintf(" [last=%d live=%v queue=%d err=%v]", sub.last, sub.live, len(sub.queue), sub.err)
			sub.mu.Unlock()
		}
	}
	return out
}

// SetBeforeInitForTest makes f run before a new topic reads its starting
// point. Call it before the first Subscribe.
func (h *Hub) SetBeforeInitForTest(f func()) { h.beforeInit = f }

// ConnectedForTest reports whether the hub's connection is up (it
// listens only while it follows a stream).
func (h *Hub) ConnectedForTest() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wake != nil
}

// SetBeforeListenForTest makes f run before the hub starts listening. Call
// it before the first Subscribe.
func (h *Hub) SetBeforeListenForTest(f func()) { h.beforeListen = f }

// ChannelsForTest returns how many channels the hub's connection LISTENs
// to.
func (h *Hub) ChannelsForTest() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.channels
}

// QuietForTest reports whether the hub LISTENs to the channel of every
// stream it follows, and to no other, with no read under way or due: from
// then on only a notification makes it read.
func (h *Hub) QuietForTest() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.channels != len(h.topics) {
		return false
	}
	for _, t := range h.topics {
		if !t.ready || !t.listened || t.dirty || t.fetching {
			return false
		}
	}
	return true
}

// QueuedForTest returns how many live events wait in the subscription's
// queue.
func (s *Subscription) QueuedForTest() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}
