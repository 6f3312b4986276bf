package stream

import (
	"time"

	"github.com/skali-dev/studio/web/stream/sockwrite"
)

// SetStreamTimingsForTest shortens the event streams' ping interval and
// the silence after which a client counts as gone; the returned function
// restores them. Tests using it must not run in parallel.
func SetStreamTimingsForTest(ping, pongWait time.Duration) (restore func()) {
	oldPing, oldWait := streamPing.get(), streamPongWait.get()
	streamPing.Store(int64(ping))
	streamPongWait.Store(int64(pongWait))
	return func() {
		streamPing.Store(int64(oldPing))
		streamPongWait.Store(int64(oldWait))
	}
}

// StreamWriteWait is how long a stream's write may wait on a full socket
// before the watcher is cut off.
func StreamWriteWait() time.Duration { return streamWriteWait.get() }

// SetStreamWriteWaitForTest changes how long a stream's write may wait on
// a full socket; the returned function restores it. Tests using it must
// not run in parallel.
func SetStreamWriteWaitForTest(d time.Duration) (restore func()) {
	old := streamWriteWait.get()
	streamWriteWait.Store(int64(d))
	return func() { streamWriteWait.Store(int64(old)) }
}

// SendRingsOffForTest makes the stream writers started from now on send
// one stream at a time, as on a kernel without io_uring; the returned
// function lets later writers use rings again. Tests using it must not run
// in parallel.
func SendRingsOffForTest() (restore func()) {
	was := sockwrite.RingsOff(true)
	return func() { sockwrite.RingsOff(was) }
}
