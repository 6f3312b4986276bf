package stream

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/events"
)

// An open stream: its writer, which runs only while events wait, its
// timer (pings, access re-checks) and how it ends.

var (
	errAccessRemoved  = errors.New("stream: access to the stream was removed")
	errPeerGone       = errors.New("stream: the client went away")
	errClientProtocol = errors.New("stream: the client sent a frame it should not")
)

// liveStream is one open websocket following one stream. It keeps only
// what it needs (ids, not the user or the request), since an idle
// installation may hold many thousands.
type liveStream struct {
	s          *Server
	conn       *websocket.Conn
	sub        *events.Subscription
	token      string
	userID     int64
	signedInAt time.Time
	envID      int64
	streamID   int64
	kind       string
	requestID  string

	// fd is the socket's descriptor, for writes that must not wait (-1
	// when the connection is not a plain socket); wmu orders every write
	// to it, and fdClosed (under wmu) says the connection was closed (by
	// stop, under wmu): the descriptor's number may belong to another
	// file since.
	fd       int
	fdClosed bool
	wmu      sync.Mutex

	// writing says a writer runs: a pool writer or the stream's own
	// goroutine (see kick).
	writing atomic.Bool
	stopped atomic.Bool
	// lastChecked is when access was last confirmed (Unix nanoseconds).
	lastChecked atomic.Int64
	// lastHeard is when the client last sent anything (a pong, mostly).
	lastHeard atomic.Int64
	timer     *time.Timer

	mu sync.Mutex
	// cause is why the stream must end, set by the reader or the timer;
	// hasCause says it is set, for the writers' look before every batch
	// without the lock.
	cause    error
	hasCause atomic.Bool
}

func (st *liveStream) log(level slog.Level, msg string, args ...any) {
	st.s.logger.Log(context.Background(), level, msg, append([]any{
		"request_id", st.requestID, "user_id", st.userID, "stream", st.kind, "id", st.streamID}, args...)...)
}

// start begins the stream: a reader goroutine handles the client's pongs
// and close; one timer (no goroutine while it waits) pings and re-checks
// access.
func (st *liveStream) start() {
	st.lastChecked.Store(time.Now().UnixNano())
	st.lastHeard.Store(time.Now().UnixNano())
	st.s.metrics.streamOpened(st.kind)
	st.fd = -1
	if sc, ok := st.conn.NetConn().(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) { st.fd = int(fd) })
		}
	}
	go st.read()
	st.mu.Lock()
	st.timer = time.AfterFunc(jitter(streamPing.get()), st.tick)
	st.mu.Unlock()
}

// end records why the stream must end and wakes the writer to end it.
func (st *liveStream) end(err error) {
	st.mu.Lock()
	if st.cause == nil {
		st.cause = err
		st.hasCause.Store(true)
	}
	st.mu.Unlock()
	st.kick()
}

func (st *liveStream) ended() error {
	if !st.hasCause.Load() {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.cause
}

// stop ends the stream once: it tells the client why (see finish),
// releases the subscription and closes the connection.
func (st *liveStream) stop(err error) {
	if !st.stopped.CompareAndSwap(false, true) {
		return
	}
	st.mu.Lock()
	st.timer.Stop()
	st.mu.Unlock()
	st.finish(err)
	st.sub.Close()
	st.wmu.Lock()
	st.fdClosed = true
	st.conn.Close()
	st.wmu.Unlock()
	st.s.metrics.streamClosed(st.kind)
}

// catchUp writes the stored backlog.
func (st *liveStream) catchUp(ctx context.Context) error {
	for {
		evs, err := st.sub.Backlog(ctx)
		if err != nil || len(evs) == 0 {
			return err
		}
		if err := st.write(evs); err != nil {
			return err
		}
	}
}

// kick runs the writer unless it runs already: it hands the stream to the
// pool of writers (write.go), or starts its own goroutine when the pool's
// queue is full. The hub calls it when events are queued (and when the
// subscription fails); end calls it too. The writer is the only one that
// uses the subscription.
func (st *liveStream) kick() {
	if !st.stopped.Load() && st.writing.CompareAndSwap(false, true) {
		if st.sub.Fanout() <= inlineFanout {
			// A few watchers of the stream: write here, without a switch
			// to another goroutine (the frame is on its way as soon as
			// it is rendered). writeQueued never waits.
			var pw poolWriter
			st.writeQueued(&pw)
			pw.flush()
			return
		}
		if !st.s.writers.schedule(st) {
			go st.drain(nil)
		}
	}
}

// inlineFanout is the most subscriptions a stream's topic may have for
// its frames to be written by the goroutine that queued them (kick).
const inlineFanout = 4

// drain is the stream's own writer, for what may wait: it writes evs (what
// a pool writer took from the queue and handed over, if anything) and what
// is queued, then returns (the goroutine ends).
func (st *liveStream) drain(evs []*events.Event) {
	for {
		if err := st.ended(); err != nil {
			st.stop(err)
			return
		}
		if len(evs) == 0 {
			var err error
			if evs, err = st.sub.Poll(context.Background()); err != nil {
				st.stop(err)
				return
			}
		}
		if len(evs) == 0 {
			st.writing.Store(false)
			// Something queued between Poll and Store found writing set
			// and started nothing: look again.
			if (st.sub.Pending() || st.ended() != nil) && st.writing.CompareAndSwap(false, true) {
				continue
			}
			return
		}
		if time.Since(time.Unix(0, st.lastChecked.Load())) > accessCacheTTL {
			if err := st.checkAccess(false); err != nil {
				st.stop(err)
				return
			}
		}
		if err := st.write(evs); err != nil {
			st.stop(err)
			return
		}
		evs = nil
	}
}

// finish tells the client with a close code what to do next.
func (st *liveStream) finish(err error) {
	code, reason := websocket.CloseInternalServerErr, "internal error"
	switch {
	case errors.Is(err, events.ErrHubClosed):
		code, reason = websocket.CloseGoingAway, "server shutting down"
	case errors.Is(err, events.ErrSlowSubscriber):
		code, reason = websocket.CloseTryAgainLater, "fell behind; resume"
		st.s.metrics.subscriberTooSlow(st.kind)
		st.log(slog.LevelInfo, "event stream closed: client fell behind")
	case errors.Is(err, errAccessRemoved):
		code, reason = closeAccessRemoved, "access removed"
		st.log(slog.LevelInfo, "event stream closed: access removed")
	case errors.Is(err, errPeerGone):
		return // nothing to tell a peer that is gone
	case errors.Is(err, errClientProtocol):
		code, reason = websocket.CloseProtocolError, "unexpected frame"
	default:
		st.log(slog.LevelWarn, "event stream failed", "err", err)
	}
	_ = st.control(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
}

// tick pings the client, re-checks access and schedules the next tick.
func (st *liveStream) tick() {
	if st.stopped.Load() {
		return
	}
	if time.Since(time.Unix(0, st.lastHeard.Load())) > streamPongWait.get() {
		st.end(errPeerGone)
		return
	}
	if err := st.control(websocket.PingMessage, nil, time.Now().Add(streamWriteWait.get())); err != nil {
		st.end(errPeerGone)
		return
	}
	if time.Since(time.Unix(0, st.lastChecked.Load())) >= streamRecheck-streamRecheck/5 {
		if err := st.checkAccess(true); err != nil {
			st.end(err)
			return
		}
	}
	st.mu.Lock()
	if !st.stopped.Load() {
		st.timer.Reset(jitter(streamPing.get()))
	}
	st.mu.Unlock()
}

// jitter spreads periodic work of many streams: d ± 10 %.
func jitter(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}
