package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestPollerReadsFramesAnswersPingsAndTimesArrivals runs the bench's
// watcher client against a gorilla websocket server: frames of every
// length encoding arrive whole and in order (also when split across
// reads), a ping is answered, the close code is kept, and each frame's
// kernel receive time lies between its sending and its reading.
func TestPollerReadsFramesAnswersPingsAndTimesArrivals(t *testing.T) {
	sizes := []int{0, 5, 125, 126, 4000, 65535, 65536, 300_000}
	pong := make(chan string, 1)
	sent := make(chan time.Time, len(sizes))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "http://studio.test" {
			http.Error(w, "no origin", http.StatusForbidden)
			return
		}
		up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		c.SetPongHandler(func(s string) error { pong <- s; return nil })
		go func() { // read, so the pong handler runs
			for {
				if _, _, err := c.NextReader(); err != nil {
					return
				}
			}
		}()
		for i, n := range sizes {
			msg := bytes.Repeat([]byte{byte('a' + i)}, n)
			sent <- time.Now()
			if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
				t.Error(err)
				return
			}
		}
		if err := c.WriteControl(websocket.PingMessage, []byte("are you there"), time.Now().Add(time.Second)); err != nil {
			t.Error(err)
		}
		select {
		case <-pong:
		case <-time.After(5 * time.Second):
			t.Error("no pong")
		}
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4403, "bye"), time.Now().Add(time.Second))
		time.Sleep(100 * time.Millisecond)
	}))
	defer srv.Close()

	p, err := newPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	fd, leftover, err := rawDial("ws"+strings.TrimPrefix(srv.URL, "http")+"/events", http.Header{"Origin": {"http://studio.test"}}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	type got struct {
		payload      []byte
		kernel, read int64
	}
	var frames []got
	c := &rawConn{fd: fd, onText: func(payload []byte, kernel, read int64) {
		mu.Lock()
		frames = append(frames, got{bytes.Clone(payload), kernel, read})
		mu.Unlock()
	}}
	if err := p.add(c, leftover); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		closed, code, err := p.state(c)
		if closed {
			if code != 4403 || err != nil {
				t.Fatalf("closed with code %d, err %v; want 4403 and no error", code, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the connection was not closed by the server")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.remove(c)

	mu.Lock()
	defer mu.Unlock()
	if len(frames) != len(sizes) {
		t.Fatalf("got %d frames, want %d", len(frames), len(sizes))
	}
	for i, f := range frames {
		want := bytes.Repeat([]byte{byte('a' + i)}, sizes[i])
		if !bytes.Equal(f.payload, want) {
			t.Errorf("frame %d: %d bytes, want %d of %q", i, len(f.payload), sizes[i], rune('a'+i))
		}
		at := (<-sent).UnixNano()
		if f.kernel < at || f.kernel > f.read {
			t.Errorf("frame %d: kernel time %d not between sent %d and read %d", i, f.kernel, at, f.read)
		}
	}
}

func TestParseFrameWaitsForWholeFrames(t *testing.T) {
	frame := append([]byte{0x81, 126, 0x01, 0x00}, bytes.Repeat([]byte("x"), 256)...)
	for cut := range len(frame) {
		if _, _, size, err := parseFrame(frame[:cut]); size != 0 || err != nil {
			t.Fatalf("%d of %d bytes: size %d, err %v; want incomplete", cut, len(frame), size, err)
		}
	}
	op, payload, size, err := parseFrame(append(frame, 0x89, 0))
	if op != 1 || len(payload) != 256 || size != len(frame) || err != nil {
		t.Fatalf("op %d, %d bytes, size %d, err %v", op, len(payload), size, err)
	}
	if _, _, _, err := parseFrame([]byte{0x81, 0x85, 1, 2, 3, 4, 0}); err == nil {
		t.Error("a masked server frame was accepted")
	}
	if _, _, _, err := parseFrame([]byte{0x81, 127, 0xff, 0, 0, 0, 0, 0, 0, 0}); err == nil {
		t.Error("a frame claiming exabytes was accepted")
	}
}
