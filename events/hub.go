package events

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/store"
)

// Errors that end a subscription. A subscriber that gets one closes its
// client, which reconnects and resumes from its last sequence number.
var (
	// ErrSlowSubscriber ends a subscription whose queue grew past the
	// limit: its client was not keeping up. It is closed rather than
	// allowed to delay the others or to miss events.
	ErrSlowSubscriber = errors.New("events: subscriber fell behind")
	// ErrHubClosed ends every subscription when the hub shuts down.
	ErrHubClosed = errors.New("events: event hub closed")
)

// HubOptions tune a Hub; zero fields take the defaults.
type HubOptions struct {
	// QueueLimit is how many events may wait for one subscriber before it
	// is closed as too slow (default 1024).
	QueueLimit int
	// PageSize is how many events one read of the table returns at most
	// (default 500).
	PageSize int
	// Logger receives connection problems (default slog.Default()).
	Logger *slog.Logger
	// LatestRuns is how many of an environment's newest runs are read with
	// its events (Event.LatestRuns), for the pages that list them; 0 reads
	// none.
	LatestRuns int
}

// Hub fans the events of runs and environments out to the subscribers of
// this process. It holds one dedicated connection (not from the pool) that
// LISTENs on the channel of each stream the process follows
// (store.RunEventsChannel, store.EnvironmentEventsChannel), and on no
// other: PostgreSQL sends it nothing of the runs nobody watches through
// it, and a process that follows nothing does not listen at all. A
// notification of a run's event carries the event and the state its page
// renders from (store.RunNotice): the hub hands the next event of a stream
// to every subscriber without a read. A notification that carries only
// "<id>:<seq>" (an environment's event, or a run's too large to carry), one
// that skips a sequence number, or one that arrives while a read is due or
// under way makes the hub read instead: it coalesces such notifications of
// a stream, reads the new events once from the table and hands the same
// events to every subscriber of that stream. Events appended
// by any process on the database reach every hub. When the connection
// drops, the hub reconnects and reads every followed stream again from its
// last delivered sequence number, so nothing is missed.
type Hub struct {
	db     *store.DB
	opts   HubOptions
	logger *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	topics map[Stream]*topic
	closed bool
	// channels is how many channels the connection LISTENs to; waiting
	// says the listener waits for a notification (with no channel to
	// listen to or leave), and wake ends that wait.
	channels int
	// changed says topics were added or removed since the listener last
	// compared them with its channels (or that it has more to change).
	changed bool
	// followRetryDue says the runs the listener could not mark as
	// followed are to be tried again (set by its retry timer).
	followRetryDue bool
	waiting        bool
	wake           func()
	subs           int
	idle           chan struct{} // closed when subs drops to 0 after Close
	// heard counts the notifications received.
	heard atomic.Int64
	// observeRead, when set, is told how long each read after
	// notifications took (see ObserveReads).
	observeRead atomic.Pointer[func(StreamKind, time.Duration)]

	// beforeInit, when set (by tests), runs before a topic's starting
	// point is read; beforeListen before the connection starts listening.
	beforeInit, beforeListen func()
}

// NewHub starts a hub on db. Close it to stop listening and end every
// subscription.
func NewHub(db *store.DB, opts HubOptions) *Hub {
	if opts.QueueLimit <= 0 {
		opts.QueueLimit = 1024
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 500
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{
		db: db, opts: opts, logger: opts.Logger,
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		topics: map[Stream]*topic{},
	}
	go h.listen()
	return h
}

// Listening reports whether the hub listens for notifications: it does
// while it follows a stream and its connection is up.
func (h *Hub) Listening() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.channels > 0
}

// Notifications returns how many notifications the hub has received since
// it started: one per announced event of a stream it follows (it hears
// nothing of the others), fewer reads when they are coalesced.
func (h *Hub) Notifications() int64 { return h.heard.Load() }

// ObserveReads has f told, for every read of a followed stream's new
// events after notifications (one per stream and read, whatever the
// number of subscribers; backlog reads are not counted), how long it took:
// the database's share of the time from notification to delivery.
func (h *Hub) ObserveReads(f func(StreamKind, time.Duration)) {
	h.observeRead.Store(&f)
}

// Subscribers returns how many subscriptions are open.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.subs
}

// Close stops listening and ends every subscription with ErrHubClosed.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	h.idle = make(chan struct{})
	if h.subs == 0 {
		close(h.idle)
	}
	var subs []*Subscription
	for _, t := range h.topics {
		for s := range t.subs {
			subs = append(subs, s)
		}
	}
	h.topics = map[Stream]*topic{}
	h.mu.Unlock()
	for _, s := range subs {
		s.fail(ErrHubClosed)
	}
	h.cancel()
	<-h.done
}

