package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/skali-dev/studio/runs/platform"
)

// watchHub keeps one watch per kind and environment namespace, on the
// objects the Studio manages there, for as long as someone follows one of
// them, and hands each version of an object to whoever follows it: a
// deploy of many services costs one request per object it reads, not one
// watch per object. Watches are per namespace because the Studio may read
// only its own namespaces (its RoleBinding in each), never the cluster's.
type watchHub struct {
	client *Client
	logger *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	kinds  map[string]*kindWatch // "resource namespace" → watch
}

func newWatchHub(client *Client, logger *slog.Logger) *watchHub {
	ctx, cancel := context.WithCancel(context.Background())
	return &watchHub{client: client, logger: logger, ctx: ctx, cancel: cancel}
}

type kindWatch struct {
	mu     sync.Mutex
	subs   map[string]map[chan Object]struct{} // name ("" for all) → followers
	users  int                                 // subscriptions, under watchHub.mu
	cancel context.CancelFunc
	// waiters are the followers' Waiters: they hear when the watch
	// cannot reach the API server, and when it can again (down, since
	// and what say whether it cannot now).
	waiters   map[platform.Waiter]int
	down      bool
	since     time.Time
	what, why string
}

// Unreachable implements platform.Waiter for the watch's own requests.
func (kw *kindWatch) Unreachable(what string, since time.Time, cause string) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	if kw.down {
		return // still: since stays the first failure's
	}
	kw.down, kw.since, kw.what, kw.why = true, since, what, cause
	for w := range kw.waiters {
		w.Unreachable(what, since, cause)
	}
}

// Reachable implements platform.Waiter.
func (kw *kindWatch) Reachable(what string, since time.Time) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	if !kw.down {
		return
	}
	kw.down = false
	for w := range kw.waiters {
		w.Reachable(what, kw.since)
	}
}

// addWaiter makes w hear of the watch's reach until the returned func is
// called; a watch that cannot reach the API server now says so at once.
func (kw *kindWatch) addWaiter(w platform.Waiter) func() {
	if w == nil {
		return func() {}
	}
	kw.mu.Lock()
	defer kw.mu.Unlock()
	if kw.waiters == nil {
		kw.waiters = map[platform.Waiter]int{}
	}
	kw.waiters[w]++
	if kw.down {
		w.Unreachable(kw.what, kw.since, kw.why)
	}
	return func() {
		kw.mu.Lock()
		defer kw.mu.Unlock()
		if kw.waiters[w]--; kw.waiters[w] <= 0 {
			delete(kw.waiters, w)
		}
	}
}

// acquire returns the namespace's watch of the kind, started when nobody
// followed it; release ends it with its last follower.
func (h *watchHub) acquire(k Kind, namespace string) (*kindWatch, func()) {
	key := k.Resource + " " + namespace
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kinds == nil {
		h.kinds = map[string]*kindWatch{}
	}
	kw := h.kinds[key]
	if kw == nil {
		ctx, cancel := context.WithCancel(h.ctx)
		kw = &kindWatch{subs: map[string]map[chan Object]struct{}{}, cancel: cancel}
		h.kinds[key] = kw
		go h.run(platform.WithWaiter(ctx, kw), k, namespace, kw)
	}
	kw.users++
	return kw, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if kw.users--; kw.users == 0 {
			kw.cancel()
			delete(h.kinds, key)
		}
	}
}

// run watches the kind in the namespace until ctx ends, opening the watch
// again whenever the API server ends it.
func (h *watchHub) run(ctx context.Context, k Kind, namespace string, kw *kindWatch) {
	sel := LabelManagedBy + "=" + managedBy
	wait := 200 * time.Millisecond
	for {
		n := 0
		err := h.client.watchAll(ctx, k, namespace, sel, func(o Object) {
			n++
			md, _ := o["metadata"].(Object)
			name, _ := md["name"].(string)
			kw.mu.Lock()
			for _, key := range []string{name, ""} {
				for ch := range kw.subs[key] {
					select {
					case ch <- o:
					default:
						// The follower is behind: it only needs the newest
						// version, so drop the older one it has not read.
						select {
						case <-ch:
						default:
						}
						ch <- o
					}
				}
			}
			kw.mu.Unlock()
		})
		if ctx.Err() != nil {
			return
		}
		if n > 0 {
			wait = 200 * time.Millisecond
		} else {
			wait = min(wait*2, 5*time.Second)
		}
		if err != nil {
			h.logger.Warn("kubernetes watch ended", "kind", k.Kind, "namespace", namespace, "error", err, "retry_in", wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// follow calls seen with the object's current version and every later one
// until seen says done or ctx ends.
func (h *watchHub) follow(ctx context.Context, k Kind, namespace, name string, seen func(Object) (bool, error)) error {
	ch, unsubscribe := h.subscribe(k, namespace, name)
	defer unsubscribe()
	defer h.hearReach(ctx, k, namespace)()
	// Subscribed first, then read: no version between the two is missed.
	o, err := h.client.Get(ctx, k, namespace, name)
	if err != nil {
		return err
	}
	if done, err := seen(o); done || err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case o := <-ch:
			if o["deleted"] == true {
				return fmt.Errorf("%s %s/%s was deleted", k.Kind, namespace, name)
			}
			if done, err := seen(o); done || err != nil {
				return err
			}
		}
	}
}

// hearReach makes the Waiter of ctx hear whether the namespace's watch of
// the kind reaches the API server, until the returned func is called (the
// caller holds a subscription, so the watch exists).
func (h *watchHub) hearReach(ctx context.Context, k Kind, namespace string) func() {
	w := platform.WaiterFrom(ctx)
	if w == nil {
		return func() {}
	}
	h.mu.Lock()
	kw := h.kinds[k.Resource+" "+namespace]
	h.mu.Unlock()
	if kw == nil {
		return func() {}
	}
	return kw.addWaiter(w)
}

// subscribe returns a channel that receives the newest version of the
// object (of every managed object of the namespace when name is "") each
// time it changes, until unsubscribe is called.
func (h *watchHub) subscribe(k Kind, namespace, name string) (ch chan Object, unsubscribe func()) {
	return h.subscribeBuffered(k, namespace, name, 1)
}

// subscribeBuffered is subscribe keeping up to n versions the follower
// has not read: a follower of every object of the namespace (name "")
// loses no object's change while it is behind by fewer than n.
func (h *watchHub) subscribeBuffered(k Kind, namespace, name string, n int) (ch chan Object, unsubscribe func()) {
	kw, release := h.acquire(k, namespace)
	ch = make(chan Object, n)
	kw.mu.Lock()
	if kw.subs[name] == nil {
		kw.subs[name] = map[chan Object]struct{}{}
	}
	kw.subs[name][ch] = struct{}{}
	kw.mu.Unlock()
	return ch, func() {
		kw.mu.Lock()
		delete(kw.subs[name], ch)
		if len(kw.subs[name]) == 0 {
			delete(kw.subs, name)
		}
		kw.mu.Unlock()
		release()
	}
}
