package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The watchers share the machine with the Studio, so they must cost it as
// little as they can: a goroutine per watcher woken for every frame (what a
// websocket library's client does) takes about as much CPU per event as the
// Studio spends writing it. This client does the handshake itself, then
// reads every connection from one epoll loop, with one buffer, answering
// pings. For each frame it notes two times: when the loop read it, and when
// the kernel received it (SO_TIMESTAMPNS), which does not depend on how
// soon the bench got to run.

// rawConn is one websocket connection read by a poller.
type rawConn struct {
	fd int
	// pending holds the start of a frame whose end has not arrived.
	pending []byte
	// onText is called with each text frame's payload, the time (Unix
	// nanoseconds) the kernel received its last byte and the time it was
	// read. The payload is only valid during the call.
	onText func(payload []byte, kernel, read int64)
	// closed is set when the Studio closed the connection (closeCode says
	// how, 1006 when it just went); err when reading failed.
	closed    bool
	closeCode int
	err       error
}

// poller reads many rawConns from one goroutine. Its epoll descriptor is
// itself waited on through the Go runtime's poller (it becomes readable
// when a connection does), so no thread sits in epoll_wait: a goroutine
// blocked in a system call keeps the runtime's monitor thread waking up
// every few microseconds.
type poller struct {
	epfd int
	ep   *os.File
	mu   sync.Mutex // held while frames are handled; add and remove take it
	// conns is nil once the poller is closed.
	conns map[int32]*rawConn
	// shared counts the text frames that completed in the same read as
	// another: their kernel time is that of the read's last segment, later
	// than their own arrival (the bench fell behind by a frame).
	shared  atomic.Int64
	closing atomic.Bool
	done    chan struct{}
}

func newPoller() (*poller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	p := &poller{epfd: epfd, ep: os.NewFile(uintptr(epfd), "epoll"), conns: map[int32]*rawConn{}, done: make(chan struct{})}
	sc, err := p.ep.SyscallConn()
	if err != nil {
		p.ep.Close()
		return nil, err
	}
	go p.loop(sc)
	return p, nil
}

// close stops the loop and closes the connections still added.
func (p *poller) close() {
	p.closing.Store(true)
	p.ep.Close() // ends the loop's wait
	<-p.done
	p.mu.Lock()
	for fd := range p.conns {
		syscall.Close(int(fd))
	}
	p.conns = nil
	p.mu.Unlock()
}

func (p *poller) add(c *rawConn, leftover []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return errors.New("poller closed")
	}
	p.conns[int32(c.fd)] = c
	if len(leftover) > 0 {
		now := time.Now().UnixNano()
		p.consume(c, leftover, now, now)
		if c.closed {
			return nil // closed already: nothing more to read
		}
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(c.fd)}
	if err := syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
		delete(p.conns, int32(c.fd))
		return fmt.Errorf("epoll add: %w", err)
	}
	return nil
}

// remove stops reading c and closes it. After it returns, the loop no
// longer touches c.
func (p *poller) remove(c *rawConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil || p.conns[int32(c.fd)] != c {
		return
	}
	delete(p.conns, int32(c.fd))
	_ = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, c.fd, nil)
	syscall.Close(c.fd)
}

// state returns c's outcome so far (under the loop's lock).
func (p *poller) state(c *rawConn) (closed bool, code int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return c.closed, c.closeCode, c.err
}

// loop handles ready connections until the poller is closed. The
// connections are registered level-triggered and each is read until its
// socket is empty; the epoll descriptor is drained before waiting again
// (the runtime waits for it edge-triggered).
func (p *poller) loop(sc syscall.RawConn) {
	defer close(p.done)
	events := make([]syscall.EpollEvent, 512)
	buf := make([]byte, 256<<10)
	oob := make([]byte, 128)
	var failed error
	err := sc.Read(func(uintptr) bool {
		for {
			n, err := syscall.EpollWait(p.epfd, events, 0)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				failed = err
				return true
			}
			if n == 0 {
				return false // wait until a connection is ready
			}
			p.mu.Lock()
			for _, ev := range events[:n] {
				if c := p.conns[ev.Fd]; c != nil && !c.closed {
					p.readAll(c, buf, oob)
				}
			}
			p.mu.Unlock()
		}
	})
	if failed != nil {
		panic(fmt.Sprintf("epoll_wait: %v", failed))
	}
	if err != nil && !p.closing.Load() {
		panic(fmt.Sprintf("poller: %v", err))
	}
}

// readAll reads what c has received until the socket is empty.
func (p *poller) readAll(c *rawConn, buf, oob []byte) {
	for !c.closed {
		n, oobn, _, _, err := syscall.Recvmsg(c.fd, buf, oob, syscall.MSG_DONTWAIT)
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
			return
		}
		if err != nil || n == 0 {
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				c.err = err
			}
			p.ended(c, 1006)
			return
		}
		read := time.Now().UnixNano()
		kernel := kernelTime(oob[:oobn])
		if kernel == 0 {
			kernel = read
		}
		p.consume(c, buf[:n], kernel, read)
	}
}

func (p *poller) ended(c *rawConn, code int) {
	if !c.closed {
		c.closed, c.closeCode = true, code
	}
	_ = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, c.fd, nil)
}

// kernelTime finds the receive time in recvmsg's control messages. For TCP
// it is the time the last segment the read consumed arrived, so frames read
// together all get the latest one's (see poller.shared).
func kernelTime(oob []byte) int64 {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(syscall.Timespec{})) {
			return (*syscall.Timespec)(unsafe.Pointer(&m.Data[0])).Nano()
		}
	}
	return 0
}

// maxFrame bounds what one frame may claim to carry.
const maxFrame = 4 << 20

