package kubernetes

import (
	"context"
	"errors"
	"github.com/skali-dev/studio/runs/platform"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recordingWaiter is a platform.Waiter that keeps what it heard.
type recordingWaiter struct {
	mu    sync.Mutex
	heard []string
}

func (w *recordingWaiter) Unreachable(what string, since time.Time, cause string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.heard = append(w.heard, "unreachable: "+what+": "+cause)
}

func (w *recordingWaiter) Reachable(what string, since time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.heard = append(w.heard, "reachable: "+what)
}

// TestAnAPIServerThatCannotBeReachedFailsWithTheRealCauseAfterTheRetryWindow
// points the client at a port nothing listens on: the request is tried
// again for the retry window (shortened here), the waiter hears that the
// API server cannot be reached, and the error names the server and the
// cause.
func TestAnAPIServerThatCannotBeReachedFailsWithTheRealCauseAfterTheRetryWindow(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := "http://" + l.Addr().String()
	l.Close()
	old := retryWindow
	retryWindow = 1500 * time.Millisecond
	t.Cleanup(func() { retryWindow = old })
	c := &Client{server: server, http: &http.Client{}}
	w := &recordingWaiter{}
	began := time.Now()
	_, err = c.Get(withWaiter(context.Background(), w), KindSecret, "ns", "values")
	took := time.Since(began)
	var ue *UnreachableError
	if !errors.As(err, &ue) || err.Error() != "the Kubernetes API server at "+server+" could not be reached: connection refused" {
		t.Fatalf("error %v (%T); want the API server named and connection refused", err, err)
	}
	if took < retryWindow {
		t.Errorf("gave up after %s, before the retry window of %s", took, retryWindow)
	}
	if len(w.heard) != 1 || !strings.HasPrefix(w.heard[0], "unreachable: the Kubernetes API server at "+server+": connection refused") {
		t.Errorf("the waiter heard %q", w.heard)
	}
}

// TestA5xxIsRetriedUntilTheAPIServerAnswers: two 503s, then the object.
func TestA5xxIsRetriedUntilTheAPIServerAnswers(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"kind":"Status","reason":"ServiceUnavailable","message":"etcdserver: leader changed"}`))
			return
		}
		w.Write([]byte(`{"kind":"Secret","metadata":{"name":"values"}}`))
	}))
	t.Cleanup(srv.Close)
	c := &Client{server: srv.URL, http: srv.Client()}
	w := &recordingWaiter{}
	o, err := c.Get(withWaiter(context.Background(), w), KindSecret, "ns", "values")
	if err != nil || str(o, "metadata", "name") != "values" {
		t.Fatalf("Get after two 503s: %v, %v", o, err)
	}
	if len(w.heard) != 2 || !strings.Contains(w.heard[0], "answered 503 Service Unavailable: etcdserver: leader changed") || !strings.HasPrefix(w.heard[1], "reachable: ") {
		t.Errorf("the waiter heard %q; want unreachable (503 and its message), then reachable", w.heard)
	}
}

func withWaiter(ctx context.Context, w *recordingWaiter) context.Context {
	return platform.WithWaiter(ctx, w)
}
