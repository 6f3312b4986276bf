package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Subscription is one subscriber's view of a stream. Only one goroutine may
// call Next; Close may be called from any.
type Subscription struct {
	hub    *Hub
	stream Stream
	// last is the sequence number of the newest event Next returned.
	last int64
	live bool

	mu    sync.Mutex
	queue []*Event
	// spare is the queue's previous array, handed out by the last wait and
	// reused by the next (the caller is done with the events it got when
	// it asks for more): live events are queued without allocating.
	spare  []*Event
	err    error
	closed bool
	wake   chan struct{}
	notify func()
	// fanout is how many subscriptions the stream's topic had when events
	// were last queued for this one.
	fanout atomic.Int32
}

// SetNotify makes the hub call f whenever events are queued for the
// subscription or it fails, instead of waking a blocked Next: a subscriber
// can then run a goroutine only while there is something to write, and
// call Poll there (not Next, which would wait for a wake-up that queued
// events no longer send). f is called without the hub's locks held, from
// the goroutine that queued the events (the hub's listener, mostly): it
// should not wait long, since the stream's other subscribers wait for it.
func (s *Subscription) SetNotify(f func()) {
	s.mu.Lock()
	s.notify = f
	s.mu.Unlock()
}

// Err returns why the subscription failed (ErrSlowSubscriber,
// ErrHubClosed, a database error), or nil while it has not.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Pending reports whether events are queued or the subscription has failed.
func (s *Subscription) Pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) > 0 || s.err != nil
}

// Stream returns the stream this subscription follows.
func (s *Subscription) Stream() Stream { return s.stream }

// Last returns the sequence number of the newest event Next returned (or
// the after value it was created with).
func (s *Subscription) Last() int64 { return s.last }

// Fanout returns how many subscriptions of this process followed the
// stream when events were last queued for s: a subscriber may write a few
// watchers' frames at once where it would hand many to other goroutines.
func (s *Subscription) Fanout() int { return int(s.fanout.Load()) }

// push queues live events for a topic of fanout subscriptions; it reports
// false when the queue would grow past limit (the caller then fails the
// subscription), and returns the function set by SetNotify, which the
// caller calls once it holds no lock. Called with hub.mu held.
func (s *Subscription) push(evs []*Event, limit, fanout int) (ok bool, notify func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.err != nil {
		return true, nil
	}
	if len(s.queue)+len(evs) > limit {
		return false, nil
	}
	s.queue = append(s.queue, evs...)
	s.fanout.Store(int32(min(fanout, 1<<30)))
	if s.notify != nil {
		return true, s.notify
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true, nil
}

// fail ends the subscription with err: Next returns err from now on.
func (s *Subscription) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
		s.queue = nil
	}
	notify := s.notify
	s.mu.Unlock()
	s.detach()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if notify != nil {
		notify()
	}
}

// detach removes s from its topic (dropping the topic when it was the last).
func (s *Subscription) detach() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.topics[s.stream]
	if ok {
		if _, member := t.subs[s]; member {
			delete(t.subs, s)
			if len(t.subs) == 0 {
				delete(h.topics, s.stream)
				h.topicsChangedLocked()
			}
		}
	}
}

// Close ends the subscription; it is safe to call more than once.
func (s *Subscription) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.queue = nil
	s.mu.Unlock()
	s.detach()
	h := s.hub
	h.mu.Lock()
	h.subs--
	if h.subs == 0 && h.idle != nil {
		select {
		case <-h.idle:
		default:
			close(h.idle)
		}
	}
	h.mu.Unlock()
}

// Next returns the next events of the stream in order, each exactly once
// (the slice is valid until the next call of Next or Poll):
// first the stored backlog after the subscription's starting point, page by
// page, then live events as they arrive. It blocks until there is at least
// one event, the subscription fails (ErrSlowSubscriber, ErrHubClosed, a
// database error) or ctx ends.
func (s *Subscription) Next(ctx context.Context) ([]*Event, error) {
	return s.next(ctx, true)
}