// WaitIdle waits, after Close, until every subscription has been closed by
// its owner (its client told "going away"), or ctx ends.
func (h *Hub) WaitIdle(ctx context.Context) error {
	h.mu.Lock()
	idle := h.idle
	h.mu.Unlock()
	if idle == nil {
		return errors.New("events: WaitIdle before Close")
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Subscribe follows stream from the event after sequence number after:
// Next returns the stored backlog first, then live events, each exactly
// once and in order. The subscription is registered before the backlog is
// read, so an event committed meanwhile is either in the backlog or arrives
// live (and is then dropped as already sent): no gap, no duplicate.
func (h *Hub) Subscribe(ctx context.Context, stream Stream, after int64) (*Subscription, error) {
	if after < 0 {
		after = 0
	}
	s := &Subscription{hub: h, stream: stream, last: after, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrHubClosed
	}
	t, ok := h.topics[stream]
	if !ok {
		t = &topic{stream: stream, subs: map[*Subscription]struct{}{}, readyCh: make(chan struct{})}
		h.topics[stream] = t
		h.topicsChangedLocked()
	}
	t.subs[s] = struct{}{}
	h.subs++
	h.mu.Unlock()
	if !ok {
		// The first subscriber of a stream sets where live reading starts:
		// the newest committed event. Everything up to it is in the table
		// for every subscriber's backlog; everything after it is either
		// announced later or read when the connection comes back.
		if h.beforeInit != nil {
			h.beforeInit()
		}
		last, err := h.lastSeq(ctx, stream)
		if err != nil {
			h.failTopic(t, err)
			close(t.readyCh)
			s.Close()
			return nil, err
		}
		h.mu.Lock()
		t.cursor, t.ready = last, true
		h.kickLocked(t)
		h.mu.Unlock()
		close(t.readyCh)
		return s, nil
	}
	// No subscriber may read its backlog before live reading has a
	// starting point: events committed between its backlog read and that
	// point would be in neither.
	select {
	case <-t.readyCh:
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
	// Should initialising have failed, Next reports it.
	return s, nil
}

func (h *Hub) lastSeq(ctx context.Context, stream Stream) (int64, error) {
	if stream.Kind == EnvironmentEvents {
		return h.db.LastEnvironmentEventSeq(ctx, stream.ID)
	}
	return h.db.LastRunEventSeq(ctx, stream.ID)
}

// read returns up to limit stored events of stream after sequence number
// after, with the stream's state read in the same round trip (see Event).
// A stream whose run or environment is gone has no events.
func (h *Hub) read(ctx context.Context, stream Stream, after int64, limit int) ([]*Event, error) {
	evs, _, err := h.readState(ctx, stream, after, limit)
	return evs, err
}

// readState is read that also returns, for a run's stream, the run and its
// environment as read after the events (nil for an environment's stream,
// or a run that is gone): what a topic keeps to render the events that
// notifications carry.
func (h *Hub) readState(ctx context.Context, stream Stream, after int64, limit int) ([]*Event, *runState, error) {
	if stream.Kind == EnvironmentEvents {
		evs, env, latest, err := h.db.EnvironmentEventsWithState(ctx, stream.ID, after, limit, h.opts.LatestRuns)
		if apperr.CodeOf(err) == apperr.NotFound {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		out := make([]*Event, len(evs))
		for i, e := range evs {
			out[i] = &Event{Stream: stream, Seq: e.Seq, At: e.At, RunID: e.RunID, Payload: e.Payload,
				Run: e.RunNow, Environment: env, LatestRuns: latest, Certificate: e.CertificateNow}
		}
		return out, nil, nil
	}
	evs, run, env, err := h.db.RunEventsWithState(ctx, stream.ID, after, limit)
	if apperr.CodeOf(err) == apperr.NotFound {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	out := make([]*Event, len(evs))
	for i, e := range evs {
		out[i] = &Event{Stream: stream, Seq: e.Seq, At: e.At, Checkpoint: e.Checkpoint, Payload: e.Payload,
			Run: run, Environment: env, CheckpointNow: e.CheckpointNow}
	}
	return out, &runState{run: run, env: env}, nil
}

// backoff is the wait before retry number n: doubling from 100 ms up to
// 5 s, with jitter so that replicas do not retry in step.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond << min(n-1, 6)
	d = min(d, 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
