package web

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/handlers"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// Event streams: a page that shows a run or an environment opens a
// websocket to .../events?after=N and receives every event after sequence
// number N (the stored backlog), then live events, one JSON text frame per
// event:
//
//	{"seq": 7, "at": "...", "run": {...}, "checkpoint": {...}, "fragments": [{"id": "checkpoint-3", "html": "..."}]}
//
// (the event's payload with seq, at and the rendered fragments added).
//
// The streams are mounted outside the session middleware: a connection
// that stays open for hours must never write the session back (it would
// overwrite what the person's other tabs changed meanwhile) nor set a cookie
// on a hijacked connection. They read the session from the store once, and
// re-check the session and the role every streamRecheck and before the
// events they send (through a cache shared by the process's streams).

// Timings of event streams; variables so tests may shorten them.
var (
	// streamPing is how often a stream pings its client.
	streamPing = 30 * time.Second
	// streamPongWait is how long a stream waits for any frame (a pong
	// answers each ping) before it closes the connection as dead.
	streamPongWait = 75 * time.Second
	// streamRecheck is how often an idle stream re-checks that the session
	// and the role still allow it.
	streamRecheck = 30 * time.Second
	// accessCacheTTL is how long an access check's answer is reused, by
	// every stream of the same session and environment.
	accessCacheTTL = 2 * time.Second
	// streamWriteWait bounds each write to a client.
	streamWriteWait = 10 * time.Second
)

// Close codes beyond RFC 6455's, in the range for applications.
const (
	// closeAccessRemoved: the session ended or the role was removed; the
	// page should not reconnect.
	closeAccessRemoved = 4403
)

// streams serves the event stream websockets.
type streams struct {
	a         *app
	hub       *runs.Hub
	fragments FragmentRenderer
	metrics   *Metrics
	upgrader  websocket.Upgrader
	origins   map[string]bool
	access    *accessCache
}

func newStreams(a *app) *streams {
	s := &streams{
		a: a, hub: a.deps.Hub, fragments: a.deps.Fragments, metrics: a.deps.Metrics,
		origins: map[string]bool{},
		access:  &accessCache{entries: map[accessKey]*accessEntry{}},
	}
	if s.fragments == nil {
		s.fragments = NoFragments{}
	}
	if u, err := url.Parse(a.deps.PublicURL); err == nil && u.Host != "" {
		s.origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		// Clients send nothing but control frames: a small read buffer,
		// and the write buffers come from a pool shared by all streams
		// (event frames are written from prepared messages, without one).
		ReadBufferSize:  256,
		WriteBufferSize: 4096,
		WriteBufferPool: &sync.Pool{},
		// The origin is checked (and logged) before Upgrade is called.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	return s
}

// originAllowed accepts a handshake without Origin (not a browser, so not a
// cross-site request) or from the Studio's own origin; it refuses another
// site's origin and "null" (sandboxed frames, file: pages).
func (s *streams) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if s.origins[strings.ToLower(u.Scheme+"://"+u.Host)] {
		return true
	}
	return strings.EqualFold(u.Host, r.Host)
}

func isWebsocketUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// viewer is who watches a stream, as read from the session.
type viewer struct {
	user       *store.User
	token      string
	signedInAt time.Time
}

// readSession loads the request's session from the store without touching
// it (no commit, no cookie) and returns its user, or nil when anonymous.
func (s *streams) readSession(r *http.Request) (*viewer, error) {
	c, err := r.Cookie(s.a.sessions.Cookie.Name)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	ctx, err := s.a.sessions.Load(r.Context(), c.Value)
	if err != nil {
		return nil, err
	}
	id, signedIn, ok := s.a.base.SessionUserID(ctx)
	if !ok {
		return nil, nil
	}
	v := &viewer{token: c.Value, signedInAt: time.UnixMilli(signedIn)}
	if time.Since(v.signedInAt) > s.a.deps.SessionLifetime {
		return nil, nil
	}
	u, err := s.a.deps.DB.UserByID(r.Context(), id)
	if err != nil {
		if store.ErrorCode(err) == store.NotFound {
			return nil, nil
		}
		return nil, err
	}
	v.user = u
	return v, nil
}

