//go:build linux

package web

import (
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Sending frames to many sockets with one system call: a pool writer
// with an io_uring queues one send per watcher (each non-blocking, as
// sendNow is) and submits the lot with one io_uring_enter, where a send(2)
// per watcher would cost a system call each (on a virtual machine with
// page-table isolation, entering and leaving the kernel is about a fifth of
// a small send's cost). The sends complete during the submission (a socket
// that cannot take a frame at once answers EAGAIN, or how much it took);
// the writer waits for every completion before it lets go of the buffers
// and the streams' write locks. Without io_uring (an old kernel, or one
// that forbids it) the writers send one by one.

// sendNow sends p on the socket fd without waiting: what the socket takes
// at once (0 and no error when it takes nothing now).
func sendNow(fd int, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		q := p[n:]
		m, _, errno := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&q[0])), uintptr(len(q)),
			syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0)
		switch {
		case errno == syscall.EINTR:
			continue
		case errno == syscall.EAGAIN:
			return n, nil
		case errno != 0:
			return n, errno
		case int(m) <= 0:
			return n, nil
		}
		n += int(m)
	}
	return n, nil
}

const (
	sysIOUringSetup = 425
	sysIOUringEnter = 426

	ioringOffSQRing = 0
	ioringOffCQRing = 0x8000000
	ioringOffSQEs   = 0x10000000

	ioringOpSend         = 26
	ioringEnterGetEvents = 1
	ioringSetupSubmitAll = 1 << 7

	// ringEntries is the ring's size: the most sends one submission holds
	// (a batch of 64 sends takes about half a millisecond).
	ringEntries = 64
)

// ioUringParams is struct io_uring_params.
type ioUringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
		userAddr                                                        uint64
	}
	cqOff struct {
		head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
		userAddr                                                        uint64
	}
}

// ioUringSQE is struct io_uring_sqe (64 bytes), as a send uses it.
type ioUringSQE struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	msgFlags uint32
	userData uint64
	_        [24]byte
}

// ioUringCQE is struct io_uring_cqe (16 bytes).
type ioUringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

// sendRing is one pool writer's io_uring. Only its writer uses it.
type sendRing struct {
	fd                     int
	sqMem, cqMem, sqeMem   []byte
	sqHead, sqTail, sqMask *uint32
	sqArray                []uint32
	sqes                   []ioUringSQE
	cqHead, cqTail, cqMask *uint32
	cqes                   []ioUringCQE
}

// ringsOff is set once io_uring has failed here: writers send one by one.
var ringsOff atomic.Bool

// newSendRing sets up a ring, or returns nil when io_uring is not there.
func newSendRing() *sendRing {
	if ringsOff.Load() {
		return nil
	}
	r, err := setupSendRing()
	if err != nil {
		ringsOff.Store(true)
		return nil
	}
	return r
}