// consume parses the frames in data (after what is pending).
func (p *poller) consume(c *rawConn, data []byte, kernel, read int64) {
	if len(c.pending) > 0 {
		c.pending = append(c.pending, data...)
		data = c.pending
	}
	texts := 0
	defer func() {
		if texts > 1 {
			p.shared.Add(int64(texts - 1))
		}
	}()
	for len(data) > 0 && !c.closed {
		op, payload, size, err := parseFrame(data)
		if err != nil {
			c.err = err
			p.ended(c, 1002)
			return
		}
		if size == 0 {
			break // incomplete
		}
		switch op {
		case 0x1: // text
			texts++
			if c.onText != nil {
				c.onText(payload, kernel, read)
			}
		case 0x8: // close
			code := 1005
			if len(payload) >= 2 {
				code = int(binary.BigEndian.Uint16(payload))
			}
			p.ended(c, code)
		case 0x9: // ping
			writeClientFrame(c.fd, 0xA, payload)
		}
		data = data[size:]
	}
	// Keep an incomplete frame's bytes (copied: data may be the loop's
	// buffer).
	c.pending = append(c.pending[:0], data...)
	if len(c.pending) == 0 && cap(c.pending) > 64<<10 {
		c.pending = nil
	}
}

// parseFrame reads one server frame (never masked, never fragmented by the
// Studio) at the start of data; size is 0 when it is not all there.
func parseFrame(data []byte) (op byte, payload []byte, size int, err error) {
	if len(data) < 2 {
		return 0, nil, 0, nil
	}
	if data[0]&0x80 == 0 || data[0]&0x0f == 0 {
		return 0, nil, 0, errors.New("fragmented frame")
	}
	if data[1]&0x80 != 0 {
		return 0, nil, 0, errors.New("masked frame from the server")
	}
	n, hdr := uint64(data[1]&0x7f), 2
	switch n {
	case 126:
		if len(data) < 4 {
			return 0, nil, 0, nil
		}
		n, hdr = uint64(binary.BigEndian.Uint16(data[2:])), 4
	case 127:
		if len(data) < 10 {
			return 0, nil, 0, nil
		}
		n, hdr = binary.BigEndian.Uint64(data[2:]), 10
	}
	if n > maxFrame {
		return 0, nil, 0, fmt.Errorf("frame of %d bytes", n)
	}
	if len(data) < hdr+int(n) {
		return 0, nil, 0, nil
	}
	return data[0] & 0x0f, data[hdr : hdr+int(n)], hdr + int(n), nil
}

// writeClientFrame sends a small control frame, masked as a client must.
func writeClientFrame(fd int, op byte, payload []byte) {
	if len(payload) > 125 {
		payload = payload[:125]
	}
	frame := make([]byte, 0, 6+len(payload))
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	frame = append(frame, 0x80|op, 0x80|byte(len(payload)))
	frame = append(frame, mask[:]...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	_, _ = syscall.Write(fd, frame)
}

// rawDial opens a websocket to rawURL ("ws://host:port/path?query") with
// header, and returns its socket (non-blocking, with receive timestamps on)
// and any bytes that followed the handshake's answer.
func rawDial(rawURL string, header http.Header, timeout time.Duration) (int, []byte, error) {
	rest, ok := strings.CutPrefix(rawURL, "ws://")
	if !ok {
		return -1, nil, fmt.Errorf("%s: only ws:// is supported", rawURL)
	}
	host, path, _ := strings.Cut(rest, "/")
	nc, err := net.DialTimeout("tcp", host, timeout)
	if err != nil {
		return -1, nil, err
	}
	defer nc.Close()
	tc := nc.(*net.TCPConn)
	_ = tc.SetDeadline(time.Now().Add(timeout))
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	var req bytes.Buffer
	fmt.Fprintf(&req, "GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n", path, host, key)
	for name, values := range header {
		for _, v := range values {
			fmt.Fprintf(&req, "%s: %s\r\n", name, v)
		}
	}
	req.WriteString("\r\n")
	if _, err := tc.Write(req.Bytes()); err != nil {
		return -1, nil, err
	}
	// Read the answer's head; whatever follows it is the stream's.
	var got []byte
	chunk := make([]byte, 4096)
	end := -1
	for end < 0 {
		n, err := tc.Read(chunk)
		got = append(got, chunk[:n]...)
		if end = bytes.Index(got, []byte("\r\n\r\n")); end >= 0 {
			break
		}
		if err != nil {
			return -1, nil, fmt.Errorf("handshake: %w", err)
		}
		if len(got) > 64<<10 {
			return -1, nil, errors.New("handshake: answer head too long")
		}
	}
	head, leftover := got[:end+4], got[end+4:]
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(head)), nil)
	if err != nil {
		return -1, nil, fmt.Errorf("handshake: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return -1, nil, fmt.Errorf("handshake: status %d", resp.StatusCode)
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		return -1, nil, errors.New("handshake: wrong Sec-WebSocket-Accept")
	}
	// Keep the socket beyond the net.Conn: a duplicate descriptor (the
	// same non-blocking socket), which the poller alone reads.
	sc, err := tc.SyscallConn()
	if err != nil {
		return -1, nil, err
	}
	fd := -1
	var dupErr error
	_ = sc.Control(func(s uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if e != 0 {
			dupErr = e
			return
		}
		fd = int(r)
	})
	if dupErr != nil {
		return -1, nil, fmt.Errorf("dup: %w", dupErr)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1); err != nil {
		syscall.Close(fd)
		return -1, nil, fmt.Errorf("SO_TIMESTAMPNS: %w", err)
	}
	_ = tc.SetDeadline(time.Time{})
	return fd, bytes.Clone(leftover), nil
}
