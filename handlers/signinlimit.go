package handlers

import (
	"context"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// SignInLimiter limits attempts per client address with a token bucket:
// Burst attempts at once, then one more every Every. It lives in one
// process's memory, so replicas behind a load balancer each keep their own
// count (the README says so); that still bounds what one address can make
// any replica do.
type SignInLimiter struct {
	Burst int
	Every time.Duration
	// Now is the clock; tests replace it.
	Now func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// maxTrackedAddresses bounds the limiter's memory: past it, addresses whose
// buckets have refilled are forgotten.
const maxTrackedAddresses = 10000

// NewSignInLimiter returns a limiter of burst attempts, refilled one per every.
func NewSignInLimiter(burst int, every time.Duration) *SignInLimiter {
	return &SignInLimiter{Burst: burst, Every: every, Now: time.Now, buckets: map[string]*bucket{}}
}

// refill returns addr's bucket brought up to now. The caller holds mu.
func (l *SignInLimiter) refill(addr string) *bucket {
	now := l.Now()
	b, ok := l.buckets[addr]
	if !ok {
		if len(l.buckets) >= maxTrackedAddresses {
			l.forgetFull(now)
		}
		b = &bucket{tokens: float64(l.Burst), at: now}
		l.buckets[addr] = b
		return b
	}
	if elapsed := now.Sub(b.at); elapsed > 0 {
		b.tokens = math.Min(float64(l.Burst), b.tokens+float64(elapsed)/float64(l.Every))
		b.at = now
	}
	return b
}

func (l *SignInLimiter) forgetFull(now time.Time) {
	for addr, b := range l.buckets {
		if b.tokens+float64(now.Sub(b.at))/float64(l.Every) >= float64(l.Burst) {
			delete(l.buckets, addr)
		}
	}
}

// Allow reports whether addr may make an attempt now, and if not, how long
// until it may.
func (l *SignInLimiter) Allow(addr string) (retryAfter time.Duration, ok bool) {
	if l == nil {
		return 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(addr)
	if b.tokens >= 1 {
		return 0, true
	}
	return time.Duration((1 - b.tokens) * float64(l.Every)), false
}

// Take counts one attempt of addr.
func (l *SignInLimiter) Take(addr string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(addr)
	b.tokens = math.Max(0, b.tokens-1)
}

type clientAddrKey struct{}

// WithClientAddr returns ctx carrying the address the request came from, as
// web found it (the peer of the connection, or the client a trusted proxy
// forwarded for).
func WithClientAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientAddrKey{}, addr)
}

// ClientAddr is the address a request came from: the one web put in the
// context (see WithClientAddr), else the peer of the connection.
// Forwarded-for headers are believed only from trusted proxies, and web
// decides that, since any client can send them.
func ClientAddr(r *http.Request) string {
	if addr, ok := r.Context().Value(clientAddrKey{}).(string); ok && addr != "" {
		return addr
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// tooManyAttempts answers 429 with Retry-After in whole seconds.
func tooManyAttempts(w http.ResponseWriter, retryAfter time.Duration) int {
	secs := int(math.Ceil(retryAfter.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	return max(secs, 1)
}
