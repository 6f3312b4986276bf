//go:build !linux

package sockwrite

import (
	"errors"
	"syscall"
)

// MaxBatch is the most items one Write sends.
const MaxBatch = 256

// SendNow sends p on the socket fd without waiting (the Go runtime made it
// non-blocking): what the socket takes at once.
func SendNow(fd int, p []byte) (int, error) {
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

// newRing fails: io_uring is Linux's.
func newRing() (Writer, error) { return nil, errors.ErrUnsupported }
