package web_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/web/webtest"
)

// heldRequest is a POST /validate of the session cookie, held in its
// handler: the handler has loaded the session and waits for the body
// (the server answers "100 Continue" at the handler's first read of it).
// finish sends the body and returns the answer.
type heldRequest struct {
	conn   net.Conn
	r      *bufio.Reader
	body   string
	finish func() *http.Response
}

func holdRequest(t *testing.T, s *webtest.Server, cookie *http.Cookie) *heldRequest {
	t.Helper()
	u, _ := url.Parse(s.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body := url.Values{"manifest": {webtest.MinimalManifest}}.Encode()
	fmt.Fprintf(conn, "POST /validate HTTP/1.1\r\nHost: %s\r\nOrigin: %s\r\nCookie: %s=%s\r\n"+
		"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		u.Host, s.URL, cookie.Name, cookie.Value, len(body))
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 100 ") {
		t.Fatalf("the held request got %q (%v), want 100 Continue", status, err)
	}
	if blank, err := r.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("after 100 Continue: %q (%v)", blank, err)
	}
	h := &heldRequest{conn: conn, r: r, body: body}
	h.finish = func() *http.Response {
		t.Helper()
		if _, err := conn.Write([]byte(h.body)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	return h
}

// TestARequestBesideAnotherNeverUndoesItsSessionChange: a request that
// loaded the session before another changed it, and ends after, leaves the
// change alone. The page's script reads parts of the page while a form is
// posted: the post's message must still show, and a sign-out must stay
// signed out. (scs with an idle timeout wrote every session back at the end
// of every request, the data it had loaded included.)
func TestARequestBesideAnotherNeverUndoesItsSessionChange(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithValueKeys())
	s.CreateEnvironment(t, "", "production")
	const values = "/projects/hello-world/environments/production/values"

	t.Run("the message of a post", func(t *testing.T) {
		c := s.SignInLocal(t)
		held := holdRequest(t, s, sessionCookie(t, s, c))
		if resp, body := s.PostForm(t, c, values, url.Values{"name": {"APP_DOMAIN"}, "value": {"shop.example.test"}, "confirm_orphan": {"1"}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("set a value = %d\n%s", resp.StatusCode, body)
		}
		if resp := held.finish(); resp.StatusCode != http.StatusOK {
			t.Fatalf("the held request = %d", resp.StatusCode)
		}
		if _, page := s.Get(t, c, values); !strings.Contains(page, "Saved APP_DOMAIN as version 1") {
			t.Errorf("the values page after the post lacks its message %q:\n%s", "Saved APP_DOMAIN as version 1", pageMain(page))
		}
	})

	t.Run("a sign-out", func(t *testing.T) {
		c := s.SignInLocal(t)
		cookie := sessionCookie(t, s, c)
		held := holdRequest(t, s, cookie)
		if resp, _ := s.PostForm(t, c, "/logout", nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign out = %d", resp.StatusCode)
		}
		held.finish()
		// Whoever still holds the cookie of the ended session gets nothing.
		again := s.NewClient()
		u, _ := url.Parse(s.URL)
		again.Jar.SetCookies(u, []*http.Cookie{cookie})
		if status, _ := s.Get(t, again, "/"); status != http.StatusSeeOther {
			t.Errorf("GET / with the signed-out session's cookie = %d, want 303 to sign-in", status)
		}
	})
}
