package sockwrite

import (
	"bytes"
	"io"
	"testing"
)

// BenchmarkWrite sends one 200-byte frame to each of MaxBatch loopback TCP
// sockets per operation (a round of watchers of a busy run), with each
// peer reading all the while: what one round costs with one io_uring
// submission and with one send(2) per socket.
func BenchmarkWrite(b *testing.B) {
	for name, newWriter := range writers(b) {
		b.Run(name, func(b *testing.B) {
			servers, clients := tcpPairs(b, MaxBatch)
			fds := make([]int, len(servers))
			for i, s := range servers {
				fds[i] = fdOf(b, s)
			}
			for _, c := range clients {
				go func() { _, _ = io.Copy(io.Discard, c) }()
			}
			frame := bytes.Repeat([]byte("x"), 200)
			batch := make([]Item, len(servers))
			w := newWriter()
			defer w.Close()
			b.SetBytes(int64(len(frame) * len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				for i, fd := range fds {
					batch[i] = Item{FD: fd, Buf: frame}
				}
				w.Write(batch)
				for i := range batch {
					if batch[i].Err != nil || batch[i].N != len(frame) {
						b.Fatalf("socket %d took %d of %d bytes (%v)", i, batch[i].N, len(frame), batch[i].Err)
					}
				}
			}
		})
	}
}
