package web_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/webtest"
)

// TestValidSignInsPassTheFailedSignInLimit: 300 bad links and 300 forged
// callbacks from one address use up its failed sign-ins, yet a valid local
// link and a complete OIDC sign-in from that same address (behind a proxy,
// everybody's) still sign in; the bad ones keep being refused.
func TestValidSignInsPassTheFailedSignInLimit(t *testing.T) {
	t.Parallel()
	// The default burst, refilled once an hour instead of every 15 s: the
	// 600 bad attempts below can take 20 s on a starved machine (3,000 took
	// 97 s in a cold CI run), and a refill in between would let one through,
	// which is the limiter working.
	s := webtest.Start(t, webtest.WithSignInLimit(web.DefaultSignInFailures.Burst, time.Hour))
	attacker := s.NewClient()
	statuses := map[int]int{}
	for i := range 300 {
		statuses[badSignIn(t, s, attacker, fmt.Sprintf("/login/local?token=bad-%d", i))]++
	}
	burst := web.DefaultSignInFailures.Burst
	if statuses[http.StatusUnauthorized] != burst || statuses[http.StatusTooManyRequests] != 300-burst {
		t.Fatalf("300 bad links = %v, want %d answered 401 and the rest 429", statuses, burst)
	}

	person := s.NewClient()
	resp, _ := s.Follow(t, person, s.LocalLoginURL(t))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a valid link after 300 bad ones = %d, want 303 (signed in)", resp.StatusCode)
	}
	if status, body := s.Get(t, person, "/"); status != http.StatusOK || !strings.Contains(body, "Local administrator") {
		t.Errorf("home after the valid link = %d, want 200 signed in as the local administrator", status)
	}

	for range 300 {
		if got := badSignIn(t, s, attacker, "/login/oidc/callback?state=x&code=y"); got != http.StatusTooManyRequests {
			t.Fatalf("a forged callback while limited = %d, want 429", got)
		}
	}
	resp, body := s.SignInWith(t, s.NewClient(), webtest.Identity("ada@example.test", "Ada Lovelace"))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Errorf("an OIDC sign-in from the limited address = %d to %q, want 303 to /: %s", resp.StatusCode, resp.Header.Get("Location"), pageMain(body))
	}
	// The callback of a started flow is heard out even when it then fails.
	c := s.NewClient()
	callback := s.Authorize(t, c, s.StartOIDC(t, c), webtest.Identity("ada@example.test", "Ada Lovelace"))
	resp, body = s.Follow(t, c, replaceParam(t, callback, "code", "not-the-code"))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "did not accept this sign-in") {
		t.Errorf("a started flow's callback with a wrong code = %d, want 400 saying the provider did not accept it", resp.StatusCode)
	}

	if got := badSignIn(t, s, attacker, "/login/local?token=bad-again"); got != http.StatusTooManyRequests {
		t.Errorf("a bad link after the valid sign-ins = %d, want 429 still", got)
	}
}

// TestTrustedProxiesNameTheClient: X-Forwarded-For decides whose failed
// sign-ins are counted only when the peer is a trusted proxy, and then it
// is the right-most address that is not a trusted proxy itself.
func TestTrustedProxiesNameTheClient(t *testing.T) {
	t.Parallel()
	trusting := func(cidrs ...string) webtest.Option {
		return func(d *web.Deps) {
			for _, c := range cidrs {
				d.TrustedProxies = append(d.TrustedProxies, netip.MustParsePrefix(c))
			}
		}
	}
	for _, tc := range []struct {
		name    string
		trusted []string
	}{
		{"no trusted proxies", nil},
		{"the peer is not a trusted proxy", []string{"10.0.0.0/8", "::1/128"}},
	} {
		t.Run(tc.name+": a spoofed header is ignored", func(t *testing.T) {
			s := webtest.Start(t, webtest.WithSignInLimit(3, time.Hour), trusting(tc.trusted...))
			c := s.NewClient()
			var got []int
			for i := range 6 {
				got = append(got, badSignIn(t, s, c, "/login/local?token=bad", fmt.Sprintf("203.0.113.%d", i)))
			}
			want := []int{401, 401, 401, 429, 429, 429}
			if !slices.Equal(got, want) {
				t.Errorf("bad links each claiming another X-Forwarded-For = %v, want %v (all from the peer)", got, want)
			}
			if got := failedAddresses(t, s); !slices.Equal(got, []string{"127.0.0.1"}) {
				t.Errorf("failed sign-ins recorded for %v, want only the peer 127.0.0.1", got)
			}
		})
	}

	t.Run("a trusted peer's header names the client", func(t *testing.T) {
		s := webtest.Start(t, webtest.WithSignInLimit(3, time.Hour), trusting("127.0.0.1/32", "10.0.0.0/8"))
		c := s.NewClient()
		steps := []struct {
			xff  []string
			want int
		}{
			{[]string{"203.0.113.7"}, 401},
			{[]string{"203.0.113.7"}, 401},
			{[]string{"203.0.113.7"}, 401},
			{[]string{"203.0.113.7"}, 429},
			// Another client behind the same proxy is not limited.
			{[]string{"203.0.113.8"}, 401},
			// What the client wrote left of its own address changes nothing.
			{[]string{"198.51.100.1, 203.0.113.7"}, 429},
			// A second trusted proxy in the chain is skipped.
			{[]string{"203.0.113.7, 10.1.2.3"}, 429},
			{[]string{"203.0.113.9", "10.1.2.3"}, 401},
			// Without the header the proxy itself is the client.
			{nil, 401},
		}
		for i, st := range steps {
			if got := badSignIn(t, s, c, "/login/local?token=bad", st.xff...); got != st.want {
				t.Errorf("step %d: bad link with X-Forwarded-For %q = %d, want %d", i, st.xff, got, st.want)
			}
		}
		want := []string{"127.0.0.1", "203.0.113.7", "203.0.113.8", "203.0.113.9"}
		if got := failedAddresses(t, s); !slices.Equal(got, want) {
			t.Errorf("failed sign-ins recorded for %v, want %v", got, want)
		}
	})
}

// badSignIn GETs a failing sign-in path with c, sending each of xff as an
// X-Forwarded-For line, and returns the status; a 429 must say when to
// retry.
func badSignIn(t *testing.T, s *webtest.Server, c *http.Client, path string, xff ...string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range xff {
		req.Header.Add("X-Forwarded-For", v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
		t.Fatal("a 429 without Retry-After")
	}
	return resp.StatusCode
}

// failedAddresses lists the client addresses of the failed sign-in records.
func failedAddresses(t *testing.T, s *webtest.Server) []string {
	t.Helper()
	rows, err := s.DB.Pool.Query(t.Context(), `SELECT DISTINCT detail->>'address' FROM audit_events WHERE action = 'sign-in.failed' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
