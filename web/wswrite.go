package web

import (
	"context"
	"log/slog"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/skali-dev/studio/events"
)

// Writing frames. An event reaches every watcher of a run at once, so
// what a frame costs is multiplied by the watchers: the frame's bytes
// (header included) are built once per event and shared; a stream with
// events queued is handed to a small pool of writers (one goroutine per
// core, kept while there is work) instead of starting a goroutine of its
// own; the pool writes all of a stream's queued frames in one system call,
// without blocking: a socket that cannot take them all at once (a slow
// watcher) gets the rest written by a goroutine of its own, with the write
// deadline, so that it never holds up the others. Everything that may
// wait (an access check due, a stream ending) goes to that goroutine too.

// writerIdle is how long a pool writer waits for work before it ends.
const writerIdle = time.Second

// maxWriteBatch bounds the bytes one write of queued frames sends.
const maxWriteBatch = 256 << 10

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

func (w *frameWriters) run() {
	idle := time.NewTimer(writerIdle)
	defer idle.Stop()
	var scratch []byte
	for {
		select {
		case st := <-w.queue:
			scratch = st.writeQueued(scratch)
			continue
		default:
		}
		idle.Reset(writerIdle)
		select {
		case st := <-w.queue:
			scratch = st.writeQueued(scratch)
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
		if cap(scratch) > maxWriteBatch {
			scratch = nil
		}
	}
}

// writeQueued writes the stream's queued frames without ever waiting, as
// long as it can; what might wait goes to the stream's own goroutine
// (drain, finishWrite), which keeps the writing flag. It returns the
// scratch buffer for the pool writer's next stream.
func (st *liveStream) writeQueued(scratch []byte) []byte {
	for {
		if st.ended() != nil || time.Since(time.Unix(0, st.lastChecked.Load())) > accessCacheTTL {
			go st.drain()
			return scratch
		}
		evs, err := st.sub.Poll(context.Background())
		if err != nil {
			go st.stop(err)
			return scratch
		}
		if len(evs) == 0 {
			st.writing.Store(false)
			// Something queued between Poll and Store found writing set
			// and scheduled nothing: look again.
			if (st.sub.Pending() || st.ended() != nil) && st.writing.CompareAndSwap(false, true) {
				continue
			}
			return scratch
		}
		buf := st.frames(evs, scratch[:0])
		if len(evs) > 1 {
			scratch = buf
		}
		if !st.wmu.TryLock() {
			// A control frame is being written: do not wait for it here.
			go st.finishWrite(append([]byte(nil), buf...), evs, false)
			return scratch
		}
		n, err := st.writeNow(buf)
		if err != nil {
			st.wmu.Unlock()
			st.log(slog.LevelDebug, "event stream write failed", "err", err)
			go st.stop(errPeerGone)
			return scratch
		}
		if n < len(buf) {
			go st.finishWrite(append([]byte(nil), buf[n:]...), evs, true)
			return scratch
		}
		st.wmu.Unlock()
		st.delivered(evs)
	}
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
func (st *liveStream) writeNow(buf []byte) (int, error) {
	if st.raw == nil || len(buf) == 0 {
		return 0, nil
	}
	// The callback and its state live in the stream (rawWrite, set once):
	// a closure here would be allocated for every frame.
	st.wbuf, st.wn, st.werr = buf, 0, nil
	err := st.raw.Write(st.rawWrite)
	n, werr := st.wn, st.werr
	st.wbuf = nil
	if err == nil {
		err = werr
	}
	return n, err
}

// writeFD is writeNow's callback: it writes wbuf from wn on, and returns
// as soon as the socket takes no more (EAGAIN) instead of waiting.
func (st *liveStream) writeFD(fd uintptr) bool {
	for st.wn < len(st.wbuf) {
		m, err := syscall.Write(int(fd), st.wbuf[st.wn:])
		if m > 0 {
			st.wn += m
		}
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return true
		case err != nil:
			st.werr = err
			return true
		case m <= 0:
			return true
		}
	}
	return true
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
	st.drain()
}

// writeWaiting writes buf, waiting up to streamWriteWait. Called with wmu
// held.
func (st *liveStream) writeWaiting(buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	nc := st.conn.NetConn()
	_ = nc.SetWriteDeadline(time.Now().Add(streamWriteWait))
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
