package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/store"
)

// StreamKind says which table a stream's events live in.
type StreamKind uint8

// The kinds of event stream.
const (
	// RunEvents is the events of one run (run_events).
	RunEvents StreamKind = iota + 1
	// EnvironmentEvents is the events of one environment (environment_events).
	EnvironmentEvents
)

func (k StreamKind) String() string {
	switch k {
	case RunEvents:
		return "run"
	case EnvironmentEvents:
		return "environment"
	}
	return "unknown"
}

// Stream names one ordered event stream: a run's or an environment's.
type Stream struct {
	Kind StreamKind
	ID   int64
}

// RunStream is the event stream of the run.
func RunStream(runID int64) Stream { return Stream{Kind: RunEvents, ID: runID} }

// EnvironmentStream is the event stream of the environment.
func EnvironmentStream(environmentID int64) Stream {
	return Stream{Kind: EnvironmentEvents, ID: environmentID}
}

// Event is one stored event of a stream as the hub hands it out. Live events
// are shared by every subscriber of the stream in this process: treat them
// as read-only, and use Memo for anything derived from them (such as the
// encoded websocket frame) so it is computed once, not once per subscriber.
type Event struct {
	Stream Stream
	Seq    int64
	At     time.Time
	// Checkpoint is the checkpoint position a run event concerns (nil for
	// a run-level change and for environment events).
	Checkpoint *int
	// RunID is the run an environment event concerns, if any.
	RunID *int64
	// Payload is the event's JSON as the runs package wrote it.
	Payload json.RawMessage
	// Notified is when this process received the notification that led to
	// reading the event; zero for events read as backlog.
	Notified time.Time

	// The stream's state as stored when the event was read (in the same
	// round trip, after the event), so that a frame is rendered without
	// another: shared by the events of one read. For a run event, the run,
	// its environment and the event's checkpoint (nil for a run-level
	// change); for an environment event, the environment, its newest runs
	// (at most LatestRuns), the run the event concerns (Run, if any) and,
	// for a change of a service's state, the certificate of its domain.
	Run           *store.Run
	Environment   *store.Environment
	CheckpointNow *store.Checkpoint
	LatestRuns    []store.Run
	Certificate   *store.Certificate

	memoOnce sync.Once
	memo     any
}

// Memo returns f's result, calling f only for the first caller of this
// event; later callers (other subscribers of a live event) get the same
// value.
func (e *Event) Memo(f func() any) any {
	e.memoOnce.Do(func() { e.memo = f() })
	return e.memo
}

// LatestRuns is how many of an environment's newest runs its page lists,
// and so how many the hub reads with the environment's events.
const LatestRuns = 5

// Errors that end a subscription. A subscriber that gets one closes its
// client, which reconnects and resumes from its last sequence number.
var (
	// ErrSlowSubscriber ends a subscription whose queue grew past the
	// limit: its client was not keeping up. It is closed rather than
	// allowed to delay the others or to miss events.
	ErrSlowSubscriber = errors.New("runs: subscriber fell behind")
	// ErrHubClosed ends every subscription when the hub shuts down.
	ErrHubClosed = errors.New("runs: event hub closed")
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
}

// Hub fans the events of runs and environments out to the subscribers of
// this process. It holds one dedicated connection (not from the pool) that
// LISTENs on the channel of each stream the process follows
// (store.RunEventsChannel, store.EnvironmentEventsChannel), and on no
// other: PostgreSQL sends it nothing of the runs nobody watches through
// it, and a process that follows nothing does not listen at all. A
// notification carries only "<id>:<seq>"; the hub coalesces the
// notifications of a stream, reads the new events once from the table and
// hands the same events to every subscriber of that stream. Events appended
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
	waiting bool
	wake    func()
	subs    int
	idle    chan struct{} // closed when subs drops to 0 after Close
	// heard counts the notifications received.
	heard atomic.Int64
	// observeRead, when set, is told how long each read after
	// notifications took (see ObserveReads).
	observeRead atomic.Pointer[func(StreamKind, time.Duration)]

	// beforeInit, when set (by tests), runs before a topic's starting
	// point is read; beforeListen before the connection starts listening.
	beforeInit, beforeListen func()
}

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
		return errors.New("runs: WaitIdle before Close")
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
	if stream.Kind == EnvironmentEvents {
		evs, env, latest, err := h.db.EnvironmentEventsWithState(ctx, stream.ID, after, limit, LatestRuns)
		if apperr.CodeOf(err) == apperr.NotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		out := make([]*Event, len(evs))
		for i, e := range evs {
			out[i] = &Event{Stream: stream, Seq: e.Seq, At: e.At, RunID: e.RunID, Payload: e.Payload,
				Run: e.RunNow, Environment: env, LatestRuns: latest, Certificate: e.CertificateNow}
		}
		return out, nil
	}
	evs, run, env, err := h.db.RunEventsWithState(ctx, stream.ID, after, limit)
	if apperr.CodeOf(err) == apperr.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]*Event, len(evs))
	for i, e := range evs {
		out[i] = &Event{Stream: stream, Seq: e.Seq, At: e.At, Checkpoint: e.Checkpoint, Payload: e.Payload,
			Run: run, Environment: env, CheckpointNow: e.CheckpointNow}
	}
	return out, nil
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

