package store_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// silencer is a TCP proxy in front of the test's PostgreSQL that can fall
// silent, as a database host that drops off the network does: it then
// cuts the connections it carries and accepts new ones without ever
// answering them.
type silencer struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	silent bool
	conns  []net.Conn
}

func newSilencer(t *testing.T, target string) *silencer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silencer{l: l, target: target}
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go p.serve()
	return p
}

func (p *silencer) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		silent := p.silent
		p.mu.Unlock()
		if silent {
			continue // held open, never answered
		}
		go func() {
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			_, _ = io.Copy(c, up)
			c.Close()
		}()
	}
}

// fallSilent cuts every connection carried so far; new ones are held.
func (p *silencer) fallSilent() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.silent = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestSilentDatabaseHostIsUnreachableWithinSeconds: when the database's
// host stops answering altogether, a query without a deadline of its own
// (as a page's is) fails within seconds instead of waiting minutes for the
// system's TCP timeout, and the error says the database is unreachable.
func TestSilentDatabaseHostIsUnreachableWithinSeconds(t *testing.T) {
	u, err := url.Parse(storetest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	if u.Host == "" {
		t.Skip("the test database is reached through a unix socket")
	}
	p := newSilencer(t, u.Host)
	u.Host = p.l.Addr().String()
	ctx := context.Background()
	db, err := store.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Pool.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	p.fallSilent()
	// Past the pool's one second of idleness after which it checks a
	// connection before handing it out.
	time.Sleep(1100 * time.Millisecond)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := db.Pool.Exec(ctx, `SELECT 1`)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a query through a silent host succeeded")
		}
		if !store.Unreachable(err) {
			t.Errorf("the error of a silent host does not count as unreachable: %v", err)
		}
		if d := time.Since(start); d > store.DefaultConnectTimeout+5*time.Second {
			t.Errorf("the query failed after %s, want about %s", d.Round(time.Second), store.DefaultConnectTimeout)
		}
	case <-time.After(store.DefaultConnectTimeout + 25*time.Second):
		t.Fatalf("a query through a silent host still waits after %s", time.Since(start).Round(time.Second))
	}
}
