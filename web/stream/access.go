package stream

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/handlers"
	"github.com/skali-dev/studio/store"
)

// The access cache: a stream re-checks, before the events it sends and
// every streamRecheck, that its session still exists and its user still
// holds a role on the environment, through answers shared by the
// process's streams.

// checkAccess ends the stream (errAccessRemoved) when the session has
// ended or the viewer lost their role on the environment. A database error
// is not a reason to close: the next check decides. With fresh false (the
// check before sending events) an answer up to accessStale old is used
// while a new one is fetched in the background, so events never wait for
// the database; a removed role then stops the stream within about
// accessCacheTTL plus one batch.
func (st *liveStream) checkAccess(fresh bool) error {
	if st.s.base.SessionEnded(st.signedInAt) {
		return errAccessRemoved
	}
	ok, err := st.s.access.allowed(accessKey{token: st.token, userID: st.userID, envID: st.envID}, st.s.checkAccess, fresh)
	if err != nil {
		st.log(slog.LevelWarn, "event stream: check access", "err", err)
		return nil
	}
	st.lastChecked.Store(time.Now().UnixNano())
	if !ok {
		return errAccessRemoved
	}
	return nil
}

// checkAccessCached is checkAccess(false) for a pool writer, which must
// not wait: answered says the cache held an answer young enough
// (accessStale) to decide with, without a database round trip. One older
// than accessCacheTTL is refreshed in the background, as checkAccess does,
// by a goroutine the writer starts once it has written (pw.flush): started
// here, its queries would take a core from the frames on their way.
// Without an answer, the caller hands the stream to its own goroutine,
// which waits for the check.
func (st *liveStream) checkAccessCached(pw *poolWriter) (answered bool, err error) {
	if st.s.base.SessionEnded(st.signedInAt) {
		return true, errAccessRemoved
	}
	ok, answered, refresh := st.s.access.cached(accessKey{token: st.token, userID: st.userID, envID: st.envID}, st.s.checkAccess)
	if refresh != nil {
		pw.refresh = append(pw.refresh, refresh)
	}
	if !answered {
		return false, nil
	}
	st.lastChecked.Store(time.Now().UnixNano())
	if !ok {
		return true, errAccessRemoved
	}
	return true, nil
}

// checkAccess asks the access rule again, from the database, whether the
// stream's viewer may still watch the environment: the session still
// exists and is its user's (SessionUser), or the API token is still usable
// and its owner's (token.go), and that user's role there (RoleOn, capped by
// the token) is viewer at least.
func (s *Server) checkAccess(k accessKey) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u, t, err := s.viewerOf(ctx, k)
	if u == nil || err != nil {
		return false, err
	}
	role, err := s.base.RoleOn(ctx, u, t, k.envID)
	if err != nil {
		return false, err
	}
	return role.Includes(store.RoleViewer), nil
}

// viewerOf is who holds k now, by the access rule, with the API token they
// watch with (nil for a session); a nil user when k's session or token no
// longer stands for k's user.
func (s *Server) viewerOf(ctx context.Context, k accessKey) (*store.User, *store.Token, error) {
	if t, ok, err := s.tokenOf(ctx, k); ok { // token.go
		if t == nil || err != nil {
			return nil, nil, err
		}
		u, err := s.base.TokenUser(ctx, t)
		if u, err = ownUser(u, err, k); u == nil || err != nil {
			return nil, nil, err
		}
		return u, t, nil
	}
	sctx, err := s.base.Sessions.Load(ctx, k.token)
	if err != nil {
		return nil, nil, err
	}
	u, _, err := s.base.SessionUser(sctx)
	if errors.Is(err, handlers.ErrSessionEnded) {
		return nil, nil, nil
	}
	if u, err = ownUser(u, err, k); u == nil || err != nil {
		return nil, nil, err
	}
	return u, nil, nil
}

// ownUser is u when the rule found it and it is k's user; a user gone, a
// token no longer usable or a session now someone else's is nil.
func ownUser(u *store.User, err error, k accessKey) (*store.User, error) {
	switch code := apperr.CodeOf(err); {
	case err != nil && (code == apperr.NotFound || code == apperr.Unauthorized):
		return nil, nil
	case err != nil:
		return nil, err
	case u == nil || u.ID != k.userID:
		return nil, nil
	}
	return u, nil
}

// accessKey is what an access check depends on.
type accessKey struct {
	token  string
	userID int64
	envID  int64
}

