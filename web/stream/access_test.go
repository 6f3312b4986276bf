package stream

import (
	"sync/atomic"
	"testing"
	"time"
)

// A stream's handshake checks the session and role itself: the answer it
// seeds is what the stream's later checks get, without asking the database
// again before a frame goes out; once older than accessCacheTTL it is
// still answered, with a refresh for the writer to start after writing;
// and a seed never replaces a newer answer (a role removed since).
func TestAccessCacheSeededByTheHandshake(t *testing.T) {
	c := &accessCache{entries: map[accessKey]*accessEntry{}}
	var asked atomic.Int32
	allow := false
	check := func(accessKey) (bool, error) { asked.Add(1); return allow, nil }
	k := accessKey{token: "t", userID: 1, envID: 2}

	if _, answered, _ := c.cached(k, check); answered {
		t.Fatal("an empty cache answered")
	}
	c.seed(k, time.Now())
	ok, answered, refresh := c.cached(k, check)
	if !ok || !answered || refresh != nil {
		t.Fatalf("right after the handshake: ok %v, answered %v, refresh due %v; want allowed from the cache, no refresh", ok, answered, refresh != nil)
	}

	c.seed(k, time.Now().Add(-accessCacheTTL-time.Second)) // older than what the cache holds: ignored
	if _, _, refresh := c.cached(k, check); refresh != nil {
		t.Fatal("an older seed replaced the cache's answer")
	}

	k2 := accessKey{token: "t", userID: 1, envID: 3}
	c.seed(k2, time.Now().Add(-accessCacheTTL-time.Second))
	ok, answered, refresh = c.cached(k2, check)
	if !ok || !answered || refresh == nil {
		t.Fatalf("past the TTL: ok %v, answered %v, refresh due %v; want allowed from the cache and a refresh to start", ok, answered, refresh != nil)
	}
	if asked.Load() != 0 {
		t.Fatalf("the database was asked %d times before the writer started the refresh", asked.Load())
	}
	if _, _, again := c.cached(k2, check); again != nil {
		t.Fatal("a second refresh was handed out while the first is due")
	}
	beforeRefresh := time.Now()
	refresh() // the role was removed meanwhile
	if ok, answered, _ := c.cached(k2, check); ok || !answered {
		t.Fatalf("after the refresh: ok %v, answered %v; want refused", ok, answered)
	}
	c.seed(k2, beforeRefresh) // a handshake that checked before the refusal
	if ok, _, _ := c.cached(k2, check); ok {
		t.Fatal("a seed from before the refusal allowed the stream again")
	}

	// A handshake that checked before a refresh began, seeding while the
	// refresh asks the database: the refresh's refusal is the newer answer.
	k3 := accessKey{token: "t", userID: 1, envID: 4}
	c.seed(k3, time.Now().Add(-accessCacheTTL-time.Second))
	handshake := time.Now().Add(-time.Millisecond)
	racing := func(k accessKey) (bool, error) {
		c.seed(k, handshake)
		return false, nil
	}
	c.mu.Lock()
	e := c.entries[k3]
	c.mu.Unlock()
	c.refresh(k3, e, racing)
	if ok, _, _ := c.cached(k3, check); ok {
		t.Fatal("a seed from a handshake older than the refresh kept the stream allowed")
	}
}
