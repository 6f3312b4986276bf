package stream

import (
	"context"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/web/stream/sockwrite"
)

// Writing frames. An event reaches every watcher of a run at once, so
// what a frame costs is multiplied by the watchers: the frame's bytes
// (header included) are built once per event and shared. A stream of a
// run a few watch is written by the goroutine that queued its events
// (kick); otherwise it is handed to a small pool of writers (one goroutine
// per core, kept while there is work) instead of starting a goroutine of
// its own. Each writes all of a stream's queued frames at once, without
// blocking; a pool writer sends a round of streams with one
// sockwrite.Writer call (one io_uring submission where the kernel allows
// it, one non-blocking send(2) per stream otherwise). A socket that cannot take its frames at
// once (a slow watcher) gets the rest written by a goroutine of its own,
// with the write deadline, so that it never holds up the others.
// Everything that may wait (an access check the cache cannot answer, a
// stream ending) goes to that goroutine too.

// writerIdle is how long a pool writer waits for work before it ends.
const writerIdle = time.Second

// maxWriteBatch bounds the bytes one write of queued frames sends.
const maxWriteBatch = 256 << 10

// maxArena bounds the memory a pool writer keeps for the frames of a
// round of streams with several events queued.
const maxArena = 4 << 20

// frameWriters is the pool.
type frameWriters struct {
	queue   chan *liveStream
	running atomic.Int32
	max     int32
}

func newFrameWriters() *frameWriters {
	return &frameWriters{queue: make(chan *liveStream, 1<<14), max: int32(max(2, runtime.GOMAXPROCS(0)))}
}

// schedule hands st, whose writing flag the caller set, to the pool; it
// reports false when the pool's queue is full (the caller then runs the
// stream's own writer).
func (w *frameWriters) schedule(st *liveStream) bool {
	select {
	case w.queue <- st:
	default:
		return false
	}
	for {
		n := w.running.Load()
		if n >= w.max {
			return true
		}
		if w.running.CompareAndSwap(n, n+1) {
			go w.run()
			return true
		}
	}
}

// poolWriter is one pool writer's own state.
type poolWriter struct {
	// scratch is reused for the frames of a stream with several queued.
	scratch []byte
	// streams counts the streams handled since the writer last yielded.
	streams int
	// run and env count the frames written and not yet added to the
	// delivered counters (added when the queue runs dry, or every
	// flushFrames): a counter shared by the writers, updated per frame,
	// would move its cache line between the cores for every watcher.
	run, env int
	// metrics is where they are counted (every stream's, shared).
	metrics *Metrics
	// refresh holds the access checks to refresh in the background once
	// the frames in hand are written (see checkAccessCached); flush
	// starts them.
	refresh []func()
	// sock sends a round of streams' frames (writeBatch); pending, reqs
	// and items are its buffers, and arena holds the frames of the round's
	// streams with several events queued.
	sock    sockwrite.Writer
	pending []*liveStream
	reqs    []sendReq
	items   []sockwrite.Item
	arena   []byte
}

// flushFrames bounds the frames a pool writer counts before adding them to
// the delivered counters.
const flushFrames = 256

// yieldStreams is how many streams a pool writer handles between yields
// to the scheduler: a writer that runs for 10 ms without one is preempted
// by a signal, and the runtime's monitor thread, finding work to preempt,
// keeps waking every 20 µs.
const yieldStreams = 64

func (w *frameWriters) run() {
	idle := time.NewTimer(writerIdle)
	defer idle.Stop()
	pw := poolWriter{sock: sockwrite.New()}
	defer pw.sock.Close()
	for {
		select {
		case st := <-w.queue:
			pw.writeBatch(w, st)
			continue
		default:
		}
		pw.flush()
		idle.Reset(writerIdle)
		select {
		case st := <-w.queue:
			pw.writeBatch(w, st)
		case <-idle.C:
			w.running.Add(-1)
			if len(w.queue) == 0 {
				return
			}
			// Work queued while this writer was ending may have found
			// the pool full and started none: stay, unless another
			// writer started meanwhile.
			if w.running.Add(1) > w.max {
				w.running.Add(-1)
				return
			}
		}
		if cap(pw.scratch) > maxWriteBatch {
			pw.scratch = nil
		}
	}
}

// startRefreshes starts the access refreshes that fell due (see
// checkAccessCached): when the queue runs dry (flush), and at each yield of
// a writer that the queue keeps busy.
func (pw *poolWriter) startRefreshes() {
	for i, f := range pw.refresh {
		go f()
		pw.refresh[i] = nil
	}
	pw.refresh = pw.refresh[:0]
}

