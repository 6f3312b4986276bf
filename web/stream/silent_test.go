//go:build unix

package stream_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/stream"
	"github.com/skali-dev/studio/web/webtest"
)

// TestEventStreamOneSilentWatcherAmongManyReaders: one watcher never reads
// (a small receive buffer, far more appended than its socket buffers hold)
// among many that do. The writers the streams share never wait for its
// socket: every reading watcher gets every event, once and in order, and
// the silent one, when it finally reads, finds a prefix of the events and
// then the end of its stream.
//
// On Linux the pool's writers send a round of streams with one io_uring
// submission where the kernel allows it; the test below runs the same
// watchers with the one-send-per-stream path production falls back to.
func TestEventStreamOneSilentWatcherAmongManyReaders(t *testing.T) {
	silentWatcherAmongReaders(t)
}

func silentWatcherAmongReaders(t *testing.T) {
	// The readers must read within a write's deadline: on a busy machine
	// (the whole suite beside two busy loops) a reader of 16 MiB took more
	// than production's 10 s between two of its reads and was cut off as
	// a slow client. 30 s keeps them readers; the silent one is still cut.
	defer stream.SetStreamWriteWaitForTest(30 * time.Second)()
	var metrics *web.Metrics
	s := webtest.Start(t, func(d *web.Deps) {
		metrics = web.NewMetrics(d.DB)
		d.Metrics = metrics
	})
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
	const readers = 8
	conns := make([]*websocket.Conn, readers)
	for i := range conns {
		if conns[i], resp, err = s.DialStream(t, admin, webtest.RunEventsPath(runID, 0), nil); err != nil {
			t.Fatalf("dial reader %d: %v (%v)", i, err, resp)
		}
		defer conns[i].Close()
	}

	pad := strings.Repeat("x", 16<<10)
	n := int64(max(1100, 4*maxSendBuffer(t)/len(pad)))
	read := make(readProgress, readers)
	defer appendPaced(t, s, runID, n, pad, read)()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			defer read.done(i)
			for want := int64(1); want <= n; want++ {
				_ = c.SetReadDeadline(time.Now().Add(time.Minute))
				_, data, err := c.ReadMessage()
				if err != nil {
					t.Errorf("reader %d, waiting for event %d: %v", i, want, err)
					return
				}
				var f webtest.StreamFrame
				if err := json.Unmarshal(data, &f); err != nil || f.Seq != want {
					t.Errorf("reader %d got seq %d (%v), want %d", i, f.Seq, err, want)
					return
				}
				read.got(i, want)
			}
		})
	}
	wg.Wait()
	// A watcher that reads within the write deadline catches up from the
	// table, in order; one that still reads nothing after it is cut off.
	// Its socket has been full since early on: wait until the server has
	// closed its stream (only the readers' are open), and past the deadline
	// it must have.
	openNow := func() string {
		rec := httptest.NewRecorder()
		metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		for line := range strings.Lines(rec.Body.String()) {
			if strings.HasPrefix(line, `studio_event_streams_open{stream="run"} `) {
				return strings.TrimSpace(line)
			}
		}
		return "(no open streams metric)"
	}
	want := fmt.Sprintf(`studio_event_streams_open{stream="run"} %d`, readers)
	for deadline := time.Now().Add(stream.StreamWriteWait() + time.Minute); ; {
		seen := openNow()
		if seen == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the silent watcher's stream is still open long after its write deadline: %s, want %s", seen, want)
		}
		time.Sleep(50 * time.Millisecond)
	}

	var got int64
	for {
		_ = silent.SetReadDeadline(time.Now().Add(time.Minute))
		_, data, err := silent.ReadMessage()
		if err != nil {
			break
		}
		var f webtest.StreamFrame
		if err := json.Unmarshal(data, &f); err != nil || f.Seq != got+1 {
			t.Fatalf("the silent watcher got seq %d (%v) after %d", f.Seq, err, got)
		}
		got++
	}
	if got >= n {
		t.Errorf("the silent watcher got all %d events; it should have been closed for falling behind", got)
	}
}
