// Package sockwrite sends bytes to many sockets without ever waiting: the
// event streams' writers (web/stream) hand it a batch of frames, one per
// watcher's socket, and learn how much each socket took at once. On Linux
// a batch goes with one io_uring submission where the kernel allows it
// (entering and leaving the kernel is about a fifth of a small send's cost
// on a virtual machine with page-table isolation); elsewhere, or where
// io_uring is refused, each frame is one non-blocking send(2).
//
// It knows nothing of websockets, streams or the Studio: a file
// descriptor and bytes in, a count and an error out.
package sockwrite

import "sync/atomic"

// Item is one socket's write in a batch: Buf to send on the socket FD;
// Write sets N (the bytes the socket took at once, 0 when it takes nothing
// now) and Err (what the send failed with; a full socket is not an error).
type Item struct {
	FD  int
	Buf []byte
	N   int
	Err error
}

// Writer sends batches of frames. A Writer is used by one goroutine at a
// time; the descriptors must stay open until Write returns.
type Writer interface {
	// Write sends each item's Buf on its FD without waiting (at most
	// MaxBatch items), setting its N and Err as SendNow would.
	Write(batch []Item)
	// Close releases what the writer holds (an io_uring's memory and
	// descriptor); the writer is not used again.
	Close()
}

// New returns the best writer this process may use: an io_uring where the
// kernel allows one (and none has failed before), else one send(2) per
// item.
func New() Writer {
	if ringsOff.Load() {
		return Plain()
	}
	if r, err := newRing(); err == nil {
		return r
	}
	ringsOff.Store(true)
	return Plain()
}

// Plain returns the writer that sends one item at a time (SendNow).
func Plain() Writer { return plain{} }

type plain struct{}

func (plain) Write(batch []Item) {
	for i := range batch {
		batch[i].N, batch[i].Err = SendNow(batch[i].FD, batch[i].Buf)
	}
}

func (plain) Close() {}

// ringsOff is set once io_uring has failed in this process: New returns
// Plain writers from then on.
var ringsOff atomic.Bool

// RingsOff makes New return Plain writers from now on (as it does once a
// ring has failed), or lets it try rings again with off false; it returns
// the previous setting. For tests of the path a kernel without io_uring
// takes.
func RingsOff(off bool) (was bool) { return ringsOff.Swap(off) }
