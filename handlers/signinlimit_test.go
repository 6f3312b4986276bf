package handlers

import (
	"testing"
	"time"
)

// TestSignInLimiterRefillsOneAttemptPerPeriod: after its burst an address
// waits, is told how long, and gets one attempt back per period; another
// address is not affected. The clock is the limiter's own, moved by hand,
// so no time passes that the test does not decide.
func TestSignInLimiterRefillsOneAttemptPerPeriod(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	l := NewSignInLimiter(3, time.Minute)
	l.Now = func() time.Time { return now }
	const addr = "192.0.2.7"
	for i := range 3 {
		if _, ok := l.Allow(addr); !ok {
			t.Fatalf("attempt %d of a burst of 3 refused", i+1)
		}
		l.Take(addr)
	}
	wait, ok := l.Allow(addr)
	if ok || wait != time.Minute {
		t.Fatalf("after the burst: allowed %v, retry after %s, want refused for 1m0s", ok, wait)
	}
	if _, ok := l.Allow("198.51.100.1"); !ok {
		t.Fatal("another address was refused")
	}
	now = now.Add(40 * time.Second)
	if wait, ok := l.Allow(addr); ok || wait != 20*time.Second {
		t.Fatalf("40 s later: allowed %v, retry after %s, want refused for 20s", ok, wait)
	}
	now = now.Add(20 * time.Second)
	if _, ok := l.Allow(addr); !ok {
		t.Fatal("a period after the burst: refused, want one attempt back")
	}
	l.Take(addr)
	if _, ok := l.Allow(addr); ok {
		t.Fatal("a second attempt after one period was allowed")
	}
	// A long quiet spell gives back the burst, never more.
	now = now.Add(time.Hour)
	for i := range 3 {
		if _, ok := l.Allow(addr); !ok {
			t.Fatalf("an hour later, attempt %d of 3 refused", i+1)
		}
		l.Take(addr)
	}
	if _, ok := l.Allow(addr); ok {
		t.Fatal("an hour later, a fourth attempt was allowed: the burst is 3")
	}
}