func setupSendRing() (*sendRing, error) {
	var p ioUringParams
	p.flags = ioringSetupSubmitAll
	fd, _, errno := syscall.Syscall(sysIOUringSetup, ringEntries, uintptr(unsafe.Pointer(&p)), 0)
	if errno == syscall.EINVAL {
		p = ioUringParams{}
		fd, _, errno = syscall.Syscall(sysIOUringSetup, ringEntries, uintptr(unsafe.Pointer(&p)), 0)
	}
	if errno != 0 {
		return nil, errno
	}
	r := &sendRing{fd: int(fd)}
	ok := false
	defer func() {
		if !ok {
			r.close()
		}
	}()
	var err error
	sqSize := int(p.sqOff.array) + int(p.sqEntries)*4
	if r.sqMem, err = syscall.Mmap(r.fd, ioringOffSQRing, sqSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil {
		return nil, err
	}
	cqSize := int(p.cqOff.cqes) + int(p.cqEntries)*int(unsafe.Sizeof(ioUringCQE{}))
	if r.cqMem, err = syscall.Mmap(r.fd, ioringOffCQRing, cqSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil {
		return nil, err
	}
	sqeSize := int(p.sqEntries) * int(unsafe.Sizeof(ioUringSQE{}))
	if r.sqeMem, err = syscall.Mmap(r.fd, ioringOffSQEs, sqeSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil {
		return nil, err
	}
	u32 := func(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	r.sqHead, r.sqTail, r.sqMask = u32(r.sqMem, p.sqOff.head), u32(r.sqMem, p.sqOff.tail), u32(r.sqMem, p.sqOff.ringMask)
	r.sqArray = unsafe.Slice(u32(r.sqMem, p.sqOff.array), p.sqEntries)
	r.sqes = unsafe.Slice((*ioUringSQE)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead, r.cqTail, r.cqMask = u32(r.cqMem, p.cqOff.head), u32(r.cqMem, p.cqOff.tail), u32(r.cqMem, p.cqOff.ringMask)
	r.cqes = unsafe.Slice((*ioUringCQE)(unsafe.Pointer(&r.cqMem[p.cqOff.cqes])), p.cqEntries)
	ok = true
	return r, nil
}

func (r *sendRing) close() {
	for _, m := range [][]byte{r.sqeMem, r.cqMem, r.sqMem} {
		if m != nil {
			_ = syscall.Munmap(m)
		}
	}
	_ = syscall.Close(r.fd)
}

// send sends each request's buf on its fd without waiting (at most
// ringEntries), setting its n and err as sendNow would. It reports false
// when the ring failed before sending anything: the caller sends the
// requests itself (and the ring is closed; ringsOff is set).
func (r *sendRing) send(reqs []sendReq) bool {
	tail := atomic.LoadUint32(r.sqTail)
	mask := *r.sqMask
	for i := range reqs {
		idx := (tail + uint32(i)) & mask
		buf := reqs[i].buf
		r.sqes[idx] = ioUringSQE{opcode: ioringOpSend, fd: int32(reqs[i].fd),
			addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), len: uint32(len(buf)),
			msgFlags: syscall.MSG_DONTWAIT | syscall.MSG_NOSIGNAL, userData: uint64(i)}
		r.sqArray[idx] = idx
		reqs[i].n, reqs[i].err, reqs[i].done = 0, nil, false
	}
	atomic.StoreUint32(r.sqTail, tail+uint32(len(reqs)))
	end := tail + uint32(len(reqs))
	left := len(reqs)
	for first := true; left > 0; first = false {
		toSubmit := end - atomic.LoadUint32(r.sqHead)
		var errno syscall.Errno
		if first {
			// Submit without waiting, and without the runtime's system
			// call bookkeeping: the sends do not block, they complete
			// while they are submitted.
			_, _, errno = syscall.RawSyscall6(sysIOUringEnter, uintptr(r.fd), uintptr(toSubmit), 0, 0, 0, 0)
		} else {
			// Some did not complete at once (or were not taken): wait.
			_, _, errno = syscall.Syscall6(sysIOUringEnter, uintptr(r.fd), uintptr(toSubmit), uintptr(left), ioringEnterGetEvents, 0, 0)
		}
		if errno != 0 && errno != syscall.EINTR && errno != syscall.EAGAIN && errno != syscall.EBUSY &&
			left == len(reqs) && atomic.LoadUint32(r.sqHead) == tail {
			// Nothing was taken: drop the ring, send one by one. (Once
			// some are taken, their completions must come: wait.)
			ringsOff.Store(true)
			r.close()
			return false
		}
		left -= r.reap(reqs)
	}
	return true
}

// reap takes the completions there are and returns how many.
func (r *sendRing) reap(reqs []sendReq) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	mask := *r.cqMask
	got := 0
	for ; head != tail; head++ {
		c := r.cqes[head&mask]
		if i := int(c.userData); i < len(reqs) && !reqs[i].done {
			reqs[i].done = true
			switch {
			case c.res >= 0:
				reqs[i].n = int(c.res)
			case syscall.Errno(-c.res) == syscall.EAGAIN:
			default:
				reqs[i].err = syscall.Errno(-c.res)
			}
			got++
		}
	}
	atomic.StoreUint32(r.cqHead, head)
	return got
}