// delivered counts the frames of evs written to st and records how long
// after their notification.
func (pw *poolWriter) delivered(st *liveStream, evs []*events.Event) {
	m := st.s.metrics
	if m == nil {
		return
	}
	if st.kind == "run" {
		pw.run += len(evs)
	} else {
		pw.env += len(evs)
	}
	var now time.Time
	for _, e := range evs {
		if !e.Notified.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			m.deliveryDelay.Observe(now.Sub(e.Notified).Seconds())
		}
	}
	pw.metrics = m
	if pw.run+pw.env >= flushFrames {
		pw.flush()
	}
}

// flush adds the frames counted to the delivered counters and starts the
// access refreshes due.
func (pw *poolWriter) flush() {
	pw.startRefreshes()
	m := pw.metrics
	if m == nil || (pw.run == 0 && pw.env == 0) {
		return
	}
	if pw.run > 0 {
		m.deliveredRun.Add(float64(pw.run))
	}
	if pw.env > 0 {
		m.delivered.WithLabelValues("environment").Add(float64(pw.env))
	}
	pw.run, pw.env = 0, 0
}

// writeQueued writes the stream's queued frames without ever waiting, as
// long as it can; what might wait goes to the stream's own goroutine
// (drain, finishWrite), which keeps the writing flag.
func (st *liveStream) writeQueued(pw *poolWriter) {
	for {
		evs, buf, ok := st.prepare(pw, false)
		if !ok {
			return
		}
		n, err := st.writeNow(buf)
		if !st.written(pw, evs, buf, n, err) {
			return
		}
	}
}

// prepare takes the stream's queued events and, when they are to be
// written now, returns their frames with wmu locked (ok). Otherwise the
// stream has nothing to write (its writing flag is cleared) or was handed
// to a goroutine of its own. Several events' frames are built in
// pw.scratch (valid until the next prepare), or with batch set appended
// to pw.arena (valid until the batch's round ends).
func (st *liveStream) prepare(pw *poolWriter, batch bool) (evs []*events.Event, buf []byte, ok bool) {
	for {
		if st.hasCause.Load() {
			go st.drain(nil)
			return nil, nil, false
		}
		evs, err := st.sub.Poll(context.Background())
		if err != nil {
			go st.stop(err)
			return nil, nil, false
		}
		if len(evs) == 0 {
			st.writing.Store(false)
			// Something queued between Poll and Store found writing set
			// and scheduled nothing: look again.
			if (st.sub.Pending() || st.ended() != nil) && st.writing.CompareAndSwap(false, true) {
				continue
			}
			return nil, nil, false
		}
		if st.accessDue(evs) {
			answered, err := st.checkAccessCached(pw)
			if !answered {
				go st.drain(evs)
				return nil, nil, false
			}
			if err != nil {
				go st.stop(err)
				return nil, nil, false
			}
		}
		switch {
		case len(evs) == 1:
			buf = st.s.frame(evs[0]) // shared by every watcher
		case batch:
			start := len(pw.arena)
			pw.arena = st.frames(evs, pw.arena)
			buf = pw.arena[start:len(pw.arena):len(pw.arena)]
		default:
			buf = st.frames(evs, pw.scratch[:0])
			pw.scratch = buf
		}
		if !st.wmu.TryLock() {
			// A control frame is being written: do not wait for it here.
			go st.finishWrite(append([]byte(nil), buf...), evs, false)
			return nil, nil, false
		}
		return evs, buf, true
	}
}

// written finishes a write of the frames of evs (buf, with wmu held) of
// which n bytes went out, or err: it lets go of wmu, or hands the rest to
// the stream's own goroutine (which keeps wmu). It reports whether the
// stream is still the caller's to write (more may be queued).
func (st *liveStream) written(pw *poolWriter, evs []*events.Event, buf []byte, n int, err error) bool {
	if err != nil {
		st.wmu.Unlock()
		st.log(slog.LevelDebug, "event stream write failed", "err", err)
		go st.stop(errPeerGone)
		return false
	}
	if n < len(buf) {
		go st.finishWrite(append([]byte(nil), buf[n:]...), evs, true)
		return false
	}
	st.wmu.Unlock()
	pw.delivered(st, evs)
	return true
}

// sendReq is one stream's write in a pool writer's round: its events; its
// frames and what became of them are the round's sockwrite.Item at the
// same index.
type sendReq struct {
	st  *liveStream
	evs []*events.Event
}

