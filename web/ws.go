package web

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/handlers"
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
	streamPing = newAtomicDuration(30 * time.Second)
	// streamPongWait is how long a stream waits for any frame (a pong
	// answers each ping) before it closes the connection as dead.
	streamPongWait = newAtomicDuration(75 * time.Second)
	// streamRecheck is how often an idle stream re-checks that the session
	// and the role still allow it.
	streamRecheck = 30 * time.Second
	// accessCacheTTL is how long an access check's answer is reused, by
	// every stream of the same session and environment.
	accessCacheTTL = 2 * time.Second
	// streamWriteWait bounds each write to a client.
	streamWriteWait = 10 * time.Second
)

// atomicDuration is a setting tests may change while streams read it.
type atomicDuration struct{ atomic.Int64 }

func newAtomicDuration(d time.Duration) *atomicDuration {
	a := &atomicDuration{}
	a.Store(int64(d))
	return a
}

func (a *atomicDuration) get() time.Duration { return time.Duration(a.Load()) }

// Close codes beyond RFC 6455's, in the range for applications.
const (
	// closeAccessRemoved: the session ended or the role was removed; the
	// page should not reconnect.
	closeAccessRemoved = 4403
)

// streams serves the event stream websockets.
type streams struct {
	a         *app
	hub       *events.Hub
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
	s.metrics.followHub(s.hub)
	if s.fragments == nil {
		s.fragments = pageFragments{now: a.deps.DB.Now}
	}
	if u, err := url.Parse(a.deps.PublicURL); err == nil && u.Host != "" {
		s.origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		// Clients send nothing but control frames: a small read buffer,
		// and the write buffers come from a pool shared by all streams
		// (event frames are written from prepared messages, without one).
		ReadBufferSize:  128,
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
		if apperr.CodeOf(err) == apperr.NotFound {
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

// streamNumbers reads the {run} of a run stream and ?after=N, each within
// the range of its column (runs.id is a bigint; a run's event sequence an
// integer, an environment's a bigint), before any query and before the
// upgrade: a number beyond it is an answer, not a stream that fails.
func streamNumbers(r *http.Request, runStream bool) (runID, after int64, err error) {
	seqBits := 64
	if runStream {
		seqBits = 32
		runID, err = strconv.ParseInt(chi.URLParam(r, "run"), 10, 64)
		if err != nil || runID <= 0 {
			return 0, 0, apperr.Errorf(apperr.NotFound, "There is no such run.")
		}
	}
	if q := r.URL.Query().Get("after"); q != "" {
		after, err = strconv.ParseInt(q, 10, seqBits)
		if err != nil || after < 0 {
			limit := "9223372036854775807"
			if runStream {
				limit = "2147483647"
			}
			return 0, 0, apperr.Errorf(apperr.Invalid, "after must be a sequence number from 0 to %s.", limit)
		}
	}
	return runID, after, nil
}

func (s *streams) serve(w http.ResponseWriter, r *http.Request, runStream bool) error {
	ctx := r.Context()
	reqID := handlers.RequestID(ctx)
	if !s.originAllowed(r) {
		s.a.logger.Warn("event stream refused: foreign origin", "request_id", reqID, "path", r.URL.Path, "origin", r.Header.Get("Origin"))
		return apperr.Errorf(apperr.Forbidden, "This page may only be watched from the Studio itself.")
	}
	runID, after, err := streamNumbers(r, runStream)
	if err != nil {
		return err
	}
	v, err := s.readSession(r)
	if err != nil {
		return err
	}
	if v == nil {
		return apperr.Errorf(apperr.Unauthorized, "Sign in first.")
	}
	r = r.WithContext(handlers.WithUser(ctx, v.user))
	env, _, err := s.a.base.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	stream := events.EnvironmentStream(env.ID)
	if runStream {
		if _, err := s.a.base.RunOf(ctx, env, runID); err != nil {
			return err
		}
		stream = events.RunStream(runID)
	}
	if !isWebsocketUpgrade(r) {
		return apperr.Errorf(apperr.Invalid, "This address is a websocket: open it from the page that shows the run.")
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
		s: s, conn: conn, sub: sub, token: v.token, userID: v.user.ID, signedInAt: v.signedInAt,
		envID: env.ID, streamID: stream.ID, kind: stream.Kind.String(), requestID: reqID,
	}
	// The backlog is read and written from the request's goroutine. Then it
	// ends (and the server's buffers with it): an idle stream is its reader
	// goroutine and a timer, and a writer goroutine runs only while there
	// are events to write. Until the backlog is out, this goroutine is the
	// writer: a kick (the client leaving, say) must not start another.
	st.writing.Store(true)
	st.start()
	if err := st.catchUp(ctx); err != nil {
		st.stop(err)
		return nil
	}
	sub.SetNotify(st.kick)
	st.writing.Store(false)
	st.kick()
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

var (
	errAccessRemoved  = errors.New("web: access to the stream was removed")
	errPeerGone       = errors.New("web: the client went away")
	errClientProtocol = errors.New("web: the client sent a frame it should not")
)

// liveStream is one open websocket following one stream. It keeps only
// what it needs (ids, not the user or the request), since an idle
// installation may hold many thousands.
type liveStream struct {
	s          *streams
	conn       *websocket.Conn
	sub        *events.Subscription
	token      string
	userID     int64
	signedInAt time.Time
	envID      int64
	streamID   int64
	kind       string
	requestID  string

	// writing says a writer goroutine runs (see kick).
	writing atomic.Bool
	stopped atomic.Bool
	// lastChecked is when access was last confirmed (Unix nanoseconds).
	lastChecked atomic.Int64
	// lastHeard is when the client last sent anything (a pong, mostly).
	lastHeard atomic.Int64
	timer     *time.Timer

	mu sync.Mutex
	// cause is why the stream must end, set by the reader or the timer.
	cause error
}

func (st *liveStream) log(level slog.Level, msg string, args ...any) {
	st.s.a.logger.Log(context.Background(), level, msg, append([]any{
		"request_id", st.requestID, "user_id", st.userID, "stream", st.kind, "id", st.streamID}, args...)...)
}

// start begins the stream: a reader goroutine handles the client's pongs
// and close; one timer (no goroutine while it waits) pings and re-checks
// access.
func (st *liveStream) start() {
	st.lastChecked.Store(time.Now().UnixNano())
	st.lastHeard.Store(time.Now().UnixNano())
	st.s.metrics.streamOpened(st.kind)
	go st.read()
	st.mu.Lock()
	st.timer = time.AfterFunc(jitter(streamPing.get()), st.tick)
	st.mu.Unlock()
}

// end records why the stream must end and wakes the writer to end it.
func (st *liveStream) end(err error) {
	st.mu.Lock()
	if st.cause == nil {
		st.cause = err
	}
	st.mu.Unlock()
	st.kick()
}

func (st *liveStream) ended() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.cause
}

// stop ends the stream once: it tells the client why (see finish),
// releases the subscription and closes the connection.
func (st *liveStream) stop(err error) {
	if !st.stopped.CompareAndSwap(false, true) {
		return
	}
	st.mu.Lock()
	st.timer.Stop()
	st.mu.Unlock()
	st.finish(err)
	st.sub.Close()
	st.conn.Close()
	st.s.metrics.streamClosed(st.kind)
}

// catchUp writes the stored backlog.
func (st *liveStream) catchUp(ctx context.Context) error {
	for {
		evs, err := st.sub.Backlog(ctx)
		if err != nil || len(evs) == 0 {
			return err
		}
		if err := st.write(evs); err != nil {
			return err
		}
	}
}

// kick runs the writer unless it runs already. The hub calls it when events
// are queued (and when the subscription fails); end calls it too. The
// writer is the only goroutine that uses the subscription.
func (st *liveStream) kick() {
	if !st.stopped.Load() && st.writing.CompareAndSwap(false, true) {
		go st.drain()
	}
}

// drain writes what is queued, then returns (the goroutine ends).
func (st *liveStream) drain() {
	for {
		if err := st.ended(); err != nil {
			st.stop(err)
			return
		}
		evs, err := st.sub.Poll(context.Background())
		if err != nil {
			st.stop(err)
			return
		}
		if len(evs) == 0 {
			st.writing.Store(false)
			// Something queued between Poll and Store found writing set
			// and started nothing: look again.
			if (st.sub.Pending() || st.ended() != nil) && st.writing.CompareAndSwap(false, true) {
				continue
			}
			return
		}
		if time.Since(time.Unix(0, st.lastChecked.Load())) > accessCacheTTL {
			if err := st.checkAccess(false); err != nil {
				st.stop(err)
				return
			}
		}
		if err := st.write(evs); err != nil {
			st.stop(err)
			return
		}
	}
}

// write sends one frame per event.
func (st *liveStream) write(evs []*events.Event) error {
	for _, e := range evs {
		pm := st.s.frame(e)
		if pm == nil {
			continue
		}
		_ = st.conn.SetWriteDeadline(time.Now().Add(streamWriteWait))
		if err := st.conn.WritePreparedMessage(pm); err != nil {
			st.log(slog.LevelDebug, "event stream write failed", "err", err)
			return errPeerGone
		}
		st.s.metrics.eventDelivered(st.kind, e.Notified)
	}
	return nil
}

// finish tells the client with a close code what to do next.
func (st *liveStream) finish(err error) {
	code, reason := websocket.CloseInternalServerErr, "internal error"
	switch {
	case errors.Is(err, events.ErrHubClosed):
		code, reason = websocket.CloseGoingAway, "server shutting down"
	case errors.Is(err, events.ErrSlowSubscriber):
		code, reason = websocket.CloseTryAgainLater, "fell behind; resume"
		st.s.metrics.subscriberTooSlow(st.kind)
		st.log(slog.LevelInfo, "event stream closed: client fell behind")
	case errors.Is(err, errAccessRemoved):
		code, reason = closeAccessRemoved, "access removed"
		st.log(slog.LevelInfo, "event stream closed: access removed")
	case errors.Is(err, errPeerGone):
		return // nothing to tell a peer that is gone
	case errors.Is(err, errClientProtocol):
		code, reason = websocket.CloseProtocolError, "unexpected frame"
	default:
		st.log(slog.LevelWarn, "event stream failed", "err", err)
	}
	_ = st.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
}

// read consumes what the client sends and ends the stream when the client
// goes. Clients send only control frames (pong, ping, close), so this reads
// frames straight from the connection instead of through gorilla's reader:
// its goroutine then blocks only a few calls deep, and the stack of an idle
// stream shrinks to the minimum. A client that stops answering pings is
// found by tick (a read deadline would cost every idle stream a timer).
func (st *liveStream) read() {
	nc := st.conn.NetConn()
	// head holds a frame header (at most 14 bytes); payload a control
	// frame's payload (at most 125).
	head := make([]byte, 14+125)
	payload := head[14:]
	for {
		if _, err := io.ReadFull(nc, head[:2]); err != nil {
			st.end(errPeerGone)
			return
		}
		st.lastHeard.Store(time.Now().UnixNano())
		fin, op := head[0]&0x80 != 0, head[0]&0x0f
		masked, n := head[1]&0x80 != 0, int64(head[1]&0x7f)
		switch n {
		case 126:
			if _, err := io.ReadFull(nc, head[2:4]); err != nil {
				st.end(errPeerGone)
				return
			}
			n = int64(binary.BigEndian.Uint16(head[2:4]))
		case 127:
			if _, err := io.ReadFull(nc, head[2:10]); err != nil {
				st.end(errPeerGone)
				return
			}
			n = int64(binary.BigEndian.Uint64(head[2:10]))
		}
		control := op >= 8
		if !masked || n > 512 || n < 0 || (control && (n > 125 || !fin)) || (op > 2 && op < 8) || op > 10 {
			// Not a frame a browser sends: close as the protocol says.
			st.end(errClientProtocol)
			return
		}
		var mask [4]byte
		if _, err := io.ReadFull(nc, mask[:]); err != nil {
			st.end(errPeerGone)
			return
		}
		if !control {
			// Data is not expected; read past it.
			if _, err := io.CopyN(io.Discard, nc, n); err != nil {
				st.end(errPeerGone)
				return
			}
			continue
		}
		p := payload[:n]
		if _, err := io.ReadFull(nc, p); err != nil {
			st.end(errPeerGone)
			return
		}
		for i := range p {
			p[i] ^= mask[i%4]
		}
		switch op {
		case websocket.CloseMessage:
			// Answer the close with the client's code, then end.
			reply := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
			if len(p) >= 2 {
				reply = append([]byte(nil), p[:2]...)
			}
			_ = st.conn.WriteControl(websocket.CloseMessage, reply, time.Now().Add(time.Second))
			st.end(errPeerGone)
			return
		case websocket.PingMessage:
			_ = st.conn.WriteControl(websocket.PongMessage, append([]byte(nil), p...), time.Now().Add(streamWriteWait))
		}
	}
}

// tick pings the client, re-checks access and schedules the next tick.
func (st *liveStream) tick() {
	if st.stopped.Load() {
		return
	}
	if time.Since(time.Unix(0, st.lastHeard.Load())) > streamPongWait.get() {
		st.end(errPeerGone)
		return
	}
	if err := st.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(streamWriteWait)); err != nil {
		st.end(errPeerGone)
		return
	}
	if time.Since(time.Unix(0, st.lastChecked.Load())) >= streamRecheck-streamRecheck/5 {
		if err := st.checkAccess(true); err != nil {
			st.end(err)
			return
		}
	}
	st.mu.Lock()
	if !st.stopped.Load() {
		st.timer.Reset(jitter(streamPing.get()))
	}
	st.mu.Unlock()
}

// checkAccess ends the stream (errAccessRemoved) when the session has
// ended or the viewer lost their role on the environment. A database error
// is not a reason to close: the next check decides. With fresh false (the
// check before sending events) an answer up to accessStale old is used
// while a new one is fetched in the background, so events never wait for
// the database; a removed role then stops the stream within about
// accessCacheTTL plus one batch.
func (st *liveStream) checkAccess(fresh bool) error {
	if time.Since(st.signedInAt) > st.s.a.deps.SessionLifetime {
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

// checkAccess asks the database whether the session still exists and its
// user still holds a role on the environment.
func (s *streams) checkAccess(k accessKey) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, found, err := s.a.deps.DB.Sessions().FindCtx(ctx, k.token); err != nil || !found {
		return false, err
	}
	u, err := s.a.deps.DB.UserByID(ctx, k.userID)
	if apperr.CodeOf(err) == apperr.NotFound {
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
func (s *streams) frame(e *events.Event) *websocket.PreparedMessage {
	pm, _ := e.Memo(func() any { return s.buildFrame(e) }).(*websocket.PreparedMessage)
	return pm
}

func (s *streams) buildFrame(e *events.Event) *websocket.PreparedMessage {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var frags []Fragment
	var err error
	if e.Stream.Kind == events.RunEvents {
		frags, err = s.fragments.RunFragments(ctx, e.Stream.ID, e)
	} else {
		frags, err = s.fragments.EnvironmentFragments(ctx, e.Stream.ID, e)
	}
	if err != nil {
		s.a.logger.Warn("event stream: render fragments", "stream", e.Stream.Kind.String(), "id", e.Stream.ID, "seq", e.Seq, "err", err)
	}
	data, err := encodeFrame(e, frags)
	if err != nil {
		s.a.logger.Error("event stream: encode frame", "stream", e.Stream.Kind.String(), "id", e.Stream.ID, "seq", e.Seq, "err", err)
		return nil
	}
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
	if err != nil {
		s.a.logger.Error("event stream: prepare frame", "err", err)
		return nil
	}
	return pm
}

// encodeFrame writes an event's frame: its stored payload (a JSON object
// the runs package wrote) with seq, at and the fragments added. The payload
// is copied as it is, not decoded and encoded again: this runs for every
// event on the way to its watchers.
func encodeFrame(e *events.Event, frags []Fragment) ([]byte, error) {
	payload := bytes.TrimSpace(e.Payload)
	if len(payload) < 2 || payload[0] != '{' || payload[len(payload)-1] != '}' || !json.Valid(payload) {
		// Not an object: keep it under a name of its own.
		p := json.RawMessage(`null`)
		if json.Valid(payload) {
			p = payload
		}
		payload = fmt.Appendf(nil, `{"payload":%s}`, p)
	}
	// The payload's own fields first: a reader that meets a name twice
	// keeps the last, so seq, at and fragments are always the Studio's.
	body := bytes.TrimSpace(payload[1 : len(payload)-1])
	buf := make([]byte, 0, len(payload)+64+fragmentsSize(frags))
	buf = append(buf, '{')
	if len(body) > 0 {
		buf = append(buf, body...)
		buf = append(buf, ',')
	}
	buf = append(buf, `"seq":`...)
	buf = strconv.AppendInt(buf, e.Seq, 10)
	buf = append(buf, `,"at":"`...)
	buf = e.At.UTC().AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, '"')
	if len(frags) > 0 {
		// Not escaped for embedding in HTML (the frame never is): a
		// fragment's markup travels as it is, not as \u003c and friends.
		w := bytes.NewBuffer(append(buf, `,"fragments":`...))
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(frags); err != nil {
			return nil, err
		}
		buf = bytes.TrimRight(w.Bytes(), "\n")
	}
	return append(buf, '}'), nil
}

func fragmentsSize(frags []Fragment) int {
	n := 0
	for _, f := range frags {
		n += len(f.ID) + len(f.HTML) + 32
	}
	return n
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
	ok, err := check(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[k] != old {
		return
	}
	if err != nil {
		old.refreshing = false
		return
	}
	e := &accessEntry{done: make(chan struct{}), ok: ok, checked: time.Now()}
	close(e.done)
	c.entries[k] = e
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