// streamRunEvents serves GET .../runs/{run}/events?after=N.
func (s *streams) streamRunEvents(w http.ResponseWriter, r *http.Request) error {
	return s.serve(w, r, true)
}

// streamEnvironmentEvents serves GET .../environments/{env}/events?after=N.
func (s *streams) streamEnvironmentEvents(w http.ResponseWriter, r *http.Request) error {
	return s.serve(w, r, false)
}

func (s *streams) serve(w http.ResponseWriter, r *http.Request, runStream bool) error {
	ctx := r.Context()
	reqID := handlers.RequestID(ctx)
	if !s.originAllowed(r) {
		s.a.logger.Warn("event stream refused: foreign origin", "request_id", reqID, "path", r.URL.Path, "origin", r.Header.Get("Origin"))
		return store.Errorf(store.Forbidden, "This page may only be watched from the Studio itself.")
	}
	v, err := s.readSession(r)
	if err != nil {
		return err
	}
	if v == nil {
		return store.Errorf(store.Unauthorized, "Sign in first.")
	}
	r = r.WithContext(handlers.WithUser(ctx, v.user))
	env, _, err := s.a.base.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	stream := runs.EnvironmentStream(env.ID)
	if runStream {
		runID, err := strconv.ParseInt(chi.URLParam(r, "run"), 10, 64)
		if err != nil || runID <= 0 {
			return store.Errorf(store.NotFound, "There is no such run.")
		}
		envID, err := s.a.deps.DB.RunEnvironmentID(ctx, runID)
		if err != nil {
			return err
		}
		if envID != env.ID {
			return store.Errorf(store.NotFound, "There is no such run.")
		}
		stream = runs.RunStream(runID)
	}
	var after int64
	if q := r.URL.Query().Get("after"); q != "" {
		after, err = strconv.ParseInt(q, 10, 64)
		if err != nil || after < 0 {
			return store.Errorf(store.Invalid, "after must be a sequence number (0 or more).")
		}
	}
	if !isWebsocketUpgrade(r) {
		return store.Errorf(store.Invalid, "This address is a websocket: open it from the page that shows the run.")
	}
	if s.hub == nil {
		return errors.New("web: event streams have no hub")
	}

	// Subscribe before upgrading, so a failure is still an HTTP answer.
	sub, err := s.hub.Subscribe(context.WithoutCancel(ctx), stream, after)
	if err != nil {
		return err
	}
	conn, err := s.upgrader.Upgrade(hijacker(w), r, nil)
	if err != nil {
		// Upgrade has answered the client already.
		sub.Close()
		s.a.logger.Info("event stream handshake failed", "request_id", reqID, "err", err)
		return nil
	}
	st := &liveStream{
		s: s, conn: conn, sub: sub, viewer: v, envID: env.ID, kind: stream.Kind.String(),
		logger: s.a.logger.With("request_id", reqID, "user_id", v.user.ID, "stream", stream.Kind.String(), "id", stream.ID),
	}
	// The request's goroutine (and the server's buffers with it) ends now;
	// the stream goes on in two small goroutines of its own.
	go st.run()
	return nil
}

