//go:build !linux

package web

import "syscall"

// sendNow sends p on the socket fd without waiting (the runtime made it
// non-blocking): what the socket takes at once.
func sendNow(fd int, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := syscall.Write(fd, p[n:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return n, nil
		case err != nil:
			return n, err
		case m <= 0:
			return n, nil
		}
		n += m
	}
	return n, nil
}

// sendRing batches sends where io_uring exists (Linux); elsewhere the
// writers send one by one.
type sendRing struct{}

func newSendRing() *sendRing { return nil }

func (r *sendRing) send([]sendReq) bool { return false }

func (r *sendRing) close() {}

// ringEntries bounds a batch (unused without a ring).
const ringEntries = 256