// writeBatch writes the queued frames of streams, and of those queued
// meanwhile (at most sockwrite.MaxBatch at a time), with one call of the
// writer's sockwrite.Writer per round.
func (pw *poolWriter) writeBatch(w *frameWriters, first *liveStream) {
	pending := append(pw.pending[:0], first)
	for len(pending) < sockwrite.MaxBatch {
		select {
		case st := <-w.queue:
			pending = append(pending, st)
			continue
		default:
		}
		break
	}
	for len(pending) > 0 {
		if cap(pw.arena) > maxArena {
			pw.arena = nil
		}
		pw.arena = pw.arena[:0] // the last round's sends are done
		reqs, items := pw.reqs[:0], pw.items[:0]
		for _, st := range pending {
			evs, buf, ok := st.prepare(pw, true)
			if !ok {
				continue
			}
			if st.fd < 0 || st.fdClosed {
				// Nothing to send on here: the stream's goroutine writes.
				st.written(pw, evs, buf, 0, nil)
				continue
			}
			reqs = append(reqs, sendReq{st: st, evs: evs})
			items = append(items, sockwrite.Item{FD: st.fd, Buf: buf})
		}
		pending = pending[:0]
		if len(items) > 0 {
			pw.sock.Write(items)
		}
		for i, r := range reqs {
			if r.st.written(pw, r.evs, items[i].Buf, items[i].N, items[i].Err) {
				pending = append(pending, r.st)
			}
		}
		pw.startRefreshes() // the round's frames are out
		pw.streams += len(reqs)
		clear(reqs)
		clear(items)
		pw.reqs, pw.items = reqs[:0], items[:0]
		if pw.streams >= yieldStreams {
			pw.streams = 0
			runtime.Gosched()
		}
	}
	clear(pending)
	pw.pending = pending[:0]
}

// accessDue reports whether access must be checked before evs go out: the
// last check is older than accessCacheTTL. The time is when the newest of
// evs was announced (taken once per event, not once per watcher), or now
// for events read as backlog.
func (st *liveStream) accessDue(evs []*events.Event) bool {
	now := evs[len(evs)-1].Notified
	if now.IsZero() {
		now = time.Now()
	}
	return now.UnixNano()-st.lastChecked.Load() > int64(accessCacheTTL)
}

// frames appends the frames of evs to buf; a single event's frame is
// returned as it is, shared, not copied.
func (st *liveStream) frames(evs []*events.Event, buf []byte) []byte {
	if len(evs) == 1 {
		return st.s.frame(evs[0])
	}
	for _, e := range evs {
		buf = append(buf, st.s.frame(e)...)
	}
	return buf
}

// writeNow writes what the socket takes at once, without waiting; a
// connection that is not a plain socket takes nothing this way. Called
// with wmu held.
//
// It sends on the descriptor itself (sockwrite.SendNow), not through the runtime's
// poller: the socket never blocks, so the call need not release its P to
// the scheduler nor take the poller's reference; wmu and fdClosed keep the
// descriptor from being closed meanwhile. A call per frame and watcher is
// where most of a stream's CPU goes; the runtime's bookkeeping around it
// (and the monitor thread it keeps awake) cost about a quarter more.
func (st *liveStream) writeNow(buf []byte) (int, error) {
	if st.fd < 0 || st.fdClosed || len(buf) == 0 {
		return 0, nil
	}
	return sockwrite.SendNow(st.fd, buf)
}

// finishWrite writes the rest of a batch the pool could not, waiting up to
// streamWriteWait, then goes on as the stream's writer; locked says wmu is
// held already.
func (st *liveStream) finishWrite(rest []byte, evs []*events.Event, locked bool) {
	if !locked {
		st.wmu.Lock()
	}
	err := st.writeWaiting(rest)
	st.wmu.Unlock()
	if err != nil {
		st.log(slog.LevelDebug, "event stream write failed", "err", err)
		st.stop(errPeerGone)
		return
	}
	st.delivered(evs)
	st.drain(nil)
}

// writeWaiting writes buf, waiting up to streamWriteWait. Called with wmu
// held.
func (st *liveStream) writeWaiting(buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	nc := st.conn.NetConn()
	_ = nc.SetWriteDeadline(time.Now().Add(streamWriteWait.get()))
	_, err := nc.Write(buf)
	// No deadline left behind: writeNow would meet it once passed.
	_ = nc.SetWriteDeadline(time.Time{})
	return err
}

// write sends the frames of evs, waiting as long as streamWriteWait for
// each batch (the backlog, and the stream's own writer).
func (st *liveStream) write(evs []*events.Event) error {
	for len(evs) > 0 {
		n, size := 0, 0
		for n < len(evs) && (n == 0 || size < maxWriteBatch) {
			size += len(st.s.frame(evs[n]))
			n++
		}
		buf := st.frames(evs[:n], make([]byte, 0, size))
		st.wmu.Lock()
		err := st.writeWaiting(buf)
		st.wmu.Unlock()
		if err != nil {
			st.log(slog.LevelDebug, "event stream write failed", "err", err)
			return errPeerGone
		}
		st.delivered(evs[:n])
		evs = evs[n:]
	}
	return nil
}

// control writes a control frame (ping, pong, close) between frames.
func (st *liveStream) control(kind int, data []byte, deadline time.Time) error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	err := st.conn.WriteControl(kind, data, deadline)
	// No deadline left behind: writeNow would meet it once passed.
	_ = st.conn.NetConn().SetWriteDeadline(time.Time{})
	return err
}

// delivered counts the frames written.
func (st *liveStream) delivered(evs []*events.Event) {
	st.s.metrics.eventsDelivered(st.kind, evs)
}