// hijacker finds the http.Hijacker under middleware's response wrappers
// (gorilla/websocket asserts the interface instead of using
// http.ResponseController).
func hijacker(w http.ResponseWriter) http.ResponseWriter {
	for {
		if _, ok := w.(http.Hijacker); ok {
			return w
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

var errAccessRemoved = errors.New("web: access to the stream was removed")

// liveStream is one open websocket following one stream.
type liveStream struct {
	s      *streams
	conn   *websocket.Conn
	sub    *runs.Subscription
	viewer *viewer
	envID  int64
	kind   string
	logger *slog.Logger

	ctx    context.Context
	cancel context.CancelCauseFunc
	// lastChecked is when access was last confirmed (Unix nanoseconds);
	// the writer and the recheck timer both set it.
	lastChecked atomic.Int64
}

// run writes events until the subscription or the connection ends. A reader
// goroutine handles the client's pongs and close; timers (no goroutine while
// they wait) send pings and re-check access.
func (st *liveStream) run() {
	st.ctx, st.cancel = context.WithCancelCause(context.Background())
	defer st.cancel(errStreamDone) // stops the timers' next rounds
	st.lastChecked.Store(time.Now().UnixNano())
	st.s.metrics.streamOpened(st.kind)
	defer st.s.metrics.streamClosed(st.kind)
	defer st.sub.Close()
	defer st.conn.Close()

	go st.read()
	ping := time.AfterFunc(jitter(streamPing), st.ping)
	defer ping.Stop()
	recheck := time.AfterFunc(jitter(streamRecheck), st.recheck)
	defer recheck.Stop()

	for {
		evs, err := st.sub.Next(st.ctx)
		if err != nil {
			st.finish(err)
			return
		}
		if time.Since(time.Unix(0, st.lastChecked.Load())) > accessCacheTTL {
			if err := st.checkAccess(); err != nil {
				st.finish(err)
				return
			}
		}
		for _, e := range evs {
			pm := st.s.frame(e)
			if pm == nil {
				continue
			}
			_ = st.conn.SetWriteDeadline(time.Now().Add(streamWriteWait))
			if err := st.conn.WritePreparedMessage(pm); err != nil {
				st.cancel(err)
				st.logger.Debug("event stream write failed", "err", err)
				return
			}
			st.s.metrics.eventDelivered(st.kind, e.Notified)
		}
	}
}

// finish closes the connection with the close code that tells the page
// what to do next.
func (st *liveStream) finish(err error) {
	if cause := context.Cause(st.ctx); cause != nil {
		err = cause
	}
	code, reason := websocket.CloseInternalServerErr, "internal error"
	switch {
	case errors.Is(err, runs.ErrHubClosed):
		code, reason = websocket.CloseGoingAway, "server shutting down"
	case errors.Is(err, runs.ErrSlowSubscriber):
		code, reason = websocket.CloseTryAgainLater, "fell behind; resume"
		st.s.metrics.subscriberTooSlow(st.kind)
		st.logger.Info("event stream closed: client fell behind")
	case errors.Is(err, errAccessRemoved):
		code, reason = closeAccessRemoved, "access removed"
		st.logger.Info("event stream closed: access removed")
	case errors.Is(err, errPeerGone):
		return // nothing to tell a peer that is gone
	default:
		st.logger.Warn("event stream failed", "err", err)
	}
	_ = st.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
}

var (
	errPeerGone   = errors.New("web: the client went away")
	errStreamDone = errors.New("web: the stream ended")
)

// read consumes what the client sends (pongs, close; nothing else is
// expected) and ends the stream when the client goes or stops answering.
func (st *liveStream) read() {
	c := st.conn
	c.SetReadLimit(512)
	_ = c.SetReadDeadline(time.Now().Add(streamPongWait))
	c.SetPongHandler(func(string) error {
		return c.SetReadDeadline(time.Now().Add(streamPongWait))
	})
	for {
		if _, _, err := c.NextReader(); err != nil {
			st.cancel(errPeerGone)
			return
		}
	}
}

// ping sends a ping and schedules the next one.
func (st *liveStream) ping() {
	if st.ctx.Err() != nil {
		return
	}
	if err := st.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(streamWriteWait)); err != nil {
		st.cancel(errPeerGone)
		return
	}
	time.AfterFunc(streamPing, st.ping)
}

// recheck re-checks access on an idle stream and schedules the next check.
func (st *liveStream) recheck() {
	if st.ctx.Err() != nil {
		return
	}
	if err := st.checkAccess(); err != nil {
		st.cancel(err)
		return
	}
	time.AfterFunc(jitter(streamRecheck), st.recheck)
}

// checkAccess ends the stream (errAccessRemoved) when the session has
// ended or the viewer lost their role on the environment. A database error
// is not a reason to close: the next check decides.
func (st *liveStream) checkAccess() error {
	v := st.viewer
	if time.Since(v.signedInAt) > st.s.a.deps.SessionLifetime {
		return errAccessRemoved
	}
	ok, err := st.s.access.allowed(accessKey{token: v.token, userID: v.user.ID, envID: st.envID}, st.s.checkAccess)
	if err != nil {
		st.logger.Warn("event stream: check access", "err", err)
		return nil
	}
	st.lastChecked.Store(time.Now().UnixNano())
	if !ok {
		return errAccessRemoved
	}
	return nil
}

// checkAccess asks the database whether the session still exists and its
// user still holds a role on the environment.
func (s *streams) checkAccess(k accessKey) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, found, err := s.a.deps.DB.Sessions().FindCtx(ctx, k.token); err != nil || !found {
		return false, err
	}
	u, err := s.a.deps.DB.UserByID(ctx, k.userID)
	if store.ErrorCode(err) == store.NotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	role, err := s.a.deps.DB.EnvironmentRole(ctx, u, k.envID)
	if err != nil {
		return false, err
	}
	return role.Includes(store.RoleViewer), nil
}

// frame returns the websocket message of an event, built once per event
// and process (live events are shared by all subscribers).
func (s *streams) frame(e *runs.Event) *websocket.PreparedMessage {
	pm, _ := e.Memo(func() any { return s.buildFrame(e) }).(*websocket.PreparedMessage)
	return pm
}

func (s *streams) buildFrame(e *runs.Event) *websocket.PreparedMessage {
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(e.Payload, &fields); err != nil {
		fields = map[string]json.RawMessage{"payload": e.Payload}
	}
	fields["seq"], _ = json.Marshal(e.Seq)
	fields["at"], _ = json.Marshal(e.At.UTC().Format(time.RFC3339Nano))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var frags []Fragment
	var err error
	if e.Stream.Kind == runs.RunEvents {
		frags, err = s.fragments.RunFragments(ctx, e.Stream.ID, e)
	} else {
		frags, err = s.fragments.EnvironmentFragments(ctx, e.Stream.ID, e)
	}
	if err != nil {
		s.a.logger.Warn("event stream: render fragments", "stream", e.Stream.Kind.String(), "id", e.Stream.ID, "seq", e.Seq, "err", err)
	}
	if len(frags) > 0 {
		fields["fragments"], _ = json.Marshal(frags)
	}
	data, err := json.Marshal(fields)
	if err != nil {
		s.a.logger.Error("event stream: encode frame", "err", err)
		return nil
	}
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
	if err != nil {
		s.a.logger.Error("event stream: prepare frame", "err", err)
		return nil
	}
	return pm
}

// jitter spreads periodic work of many streams: d ± 10 %.
func jitter(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}

// accessKey is what an access check depends on.
type accessKey struct {
	token  string
	userID int64
	envID  int64
}

type accessEntry struct {
	done    chan struct{}
	ok      bool
	err     error
	checked time.Time
}

// accessCache shares access checks between the streams of one session and
// environment (a page open in many tabs, or many watchers): one database
// round trip per key and TTL, and callers arriving during a check wait for
// its answer instead of asking again.
type accessCache struct {
	mu      sync.Mutex
	entries map[accessKey]*accessEntry
}

func (c *accessCache) allowed(k accessKey, check func(accessKey) (bool, error)) (bool, error) {
	c.mu.Lock()
	e, ok := c.entries[k]
	if ok {
		select {
		case <-e.done:
			if time.Since(e.checked) > accessCacheTTL || e.err != nil {
				ok = false
			}
		default: // a check is under way: wait for it
		}
	}
	if !ok {
		e = &accessEntry{done: make(chan struct{})}
		c.entries[k] = e
		if len(c.entries) > 10000 {
			c.pruneLocked()
		}
		c.mu.Unlock()
		e.ok, e.err = check(k)
		e.checked = time.Now()
		close(e.done)
		return e.ok, e.err
	}
	c.mu.Unlock()
	<-e.done
	return e.ok, e.err
}

// pruneLocked drops finished entries past their TTL.
func (c *accessCache) pruneLocked() {
	for k, e := range c.entries {
		select {
		case <-e.done:
			if time.Since(e.checked) > accessCacheTTL {
				delete(c.entries, k)
			}
		default:
		}
	}
}