// listen keeps the dedicated LISTEN connection up until the hub closes.
func (h *Hub) listen() {
	defer close(h.done)
	failures := 0
	for h.ctx.Err() == nil {
		start := time.Now()
		connected, err := h.listenOnce()
		if h.ctx.Err() != nil {
			return
		}
		if connected && time.Since(start) > 10*time.Second {
			failures = 0 // it was up a while: this is a new outage, retry soon
		}
		failures++
		h.logger.Warn("event hub: LISTEN connection lost; reconnecting", "err", err, "attempt", failures)
		sleep(h.ctx, backoff(failures))
	}
}

// listenOnce connects and listens until the connection fails or the hub
// closes; connected says it got as far as connecting.
func (h *Hub) listenOnce() (connected bool, err error) {
	cfg := h.db.Pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "skali-studio-events"
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	cancel()
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	// The wait is ended by a read deadline (what pgx does itself on a
	// cancelled context), not by passing a context: pgx watches a
	// cancellable context with a goroutine and a callback registered for
	// every call, which would cost every notification more than handling
	// it does. A timeout leaves the connection whole. The deadline is set
	// when the hub stops and, while the loop waits, when a stream is
	// followed or left (see topicsChangedLocked).
	raw := conn.PgConn().Conn()
	wake := func() { _ = raw.SetReadDeadline(time.Now()) }
	stop := context.AfterFunc(h.ctx, wake)
	defer stop()
	h.mu.Lock()
	h.wake = wake
	h.changed = true // a new connection listens to every followed stream
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.wake, h.waiting, h.channels = nil, false, 0
		for _, t := range h.topics {
			t.listened = false // the next connection listens again
		}
		h.mu.Unlock()
	}()
	// channels are the streams this connection LISTENs to.
	channels := map[Stream]bool{}
	for {
		// Clear a deadline first, then look: a wake-up that comes after
		// the look finds the loop waiting (or about to) and ends that wait.
		_ = raw.SetReadDeadline(time.Time{})
		if err := h.ctx.Err(); err != nil {
			return true, err
		}
		listen, leave := h.channelChanges(channels)
		if len(listen) > 0 || len(leave) > 0 {
			if err := h.changeChannels(conn, channels, listen, leave); err != nil {
				return true, err
			}
			continue
		}
		n, err := conn.WaitForNotification(context.Background())
		h.mu.Lock()
		h.waiting = false
		h.mu.Unlock()
		if pgconn.Timeout(err) {
			continue // woken: see above
		}
		if err != nil {
			return true, err
		}
		at := time.Now()
		h.heard.Add(1)
		stream, seq, ok := parseNotification(n.Channel, n.Payload)
		if !ok {
			h.logger.Warn("event hub: malformed notification", "channel", n.Channel)
			continue
		}
		h.notified(stream, seq, at)
	}
}

// maxChannelChanges bounds the LISTEN statements, and the UNLISTEN
// statements, sent in one round trip.
const maxChannelChanges = 256

// channelChanges returns the followed streams whose channel the connection
// does not listen to yet (or was not read again since), and the channels
// it listens to that no followed stream needs any more. With neither, it
// marks the listener as waiting, under the same lock.
func (h *Hub) channelChanges(channels map[Stream]bool) (listen, leave []Stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.changed {
		h.waiting = true // nothing to compare: no scan per notification
		return nil, nil
	}
	for s, t := range h.topics {
		if len(listen) == maxChannelChanges {
			break
		}
		if !t.listened {
			listen = append(listen, s)
		}
	}
	for s := range channels {
		if len(leave) == maxChannelChanges {
			break
		}
		if _, ok := h.topics[s]; !ok {
			leave = append(leave, s)
		}
	}
	h.waiting = len(listen) == 0 && len(leave) == 0
	// Once these are done, another look finds nothing, unless a list was
	// cut short or topics change meanwhile (which sets changed again).
	h.changed = len(listen) == maxChannelChanges || len(leave) == maxChannelChanges
	return listen, leave
}

