package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/webtest"
)

// TestCheckNowTwiceChecksOnce clicks Check now for a domain whose 240
// addresses never answer, and again while that check runs (its DNS lookup
// is held until the second click has been answered): the second click adds
// no check and says so; the first reports the addresses its deadline left
// unasked.
func TestCheckNowTwiceChecksOnce(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	lookups := &heldLookups{Resolver: dns}
	d := &webtest.Deploys{Resolver: lookups}
	s := webtest.Start(t, webtest.WithDeploys(d), func(*web.Deps) {
		// The first click waits for its check's end (up to runs.CheckWait):
		// a short probe leaves that wait the time a busy machine needs.
		d.Service.Platform.(*local.Platform).Prober.Deadline = 2 * time.Second
	})
	s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	c := s.SignInLocal(t)
	for name, value := range map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": "x"} {
		if resp, _ := s.PostForm(t, c, wikiEnv+"/values", url.Values{"name": {name}, "value": {value}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("set %s: %d", name, resp.StatusCode)
		}
	}
	dns.Set("wiki.test", "127.0.0.2")
	const envPath = wikiEnv
	resp, _ := s.PostForm(t, c, envPath+"/deploys", url.Values{})
	waitForRun(t, s, c, resp.Header.Get("Location"))

	u, _ := url.Parse(s.URL)
	var silent []string
	for i := range 240 {
		addr := fmt.Sprintf("127.1.%d.%d", i/250, i%250+1)
		l, err := net.Listen("tcp", net.JoinHostPort(addr, u.Port()))
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					// Never answer; close once the prober hangs up.
					for buf := make([]byte, 512); ; {
						if _, err := conn.Read(buf); err != nil {
							conn.Close()
							return
						}
					}
				}()
			}
		}()
		silent = append(silent, addr)
	}
	dns.Set("wiki.test", silent...)

	checking, release := lookups.hold("wiki.test")
	t.Cleanup(release)
	first := make(chan *http.Response, 1)
	go func() {
		resp, _ := s.PostForm(t, c, envPath+"/probe", url.Values{"domain": {"wiki.test"}})
		first <- resp
	}()
	checks := func() int {
		var n int
		if err := s.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'studio_reconcile_environment'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The first click's check runs, held at its lookup of wiki.test.
	select {
	case <-checking:
	case resp := <-first:
		t.Fatalf("the first Check now was answered (%d) before its check looked wiki.test up", resp.StatusCode)
	case <-time.After(time.Minute):
		t.Fatalf("the first Check now's check did not look wiki.test up within a minute (%d checks queued)", checks())
	}
	resp, _ = s.PostForm(t, c, envPath+"/probe", url.Values{"domain": {"wiki.test"}})
	release()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != envPath {
		t.Fatalf("second Check now: %d %s, want 303 to the environment", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page := s.Get(t, c, envPath)
	if want := "domains is already queued or running, so none was added."; !strings.Contains(page, want) {
		t.Errorf("after the second click the page lacks %q:\n%s", want, pageMain(page))
	}
	if n := checks(); n != 1 {
		t.Errorf("%d checks queued after two clicks, want 1", n)
	}

	if resp := <-first; resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first Check now: %d", resp.StatusCode)
	}
	_, page = s.Get(t, c, envPath)
	if want := "wiki.test does not point here yet ("; !strings.Contains(page, want) || !strings.Contains(page, "of its 240 addresses were not asked before the probe") {
		t.Errorf("after the first click the page lacks %q and the addresses left unasked:\n%s", want, pageMain(page))
	}
	if !strings.Contains(page, `data-service-state="DNS pending"`) {
		t.Errorf("wiki.test is no longer DNS pending:\n%s", pageMain(page))
	}
}

// heldLookups is the test's DNS, whose lookups of a domain wait while it
// is held (hold), so a check of that domain stays under way for as long as
// the test needs. A held lookup waits past its context's end: the probe
// then finds its deadline passed, and asks none of the addresses.
type heldLookups struct {
	*webtest.Resolver
	mu      sync.Mutex
	host    string        // the domain held
	release chan struct{} // closed when the hold is lifted; nil when there is none
	waiting chan struct{} // closed when a lookup first waits
}

// hold holds every lookup of host from now until release; waiting is
// closed once one waits.
func (r *heldLookups) hold(host string) (waiting <-chan struct{}, release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.host, r.release, r.waiting = host, make(chan struct{}), make(chan struct{})
	lift := r.release
	var once sync.Once
	return r.waiting, func() { once.Do(func() { close(lift) }) }
}

// LookupIP implements platform.Resolver.
func (r *heldLookups) LookupIP(ctx context.Context, network, host string) ([]net.IP, error) {
	r.mu.Lock()
	release, waiting := r.release, r.waiting
	if host != r.host {
		release, waiting = nil, nil
	}
	if waiting != nil {
		select {
		case <-waiting:
		default:
			close(waiting)
		}
	}
	r.mu.Unlock()
	if release != nil {
		<-release
	}
	return r.Resolver.LookupIP(ctx, network, host)
}