// Poll is Next without waiting: it returns no events (and no error) when
// nothing is queued. Like Next, it reads the backlog first.
func (s *Subscription) Poll(ctx context.Context) ([]*Event, error) {
	return s.next(ctx, false)
}

func (s *Subscription) next(ctx context.Context, block bool) ([]*Event, error) {
	for {
		s.mu.Lock()
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if !s.live {
			evs, err := s.Backlog(ctx)
			if err != nil || len(evs) > 0 {
				return evs, err
			}
		}
		batch, err := s.wait(ctx, block)
		if err != nil || len(batch) == 0 {
			return nil, err
		}
		if batch[0].Seq == s.last+1 && batch[len(batch)-1].Seq == s.last+int64(len(batch)) {
			// The common case: the next events, in order, nothing to drop.
			s.last = batch[len(batch)-1].Seq
			return batch, nil
		}
		out := make([]*Event, 0, len(batch))
		for _, e := range batch {
			if e.Seq <= s.last {
				continue // already sent as backlog
			}
			if e.Seq > s.last+1 {
				// Events between the backlog read and the point where live
				// reading started: read them from the table.
				gap, err := s.readRange(ctx, s.last, e.Seq)
				if err != nil {
					return nil, err
				}
				out = append(out, gap...)
				if len(gap) > 0 {
					s.last = gap[len(gap)-1].Seq
				}
			}
			out = append(out, e)
			s.last = e.Seq
		}
		if len(out) > 0 {
			return out, nil
		}
	}
}

// Backlog returns the next page of stored events after the subscription's
// position, or none once it has caught up; Next then returns live events.
// Callers may page through the backlog with it before handing the
// subscription to a goroutine that calls Next (which reads the backlog
// itself otherwise).
func (s *Subscription) Backlog(ctx context.Context) ([]*Event, error) {
	if s.live {
		return nil, nil
	}
	evs, err := s.hub.read(ctx, s.stream, s.last, s.hub.opts.PageSize)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		s.live = true
		return nil, nil
	}
	s.last = evs[len(evs)-1].Seq
	// Live events queued while the backlog is read are the same events
	// again: drop those this page delivered, so that they do not count
	// against the queue's limit. A subscriber that joins during a burst
	// and keeps up through its backlog is not behind, and must not be
	// closed as if it were.
	s.mu.Lock()
	i := 0
	for i < len(s.queue) && s.queue[i].Seq <= s.last {
		i++
	}
	if i > 0 {
		n := copy(s.queue, s.queue[i:])
		clear(s.queue[n:])
		s.queue = s.queue[:n]
	}
	s.mu.Unlock()
	return evs, nil
}

// readRange reads the stored events after after and before before.
func (s *Subscription) readRange(ctx context.Context, after, before int64) ([]*Event, error) {
	var out []*Event
	for after < before-1 {
		evs, err := s.hub.read(ctx, s.stream, after, min(s.hub.opts.PageSize, int(before-after-1)))
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return out, fmt.Errorf("events: events %d to %d of %s %d are missing", after+1, before-1, s.stream.Kind, s.stream.ID)
		}
		for _, e := range evs {
			if e.Seq < before {
				out = append(out, e)
				after = e.Seq
			}
		}
		if evs[len(evs)-1].Seq >= before {
			break
		}
	}
	return out, nil
}

// wait takes everything queued, blocking until something is when block is
// set.
func (s *Subscription) wait(ctx context.Context, block bool) ([]*Event, error) {
	for {
		s.mu.Lock()
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return nil, err
		}
		if s.closed {
			s.mu.Unlock()
			return nil, errors.New("events: subscription closed")
		}
		if len(s.queue) > 0 {
			q := s.queue
			clear(s.spare[:cap(s.spare)])
			s.queue, s.spare = s.spare[:0], q
			s.mu.Unlock()
			return q, nil
		}
		s.mu.Unlock()
		if !block {
			return nil, nil
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
