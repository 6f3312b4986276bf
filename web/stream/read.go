package stream

import (
	"encoding/binary"
	"io"
	"time"

	"github.com/gorilla/websocket"
)

// read consumes what the client sends and ends the stream when the client
// goes. Clients send only control frames (pong, ping, close), so this reads
// frames straight from the connection instead of through gorilla's reader:
// its goroutine then blocks only a few calls deep, and the stack of an idle
// stream shrinks to the minimum. A client that stops answering pings is
// found by tick (a read deadline would cost every idle stream a timer).
func (st *liveStream) read() {
	nc := st.conn.NetConn()
	// head holds a frame header (at most 14 bytes); payload a control
	// frame's payload (at most 125).
	head := make([]byte, 14+125)
	payload := head[14:]
	for {
		if _, err := io.ReadFull(nc, head[:2]); err != nil {
			st.end(errPeerGone)
			return
		}
		st.lastHeard.Store(time.Now().UnixNano())
		fin, op := head[0]&0x80 != 0, head[0]&0x0f
		masked, n := head[1]&0x80 != 0, int64(head[1]&0x7f)
		switch n {
		case 126:
			if _, err := io.ReadFull(nc, head[2:4]); err != nil {
				st.end(errPeerGone)
				return
			}
			n = int64(binary.BigEndian.Uint16(head[2:4]))
		case 127:
			if _, err := io.ReadFull(nc, head[2:10]); err != nil {
				st.end(errPeerGone)
				return
			}
			n = int64(binary.BigEndian.Uint64(head[2:10]))
		}
		control := op >= 8
		if !masked || n > 512 || n < 0 || (control && (n > 125 || !fin)) || (op > 2 && op < 8) || op > 10 {
			// Not a frame a browser sends: close as the protocol says.
			st.end(errClientProtocol)
			return
		}
		var mask [4]byte
		if _, err := io.ReadFull(nc, mask[:]); err != nil {
			st.end(errPeerGone)
			return
		}
		if !control {
			// Data is not expected; read past it.
			if _, err := io.CopyN(io.Discard, nc, n); err != nil {
				st.end(errPeerGone)
				return
			}
			continue
		}
		p := payload[:n]
		if _, err := io.ReadFull(nc, p); err != nil {
			st.end(errPeerGone)
			return
		}
		for i := range p {
			p[i] ^= mask[i%4]
		}
		switch op {
		case websocket.CloseMessage:
			// Answer the close with the client's code, then end.
			reply := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
			if len(p) >= 2 {
				reply = append([]byte(nil), p[:2]...)
			}
			_ = st.control(websocket.CloseMessage, reply, time.Now().Add(time.Second))
			st.end(errPeerGone)
			return
		case websocket.PingMessage:
			_ = st.control(websocket.PongMessage, append([]byte(nil), p...), time.Now().Add(streamWriteWait.get()))
		}
	}
}
