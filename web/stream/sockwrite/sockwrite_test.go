package sockwrite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// writers are the writers a process may use: the ring where this kernel
// allows one, and the plain one everywhere.
func writers(t testing.TB) map[string]func() Writer {
	t.Helper()
	ws := map[string]func() Writer{"send(2)": Plain}
	if r, err := newRing(); err != nil {
		t.Logf("no io_uring here (%v): only the send(2) writer is tested", err)
	} else {
		r.Close()
		ws["io_uring"] = func() Writer {
			r, err := newRing()
			if err != nil {
				t.Fatalf("a second ring: %v", err)
			}
			return r
		}
	}
	return ws
}

// fdOf is the descriptor under a socket connection.
func fdOf(t testing.TB, c syscall.Conn) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	if err := raw.Control(func(p uintptr) { fd = int(p) }); err != nil {
		t.Fatal(err)
	}
	return fd
}

// tcpPairs opens n loopback TCP connections and returns each one's two ends.
func tcpPairs(t testing.TB, n int) (servers []*net.TCPConn, clients []net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range n {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); s.Close() })
		servers, clients = append(servers, s.(*net.TCPConn)), append(clients, c)
	}
	return servers, clients
}

// expectRead fails unless c's peer sent exactly want (within 10 seconds).
func expectRead(t *testing.T, c net.Conn, who string, want []byte) {
	t.Helper()
	got := make([]byte, len(want))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s read %q (%v), want %q", who, got, err, want)
	}
}

// socketPair returns the two ends of a Unix stream socket pair, the
// writing end non-blocking as the Go runtime leaves a network socket.
func socketPair(t *testing.T) (w, r int) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fds[0]); syscall.Close(fds[1]) })
	return fds[0], fds[1]
}

// A batch larger than MaxBatch reaches every socket: each peer reads its
// own bytes, whole, and each item says all of it was taken.
func TestWriteSendsEachItemToItsOwnSocket(t *testing.T) {
	for name, newWriter := range writers(t) {
		t.Run(name, func(t *testing.T) {
			n := MaxBatch + 9
			servers, clients := tcpPairs(t, n)
			batch := make([]Item, n)
			for i, s := range servers {
				batch[i] = Item{FD: fdOf(t, s), Buf: []byte(fmt.Sprintf("frame for watcher %d\n", i))}
			}
			w := newWriter()
			defer w.Close()
			w.Write(batch)
			for i, it := range batch {
				if it.Err != nil || it.N != len(it.Buf) {
					t.Fatalf("item %d: took %d of %d bytes, err %v; want all, no error", i, it.N, len(it.Buf), it.Err)
				}
			}
			for i, c := range clients {
				expectRead(t, c, fmt.Sprintf("watcher %d", i), batch[i].Buf)
			}
		})
	}
}

// A socket whose peer does not read takes what its buffer holds and no
// more, without the writer waiting, and the next socket of the same batch
// gets all of its bytes: one slow watcher never holds up the others. The
// rest, sent once the peer has read, completes the stream byte for byte.
func TestWriteToAFullSocketTakesWhatFitsAndGoesOn(t *testing.T) {
	for name, newWriter := range writers(t) {
		t.Run(name, func(t *testing.T) {
			full, fullPeer := socketPair(t)
			servers, readers := tcpPairs(t, 1)
			big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB: far more than a socket buffers
			small := []byte("the next watcher's frame")
			batch := []Item{{FD: full, Buf: big}, {FD: fdOf(t, servers[0]), Buf: small}}
			w := newWriter()
			defer w.Close()

			done := make(chan struct{})
			go func() { w.Write(batch); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Write waited for a socket nobody reads")
			}
			if batch[0].Err != nil || batch[0].N <= 0 || batch[0].N >= len(big) {
				t.Fatalf("full socket: took %d of %d bytes, err %v; want part of it, no error", batch[0].N, len(big), batch[0].Err)
			}
			if batch[1].Err != nil || batch[1].N != len(small) {
				t.Fatalf("next socket: took %d of %d bytes, err %v; want all", batch[1].N, len(small), batch[1].Err)
			}
			expectRead(t, readers[0], "the next watcher", small)

			// The peer reads everything while the rest is sent as the
			// socket takes it.
			var wg sync.WaitGroup
			var read bytes.Buffer
			var readErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 64<<10)
				for read.Len() < len(big) {
					m, err := syscall.Read(fullPeer, buf)
					if err != nil || m <= 0 {
						readErr = fmt.Errorf("read %d: %v", m, err)
						return
					}
					read.Write(buf[:m])
				}
			}()
			sent := batch[0].N
			deadline := time.Now().Add(30 * time.Second)
			for sent < len(big) && time.Now().Before(deadline) {
				rest := []Item{{FD: full, Buf: big[sent:]}}
				w.Write(rest)
				if rest[0].Err != nil {
					t.Fatalf("sending the rest: %v", rest[0].Err)
				}
				sent += rest[0].N
			}
			if sent < len(big) {
				t.Fatalf("30 s on, %d of %d bytes were sent", sent, len(big))
			}
			wg.Wait()
			if readErr != nil {
				t.Fatalf("peer: %v after %d bytes", readErr, read.Len())
			}
			if !bytes.Equal(read.Bytes(), big) {
				t.Fatalf("the peer read %d bytes that are not what was sent (%d)", read.Len(), len(big))
			}
		})
	}
}

// A socket whose peer has gone fails with the kernel's error (the process
// gets no SIGPIPE), and the other items of the batch are sent.
func TestWriteToAGonePeerFailsThatItemOnly(t *testing.T) {
	for name, newWriter := range writers(t) {
		t.Run(name, func(t *testing.T) {
			gone, peer := socketPair(t)
			syscall.Close(peer)
			servers, readers := tcpPairs(t, 1)
			frame := []byte("still delivered")
			batch := []Item{{FD: gone, Buf: []byte("to nobody")}, {FD: fdOf(t, servers[0]), Buf: frame}}
			w := newWriter()
			defer w.Close()
			w.Write(batch)
			if !errors.Is(batch[0].Err, syscall.EPIPE) && !errors.Is(batch[0].Err, syscall.ECONNRESET) {
				t.Fatalf("gone peer: took %d bytes, err %v; want EPIPE or ECONNRESET", batch[0].N, batch[0].Err)
			}
			if batch[1].Err != nil || batch[1].N != len(frame) {
				t.Fatalf("other socket: took %d of %d, err %v", batch[1].N, len(frame), batch[1].Err)
			}
			expectRead(t, readers[0], "the other watcher", frame)
		})
	}
}

// With rings off (as after a ring failed, or on a kernel that refuses
// io_uring) New gives the plain writer, which sends just the same.
func TestNewWithRingsOffSendsOneByOne(t *testing.T) {
	was := RingsOff(true)
	defer RingsOff(was)
	w := New()
	defer w.Close()
	if _, ok := w.(plain); !ok {
		t.Fatalf("New with rings off returned %T, want the plain writer", w)
	}
	servers, readers := tcpPairs(t, 2)
	batch := []Item{{FD: fdOf(t, servers[0]), Buf: []byte("one")}, {FD: fdOf(t, servers[1]), Buf: []byte("two")}}
	w.Write(batch)
	for i, r := range readers {
		expectRead(t, r, fmt.Sprintf("socket %d", i), batch[i].Buf)
	}
}
