package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/web/webtest"
)

// TestCheckNowTwiceChecksOnce clicks Check now for a domain whose 240
// addresses never answer, and again while that check runs: the second
// click adds no check and says so; the first reports the addresses its
// deadline left unasked.
func TestCheckNowTwiceChecksOnce(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	s, c := deployableWiki(t, &webtest.Deploys{}, dns, "127.0.0.2")
	const envPath = "/projects/team-wiki/environments/production"
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
	for i := 0; checks() == 0; i++ {
		if i == 400 {
			t.Fatal("the first Check now queued no check")
		}
		time.Sleep(25 * time.Millisecond)
	}
	resp, _ = s.PostForm(t, c, envPath+"/probe", url.Values{"domain": {"wiki.test"}})
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
