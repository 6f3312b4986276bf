//go:build linux

package sockwrite

import (
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Sending to many sockets with one system call: a ring queues one send
// per item (each non-blocking, as SendNow is) and submits the lot with one
// io_uring_enter. The sends complete during the submission (a socket that
// cannot take its bytes at once answers EAGAIN, or how much it took); Write
// waits for every completion before it returns, so the caller may reuse
// the buffers and close the sockets after.

// SendNow sends p on the socket fd without waiting: what the socket takes
// at once (0 and no error when it takes nothing now). It calls send(2)
// itself, not through the Go runtime's poller: the socket never blocks, so
// the call need not hand its thread to the scheduler.
func SendNow(fd int, p []byte) (int, error) {
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
)

// MaxBatch is the most items one Write sends: a ring's size (a batch of 64
// sends takes about half a millisecond).
const MaxBatch = 64

// ioUringParams is struct io_uring_params.
type ioUringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, MaxBatch, flags, dropped, array, resv1 uint32
		userAddr                                                     uint64
	}
	cqOff struct {
		head, tail, ringMask, MaxBatch, overflow, cqes, flags, resv1 uint32
		userAddr                                                     uint64
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

// ring is a Writer on an io_uring; after a failed submission it sends
// with SendNow (failed).
type ring struct {
	failed                 bool
	fd                     int
	sqMem, cqMem, sqeMem   []byte
	sqHead, sqTail, sqMask *uint32
	sqArray                []uint32
	sqes                   []ioUringSQE
	cqHead, cqTail, cqMask *uint32
	cqes                   []ioUringCQE
	// done marks the items of the batch under way whose completion came.
	done [MaxBatch]bool
}

// newRing sets up a ring, or fails when io_uring is not there (an old
// kernel, or one that forbids it).
func newRing() (*ring, error) {
	var p ioUringParams
	p.flags = ioringSetupSubmitAll
	fd, _, errno := syscall.Syscall(sysIOUringSetup, MaxBatch, uintptr(unsafe.Pointer(&p)), 0)
	if errno == syscall.EINVAL {
		p = ioUringParams{}
		fd, _, errno = syscall.Syscall(sysIOUringSetup, MaxBatch, uintptr(unsafe.Pointer(&p)), 0)
	}
	if errno != 0 {
		return nil, errno
	}
	r := &ring{fd: int(fd)}
	ok := false
	defer func() {
		if !ok {
			r.Close()
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

// Close implements Writer.
func (r *ring) Close() {
	if r.fd < 0 {
		return
	}
	for _, m := range [][]byte{r.sqeMem, r.cqMem, r.sqMem} {
		if m != nil {
			_ = syscall.Munmap(m)
		}
	}
	_ = syscall.Close(r.fd)
	r.fd = -1
}

// Write implements Writer.
func (r *ring) Write(batch []Item) {
	for len(batch) > 0 {
		n := min(len(batch), MaxBatch)
		if r.failed || !r.send(batch[:n]) {
			Plain().Write(batch[:n])
		}
		batch = batch[n:]
	}
}

// send sends each item's Buf on its FD without waiting (at most
// MaxBatch), setting its N and Err as SendNow would. It reports false
// when the ring failed before sending anything: the caller sends the items
// itself (the ring is closed and failed; ringsOff is set).
func (r *ring) send(reqs []Item) bool {
	tail := atomic.LoadUint32(r.sqTail)
	mask := *r.sqMask
	for i := range reqs {
		idx := (tail + uint32(i)) & mask
		var addr uint64
		if buf := reqs[i].Buf; len(buf) > 0 {
			addr = uint64(uintptr(unsafe.Pointer(&buf[0])))
		}
		r.sqes[idx] = ioUringSQE{opcode: ioringOpSend, fd: int32(reqs[i].FD),
			addr: addr, len: uint32(len(reqs[i].Buf)),
			msgFlags: syscall.MSG_DONTWAIT | syscall.MSG_NOSIGNAL, userData: uint64(i)}
		r.sqArray[idx] = idx
		reqs[i].N, reqs[i].Err = 0, nil
		r.done[i] = false
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
			r.Close()
			r.failed = true
			return false
		}
		left -= r.reap(reqs)
	}
	return true
}

// reap takes the completions there are and returns how many.
func (r *ring) reap(reqs []Item) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	mask := *r.cqMask
	got := 0
	for ; head != tail; head++ {
		c := r.cqes[head&mask]
		if i := int(c.userData); i < len(reqs) && !r.done[i] {
			r.done[i] = true
			switch {
			case c.res >= 0:
				reqs[i].N = int(c.res)
			case syscall.Errno(-c.res) == syscall.EAGAIN:
			default:
				reqs[i].Err = syscall.Errno(-c.res)
			}
			got++
		}
	}
	atomic.StoreUint32(r.cqHead, head)
	return got
}
