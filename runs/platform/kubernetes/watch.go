package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// watchHub keeps one watch per kind for the whole process, over every
// namespace, on the objects the Studio manages, and hands each version of
// an object to whoever follows it: a deploy of many services costs one
// request per object it reads, not one watch per run.
type watchHub struct {
	client *Client
	logger *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	kinds  map[string]*kindWatch
}

func newWatchHub(client *Client, logger *slog.Logger) *watchHub {
	ctx, cancel := context.WithCancel(context.Background())
	return &watchHub{client: client, logger: logger, ctx: ctx, cancel: cancel}
}

type kindWatch struct {
	mu   sync.Mutex
	subs map[string]map[chan Object]struct{} // namespace/name → followers
}

func (h *watchHub) kind(k Kind) *kindWatch {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kinds == nil {
		h.kinds = map[string]*kindWatch{}
	}
	kw := h.kinds[k.Resource]
	if kw == nil {
		kw = &kindWatch{subs: map[string]map[chan Object]struct{}{}}
		h.kinds[k.Resource] = kw
		go h.run(k, kw)
	}
	return kw
}

// run watches the kind for as long as the process lives, opening the
// watch again whenever the API server ends it.
func (h *watchHub) run(k Kind, kw *kindWatch) {
	sel := LabelManagedBy + "=" + managedBy
	wait := 200 * time.Millisecond
	for {
		n := 0
		err := h.client.watchAll(h.ctx, k, sel, func(o Object) {
			n++
			md, _ := o["metadata"].(Object)
			ns, _ := md["namespace"].(string)
			name, _ := md["name"].(string)
			kw.mu.Lock()
			for _, key := range []string{ns + "/" + name, ns + "/"} {
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
		if h.ctx.Err() != nil {
			return
		}
		if n > 0 {
			wait = 200 * time.Millisecond
		} else {
			wait = min(wait*2, 5*time.Second)
		}
		if err != nil {
			h.logger.Warn("kubernetes watch ended", "kind", k.Kind, "error", err, "retry_in", wait)
		}
		select {
		case <-h.ctx.Done():
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

// subscribe returns a channel that receives the newest version of the
// object (of every managed object of the namespace when name is "") each
// time it changes, until unsubscribe is called.
func (h *watchHub) subscribe(k Kind, namespace, name string) (ch chan Object, unsubscribe func()) {
	kw := h.kind(k)
	ch = make(chan Object, 1)
	key := namespace + "/" + name
	kw.mu.Lock()
	if kw.subs[key] == nil {
		kw.subs[key] = map[chan Object]struct{}{}
	}
	kw.subs[key][ch] = struct{}{}
	kw.mu.Unlock()
	return ch, func() {
		kw.mu.Lock()
		delete(kw.subs[key], ch)
		if len(kw.subs[key]) == 0 {
			delete(kw.subs, key)
		}
		kw.mu.Unlock()
	}
}