// changeChannels LISTENs to the channels of listen and UNLISTENs those of
// leave, in one round trip, then reads each stream of listen again from
// its cursor: an event committed before its channel was listened to (and
// after its starting point) was announced to nobody here, and is
// delivered now.
func (h *Hub) changeChannels(conn *pgx.Conn, channels map[Stream]bool, listen, leave []Stream) error {
	var sql strings.Builder
	for _, s := range leave {
		sql.WriteString("UNLISTEN " + pgx.Identifier{s.channel()}.Sanitize() + ";")
	}
	listens := false
	for _, s := range listen {
		if !channels[s] {
			sql.WriteString("LISTEN " + pgx.Identifier{s.channel()}.Sanitize() + ";")
			listens = true
		}
	}
	if sql.Len() > 0 {
		if listens && h.beforeListen != nil {
			h.beforeListen()
		}
		// No arguments: the simple protocol, which takes several
		// statements at once.
		if _, err := conn.Exec(h.ctx, sql.String()); err != nil {
			return err
		}
	}
	for _, s := range leave {
		delete(channels, s)
	}
	for _, s := range listen {
		channels[s] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.channels = len(channels)
	for _, s := range listen {
		if t, ok := h.topics[s]; ok {
			t.listened = true
			t.dirty = true
			h.kickLocked(t)
		}
	}
	return nil
}

// topicsChangedLocked tells the listener that a stream was followed or
// left, ending its wait, so that it listens to the stream's channel or
// leaves it.
func (h *Hub) topicsChangedLocked() {
	h.changed = true
	if h.waiting && h.wake != nil {
		h.waiting = false
		h.wake()
	}
}

// channel is the PostgreSQL channel the stream's events are announced on.
func (s Stream) channel() string {
	if s.Kind == EnvironmentEvents {
		return store.EnvironmentEventsChannel(s.ID)
	}
	return store.RunEventsChannel(s.ID)
}

// parseNotification reads a notification of channel "<prefix><id>" with
// payload "<id>:<seq>".
func parseNotification(channel, payload string) (Stream, int64, bool) {
	var kind StreamKind
	var idText string
	if rest, ok := strings.CutPrefix(channel, store.RunEventsChannelPrefix); ok {
		kind, idText = RunEvents, rest
	} else if rest, ok := strings.CutPrefix(channel, store.EnvironmentEventsChannelPrefix); ok {
		kind, idText = EnvironmentEvents, rest
	} else {
		return Stream{}, 0, false
	}
	payloadID, seqText, ok := strings.Cut(payload, ":")
	if !ok || payloadID != idText {
		return Stream{}, 0, false
	}
	id, err1 := strconv.ParseInt(idText, 10, 64)
	seq, err2 := strconv.ParseInt(seqText, 10, 64)
	if err1 != nil || err2 != nil {
		return Stream{}, 0, false
	}
	return Stream{Kind: kind, ID: id}, seq, true
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

// Subscription is one subscriber's view of a stream. Only one goroutine may
// call Next; Close may be called from any.
type Subscription struct {
	hub    *Hub
	stream Stream
	// last is the sequence number of the newest event Next returned.
	last int64
	live bool

	mu     sync.Mutex
	queue  []*Event
	err    error
	closed bool
	wake   chan struct{}
	notify func()
}

// SetNotify makes the hub call f whenever events are queued for the
// subscription or it fails, instead of waking a blocked Next: a subscriber
// can then run a goroutine only while there is something to write, and
// call Poll there (not Next, which would wait for a wake-up that queued
// events no longer send). f must not block (it runs under the hub's lock).
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

// push queues live events; it reports false when the queue would grow past
// limit (the caller then fails the subscription). Called with hub.mu held.
func (s *Subscription) push(evs []*Event, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.err != nil {
		return true
	}
	if len(s.queue)+len(evs) > limit {
		return false
	}
	s.queue = append(s.queue, evs...)
	if s.notify != nil {
		s.notify()
		return true
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
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

// Next returns the next events of the stream in order, each exactly once:
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
			return out, fmt.Errorf("runs: events %d to %d of %s %d are missing", after+1, before-1, s.stream.Kind, s.stream.ID)
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
			return nil, errors.New("runs: subscription closed")
		}
		if len(s.queue) > 0 {
			q := s.queue
			s.queue = nil
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