type accessEntry struct {
	done       chan struct{}
	ok         bool
	err        error
	checked    time.Time
	refreshing bool
}

// accessCache shares access checks between the streams of one session and
// environment (a page open in many tabs, or many watchers): one database
// round trip per key and TTL, and callers arriving during a check wait for
// its answer instead of asking again.
type accessCache struct {
	mu      sync.Mutex
	entries map[accessKey]*accessEntry
}

// accessStale is the oldest answer a non-fresh check may use.
var accessStale = 15 * time.Second

func (c *accessCache) allowed(k accessKey, check func(accessKey) (bool, error), fresh bool) (bool, error) {
	c.mu.Lock()
	e, ok := c.entries[k]
	if ok {
		select {
		case <-e.done:
			age := time.Since(e.checked)
			switch {
			case e.err != nil || age > accessStale || (fresh && age > accessCacheTTL):
				ok = false
			case age > accessCacheTTL && !e.refreshing:
				e.refreshing = true
				go c.refresh(k, e, check)
			}
		default: // a check is under way: wait for it
		}
	}
	if !ok {
		e = c.startLocked(k)
		c.mu.Unlock()
		c.run(e, k, check)
		return e.ok, e.err
	}
	c.mu.Unlock()
	<-e.done
	return e.ok, e.err
}

// cached is allowed with fresh false, answered only when that needs
// neither a database round trip nor a wait for one under way. When the
// answer is older than accessCacheTTL it also returns the refresh that
// allowed would start, for the caller to start (go refresh()) once it has
// written.
func (c *accessCache) cached(k accessKey, check func(accessKey) (bool, error)) (ok, answered bool, refresh func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, found := c.entries[k]
	if !found {
		return false, false, nil
	}
	select {
	case <-e.done:
	default:
		return false, false, nil
	}
	age := time.Since(e.checked)
	if e.err != nil || age > accessStale {
		return false, false, nil
	}
	if age > accessCacheTTL && !e.refreshing {
		e.refreshing = true
		refresh = func() { c.refresh(k, e, check) }
	}
	return e.ok, true, refresh
}

// seed records that k was allowed by a check made at time at another
// way (a stream's handshake), unless the cache holds an answer as new, or
// a check is under way.
func (c *accessCache) seed(k accessKey, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, found := c.entries[k]; found && e.keeps(at) {
		return
	}
	c.answerLocked(k, true, at)
	if len(c.entries) > 10000 {
		c.pruneLocked()
	}
}

// keeps reports whether e stands against an answer checked at t: its
// check is under way, or was made at t or later.
func (e *accessEntry) keeps(t time.Time) bool {
	select {
	case <-e.done:
		return !e.checked.Before(t)
	default:
		return true
	}
}

// answerLocked stores a finished answer for k, checked at at.
func (c *accessCache) answerLocked(k accessKey, ok bool, at time.Time) {
	e := &accessEntry{done: make(chan struct{}), ok: ok, checked: at}
	close(e.done)
	c.entries[k] = e
}

func (c *accessCache) startLocked(k accessKey) *accessEntry {
	e := &accessEntry{done: make(chan struct{})}
	c.entries[k] = e
	if len(c.entries) > 10000 {
		c.pruneLocked()
	}
	return e
}

func (c *accessCache) run(e *accessEntry, k accessKey, check func(accessKey) (bool, error)) {
	e.ok, e.err = check(k)
	e.checked = time.Now()
	close(e.done)
}

// refresh replaces old with a new answer, checked in the background while
// callers go on using old. A failed check keeps old (until accessStale).
func (c *accessCache) refresh(k accessKey, old *accessEntry, check func(accessKey) (bool, error)) {
	began := time.Now()
	ok, err := check(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.entries[k]; cur != old {
		// Replaced meanwhile (a handshake's seed, a fresh check): keep
		// whichever answer was checked later.
		if cur == nil || err != nil || cur.keeps(began) {
			return
		}
	} else if err != nil {
		old.refreshing = false
		return
	}
	c.answerLocked(k, ok, time.Now())
}

// pruneLocked drops finished entries past their TTL.
func (c *accessCache) pruneLocked() {
	for k, e := range c.entries {
		select {
		case <-e.done:
			if time.Since(e.checked) > accessStale {
				delete(c.entries, k)
			}
		default:
		}
	}
}
