package web

import "time"

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
var StreamWriteWait = streamWriteWait
