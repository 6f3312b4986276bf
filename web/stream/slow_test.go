//go:build unix

package stream_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/web/stream"
	"github.com/skali-dev/studio/web/webtest"
)

// TestEventStreamSlowClientNeverDelaysTheOthers watches a run with two
// clients, one of which never reads (with a small receive buffer), while
// far more is appended than the silent one's socket buffers hold: the reading
// client gets every event, in order, while the silent one is still
// connected (a write to it waits up to its limit: 10 s in production, 30 s
// here), and the silent one is closed once a write to it has waited that
// long.
func TestEventStreamSlowClientNeverDelaysTheOthers(t *testing.T) {
	// The reader must have every event before the silent watcher is cut
	// off: 1,100 events of 16 KiB took 14 s on a busy 2-core machine under
	// -race, more than the 10 s a write may wait in production.
	defer stream.SetStreamWriteWaitForTest(30 * time.Second)()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	runID := s.CreateRun(t, env, "deploy")
	admin := s.SignInLocal(t)

	req, _ := http.NewRequest(http.MethodGet, s.URL+"/", nil)
	var cookie string
	for _, ck := range admin.Jar.Cookies(req.URL) {
		cookie = ck.Name + "=" + ck.Value
	}
	small := websocket.Dialer{NetDialContext: (&net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}).DialContext}
	silent, resp, err := small.Dial("ws"+strings.TrimPrefix(s.URL, "http")+webtest.RunEventsPath(runID, 0), http.Header{"Cookie": {cookie}, "Origin": {s.URL}})
	if err != nil {
		t.Fatalf("dial the silent watcher: %v (%v)", err, resp)
	}
	defer silent.Close()
	reader, resp, err := s.DialStream(t, admin, webtest.RunEventsPath(runID, 0), nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}

	// Events of 16 KiB, four times as many bytes as the largest send
	// buffer the kernel gives a socket (and at least 1,100 events): far
	// more than the silent client's socket buffers hold.
	pad := strings.Repeat("x", 16<<10)
	n := int64(max(1100, 4*maxSendBuffer(t)/len(pad)))
	read := make(readProgress, 1)
	defer appendPaced(t, s, runID, n, pad, read)()
	defer read.done(0) // before the wait above: a failed reader holds up nothing
	start := time.Now()
	for want := int64(1); want <= n; want++ {
		_ = reader.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, data, err := reader.ReadMessage()
		if err != nil {
			t.Fatalf("the reading watcher, waiting for event %d: %v", want, err)
		}
		var f webtest.StreamFrame
		if err := json.Unmarshal(data, &f); err != nil || f.Seq != want {
			t.Fatalf("the reading watcher got seq %d (%v), want %d", f.Seq, err, want)
		}
		read.got(0, want)
	}
	if got := s.Hub.Subscribers(); got != 2 {
		t.Errorf("%d subscriptions open once the reader had every event (%d events of %d KiB, in %s), want 2: the silent watcher should still be there, stuck",
			got, n, len(pad)>>10, time.Since(start).Round(time.Millisecond))
	}
	// The server gives up on the silent client once a write to it has
	// waited its limit.
	for deadline := time.Now().Add(stream.StreamWriteWait() + time.Minute); s.Hub.Subscribers() > 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the silent watcher was never closed")
		}
	}

	// Now the silent client reads: it gets a prefix of the events, then the
	// end of the connection, not all of them.
	var got int64
	var end error
	for {
		_ = silent.SetReadDeadline(time.Now().Add(time.Minute))
		_, data, err := silent.ReadMessage()
		if err != nil {
			end = err
			break
		}
		var f webtest.StreamFrame
		if err := json.Unmarshal(data, &f); err != nil || f.Seq != got+1 {
			t.Fatalf("the silent watcher got seq %d (%v) after %d", f.Seq, err, got)
		}
		got++
	}
	if got >= n {
		t.Errorf("the silent watcher got all %d events, then %v; it should have been closed for falling behind", got, end)
	}
}

// maxSendBuffer is the largest send buffer the kernel gives a TCP socket
// (the last field of net.ipv4.tcp_wmem), or 4 MiB when it cannot be read.
func maxSendBuffer(t *testing.T) int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem")
	if err != nil {
		return 4 << 20
	}
	fields := strings.Fields(string(data))
	if len(fields) != 3 {
		return 4 << 20
	}
	n, err := strconv.Atoi(fields[2])
	if err != nil {
		t.Fatalf("tcp_wmem %q: %v", data, err)
	}
	return n
}

// pacedWindow is how far the appender of a stream test may run ahead of its
// slowest reader, in events: well inside the hub's queue limit (1,024), so
// that a reader the machine starves for a while is never closed as too slow
// ("fell behind; resume"), which is right for a client that is not keeping
// up, but not what these tests are about. Silent watchers are not counted:
// they still fall as far behind as the test makes them.
const pacedWindow = 256

// readProgress is the last event each reading watcher of a test received,
// by reader.
type readProgress []atomic.Int64

// got records that reader i received event seq.
func (r readProgress) got(i int, seq int64) { r[i].Store(seq) }

// done takes reader i out of the pace (it ended, or failed): the appender
// never waits for it again.
func (r readProgress) done(i int) { r[i].Store(1 << 62) }

// slowest is the lowest event every reader has received.
func (r readProgress) slowest() int64 {
	low := int64(1 << 62)
	for i := range r {
		low = min(low, r[i].Load())
	}
	return low
}

// appendPaced appends n events of pad to the run in a goroutine, never more
// than pacedWindow ahead of the slowest reader; the returned function waits
// for it to end.
func appendPaced(t *testing.T, s *webtest.Server, runID, n int64, pad string, read readProgress) (wait func()) {
	appended := make(chan struct{})
	go func() {
		defer close(appended)
		for seq := int64(1); seq <= n; seq++ {
			for seq-read.slowest() > pacedWindow {
				time.Sleep(time.Millisecond)
			}
			if _, err := s.DB.AppendRunEvent(context.Background(), runID, nil, map[string]any{"run": map[string]any{"status": "running"}, "pad": pad}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	return func() { <-appended }
}
